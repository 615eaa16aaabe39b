"""One training session for every protocol (issue 38): Lotter's recipe, the Chainer window, the autoencoder
and a user's model, each started by prednet-train and trained by `session.training.train`, record alike: a
complete manifest with this process's session, history.csv in the protocol's columns, progress lines.

The training process is this one (its `worker.launch` replaced by a direct call of the session), so the four
tiny runs share one framework import.
"""

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from prednet_keras import model_kinds
from prednet_keras.cli.train import main as train_main
from prednet_keras.session import training, worker
from prednet_keras.session.history import HISTORY_FIELDS
from prednet_keras.session.protocol import RecipeProtocol, UpdateProtocol
from tests.train.conftest import TINY

REPOSITORY = Path(__file__).resolve().parents[2]

TINY_MODEL = """
from prednet_keras.examples.mnist_cnn import small_cnn


def tiny():
    return small_cnn(train_images=64, val_images=32, batch_size=32)
"""


@pytest.fixture
def session_runs(monkeypatch):
    """Runs prednet-train's training process in this process, through the one session; lists the protocols
    that trained."""
    trained = []
    real_run = {cls: cls.run for cls in (RecipeProtocol, UpdateProtocol)}

    def spy(cls):
        def run(self, session, kind, *args, **kwargs):
            trained.append((kind.name, cls.__name__))
            return real_run[cls](self, session, kind, *args, **kwargs)

        return run

    for cls in real_run:
        monkeypatch.setattr(cls, "run", spy(cls))

    def launch(run_dir, runtime_config, quiet=False, resume=None, **_):
        training.train(run_dir, quiet=quiet, resume=resume)
        return 0

    monkeypatch.setattr(worker, "launch", launch)
    return trained


def _history(folder):
    with open(folder / "history.csv", newline="") as handle:
        reader = csv.DictReader(handle)
        return reader.fieldnames, list(reader)


def _protocol_cases(tiny_npz, tmp_path):
    model_file = tmp_path / "tiny_model.py"
    model_file.write_text(TINY_MODEL)
    return {
        "prednet": [*TINY, "--data", tiny_npz],
        "prednet-chainer": ["--model", "prednet-chainer", "--protocol", "quick", "--stack-sizes", "3,4",
                            "--size", "32x32", "--period", "12", "--bprop", "4", "--data", tiny_npz],
        "autoencoder": ["--model", "autoencoder", "--autoencoder", "dense", "--protocol", "quick",
                        "--images", "6"],
        "user": ["--model", f"{model_file}:tiny"],
    }


# Slow: four trainings (about 20 s on 2 cores); the fast loop trains each protocol in its own tests.
@pytest.mark.slow
@pytest.mark.parametrize("case", ["prednet", "prednet-chainer", "autoencoder", "user"])
def test_every_protocol_trains_through_the_one_session(case, session_runs, tiny_npz, tmp_path):
    args = _protocol_cases(tiny_npz, tmp_path)[case]
    folder = tmp_path / "run"
    result = CliRunner().invoke(train_main, [*map(str, args), "--quiet", "-o", str(folder)])
    assert result.exit_code == 0, result.output

    manifest = json.loads((folder / "manifest.json").read_text())
    kind = model_kinds.get(manifest["options"]["model"])
    # The kind's stated protocol trained it, once.
    assert session_runs == [(kind.name, type(kind.session_protocol).__name__)]
    assert manifest["status"] == "complete"
    assert len(manifest["sessions"]) == 1 and manifest["sessions"][0]["seconds"] > 0
    assert manifest["result"]["weights_checksum"]
    assert (folder / "model.keras").is_file() and (folder / "loss.png").is_file()

    columns, rows = _history(folder)
    lines = result.output.splitlines()
    if kind.follows_recipe:
        # Lotter's recipe: a row per step and per epoch, a line per epoch, a checkpoint per epoch.
        assert tuple(columns) == HISTORY_FIELDS
        assert [r["kind"] for r in rows] == ["step", "step", "epoch"] * 2
        assert [line.split("  ")[0] for line in lines if line.startswith("epoch ")] == ["epoch 1/2", "epoch 2/2"]
        assert manifest["result"]["epochs_completed"] == 2
        assert json.loads((folder / "state.json").read_text())["epoch"] == 2
    else:
        # A protocol counted in updates: a row per update, its update lines ending at the last.
        assert tuple(columns) == kind.history_columns
        updates = len(rows)
        assert updates > 0 and [int(r["update"]) for r in rows] == list(range(1, updates + 1))
        progress = [line for line in lines if " update " in line and ": loss " in line]
        assert progress and progress[-1].split(": loss")[0].endswith(f"update {updates}/{updates}")
        assert manifest["metric"]["value"] == pytest.approx(
            sum(float(r["loss"]) for r in rows[-manifest["metric"]["count"]:]) / manifest["metric"]["count"])
        # A complete run needs no checkpoint: none is left.
        assert not (folder / "state.json").exists() and not (folder / "checkpoints").exists()
    assert any(line.startswith("Done: ") for line in lines), result.output


def test_the_session_refuses_to_resume_a_protocol_without_checkpoints(tmp_path, monkeypatch):
    from prednet_keras.model_kinds.user import UserModelKind
    from prednet_keras.session.folder import RunFolder
    from prednet_keras.session.protocol import UpdateProtocol

    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    # A kind that states its runs cannot be continued (every shipped kind can: a user's model stands in).
    monkeypatch.setattr(UserModelKind, "session_protocol", UpdateProtocol(can_resume=False))
    folder.write_manifest({"options": {"model": "tiny.py:fn"}})
    before = folder.manifest_path.read_bytes()
    with pytest.raises(ValueError, match=r"^--resume is not available for --model tiny.py:fn: its protocol keeps "
                                         r"no checkpoints; start the run again \(--overwrite replaces it\)\.$"):
        training.train(folder.path, resume={"command": "prednet-train --resume", "epochs": None})
    assert folder.manifest_path.read_bytes() == before


@pytest.mark.slow
def test_ctrl_c_stops_a_protocol_run_after_its_update_and_says_how_to_continue(tmp_path):
    # A protocol counted in updates, interrupted after its first update: the session's stop reaches it as it
    # reaches the recipe, once the update in progress is recorded and checkpointed, and prednet-train keeps the
    # run for --resume.
    folder = tmp_path / "ae"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPOSITORY), os.environ.get("PYTHONPATH", "")]),
               TF_CPP_MIN_LOG_LEVEL="2")
    process = subprocess.Popen(
        [sys.executable, "-m", "prednet_keras.cli.train", "--model", "autoencoder", "--autoencoder", "dense",
         "--protocol", "quick", "--images", "100000", "-o", str(folder)],
        cwd=REPOSITORY, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = []
    for line in process.stdout:
        output.append(line)
        if line.startswith("  first update done in"):
            process.send_signal(signal.SIGINT)
            break
    output.append(process.stdout.read())
    assert process.wait(timeout=120) == 130, "".join(output)
    text = "".join(output)
    state = json.loads((folder / "state.json").read_text())
    assert 1 <= state["update"] < 100000
    assert (f"Interrupted with {state['update']} update{'s' if state['update'] > 1 else ''} checkpointed; continue "
            f"with:\n  prednet-train --resume --output {folder}" in text), text
    rows = _history(folder)[1]
    assert [int(r["update"]) for r in rows] == list(range(1, state["update"] + 1))
    assert (folder / state["checkpoint"]).is_file()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["sessions"][-1]["end_update"] == state["update"]
