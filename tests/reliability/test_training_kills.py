"""`kill -9` of the training process at each of the seven moments of an epoch's end, one run killed again and
again and resumed each time: the finished run is the run that was never killed, bit for bit.

The training process SIGKILLs itself (PREDNET_TEST_KILL_AT, as a power cut would) at one moment of an
epoch's end, in the order they happen: after the history row, with the checkpoint half written (its
temporary file complete, not yet renamed), after the checkpoint, after the state that makes the epoch
complete, with the best model half written, after the best model, after the clean-up. Each resume is killed
at the next moment; the last one finishes. (A kill after a step, mid-epoch, is
tests/train/test_train_cli.py::test_resume_after_a_kill_continues_the_same_history.) PyTorch on the CPU,
deterministic: its processes start fastest, and its repeats are bit-identical, so any difference is a kill's.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from prednet_keras.session import folder as run_folders
from prednet_keras.session.callbacks import KILL_MOMENTS
from tests.train.conftest import moving_squares

REPO = Path(__file__).resolve().parents[2]
TINY_TORCH = ["--backend", "torch", "--stack-sizes", "3,4,8", "--nt", "4", "--batch-size", "2", "--steps-per-epoch",
              "2", "--epochs", "6", "--val-sequences", "4", "--val-fraction", "0.25", "--deterministic", "--quiet"]

pytestmark = pytest.mark.slow


def _train(args, kill_at=None):
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "PREDNET_TEST_KILL_AT")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    if kill_at:
        env["PREDNET_TEST_KILL_AT"] = kill_at
    return subprocess.run([sys.executable, "-m", "prednet_keras.cli.train", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=300)


def _outcome(folder):
    """What a finished run is: its history (timings aside), best epoch, final and best weights."""
    folder = run_folders.RunFolder(folder)
    manifest = folder.read_manifest()
    history = [{k: v for k, v in row.items() if k != "seconds"} for row in folder.read_history()]
    result = manifest["result"]
    return {
        "history": history,
        "status": manifest["status"],
        "best_epoch": result["best_epoch"],
        "weights_checksum": result["weights_checksum"],
        "model_weights_checksum": result["model_weights_checksum"],
    }


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    frames, sources = moving_squares()
    path = tmp_path_factory.mktemp("data") / "squares.npz"
    np.savez(path, frames=frames, sources=sources)
    return path


@pytest.fixture(scope="module")
def reference(data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("reference") / "run"
    result = _train([*TINY_TORCH, "--data", data, "-o", folder])
    assert result.returncode == 0, result.stdout + result.stderr
    return _outcome(folder)


# Each kill's epoch: a kill before "state" leaves epoch 1 completed, so the next process redoes epoch 2; from
# "state" on the epoch is done and the next kill is in the next epoch. The best model's moments need epochs
# that improve, as epochs 3 and 4 do in the reference.
KILLS = [f"2:{moment}" for moment in KILL_MOMENTS[:4]] + ["3:model-partial", "4:model", "5:cleanup"]


def test_killed_at_every_moment_of_an_epochs_end_resumes_to_the_same_run(data, reference, tmp_path):
    val_losses = [row["val_loss"] for row in reference["history"] if row["kind"] == "epoch"]
    assert len(val_losses) == 6 and val_losses[2] < min(val_losses[:2]) and val_losses[3] < min(val_losses[:3])
    folder = tmp_path / "run"
    for number, kill_at in enumerate(KILLS):
        args = [*TINY_TORCH, "--data", data, "-o", folder] if number == 0 else ["--resume", "--quiet", "-o", folder]
        killed = _train(args, kill_at=kill_at)
        assert killed.returncode == 137, (kill_at, killed.stdout + killed.stderr)
        assert f"prednet-train --resume --output {folder}" in killed.stderr, kill_at
        # The kill left a valid state: the last epoch whose state was written, and no half-written file.
        epoch, moment = kill_at.split(":")
        written = KILL_MOMENTS.index(moment) >= KILL_MOMENTS.index("state")
        assert run_folders.RunFolder(folder).completed_epochs() == int(epoch) - (0 if written else 1), kill_at
    resumed = _train(["--resume", "--quiet", "-o", folder])
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Resuming after epoch 5 of 6" in resumed.stdout
    assert _outcome(folder) == reference
    sessions = json.loads((folder / "manifest.json").read_text())["sessions"]
    assert [s.get("status") for s in sessions] == ["killed"] * len(KILLS) + [None]
    assert not list(folder.rglob(".prednet-tmp-*"))  # no temporary file of a killed process is left


def test_ctrl_c_while_an_epoch_is_recorded_keeps_that_epoch(data, reference, tmp_path):
    # Issue 39: a Ctrl-C that landed after an epoch's checkpoint was written threw the epoch away (the
    # handler raised mid-record). Now the stop waits for the epoch's record: epoch 2 counts, and the resumed
    # run is the uninterrupted one.
    folder = tmp_path / "run"
    stopped = _train([*TINY_TORCH, "--data", data, "-o", folder], kill_at="2:checkpoint:SIGINT")
    assert stopped.returncode == 130, stopped.stdout + stopped.stderr
    assert "Interrupted with 2 epochs completed" in stopped.stderr
    assert run_folders.RunFolder(folder).completed_epochs() == 2
    resumed = _train(["--resume", "--quiet", "-o", folder])
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Resuming after epoch 2 of 6" in resumed.stdout
    assert _outcome(folder) == reference
