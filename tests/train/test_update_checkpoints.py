"""Checkpoints and --resume of a protocol counted in updates (issue 38: one checkpoint/resume path for every
protocol): prednet-chainer, the autoencoder and a user's model (one with Dropout, and the shipped example),
stopped after k of K updates through the session's stop request (as Ctrl-C stops them) and resumed, end
bit-identical to an uninterrupted run; a resume with other options is refused in one line, the run folder
unchanged.

The training process is this one (its `worker.launch` replaced by a direct call of the session, with the
worker's handling of a stop: conftest's `stop_after`), so the tiny runs share one framework import.
"""

import csv
import importlib.util
import hashlib
import json

import keras
import numpy as np
import pytest
from click.testing import CliRunner

from prednet_keras import backends
from prednet_keras.cli.train import main as train_main
from prednet_keras.session import protocol_training, worker
from prednet_keras.session.folder import RunFolder
from tests.train.conftest import TRAJECTORY_POINTS, run_cli

CHAINER = ["--model", "prednet-chainer", "--protocol", "quick", "--stack-sizes", "3,4", "--size", "32x32",
           "--period", "40", "--bprop", "4"]
AUTOENCODER = ["--model", "autoencoder", "--autoencoder", "dense", "--protocol", "quick", "--images", "12"]
# What differs between two runs of the same options: times, and the run folder's own path.
VOLATILE_RESULT = ("train_seconds", "first_update_seconds", "initial_weights")


def _train(args, folder, *more):
    return CliRunner().invoke(train_main, [*map(str, args), "--quiet", "-o", str(folder), *more])


def _rows(folder):
    """history.csv's rows without their seconds (the one column that differs between processes)."""
    with open(folder / "history.csv", newline="") as handle:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(handle)]


def _outcome(folder):
    manifest = json.loads((folder / "manifest.json").read_text())
    result = {k: v for k, v in manifest["result"].items() if k not in VOLATILE_RESULT}
    trajectory = {}
    if (folder / "trajectory.npz").is_file():
        with np.load(folder / "trajectory.npz") as arrays:
            trajectory = {name: arrays[name].tobytes() for name in arrays.files}
    return result, manifest["metric"], manifest.get("trajectory"), trajectory, sorted(p.name for p in folder.iterdir())


def _folder_hashes(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# prednet-chainer's three trainings (about 35 s on 2 cores) are slow; the fast loop resumes the autoencoder.
@pytest.mark.parametrize("case", [pytest.param("prednet-chainer", marks=pytest.mark.slow), "autoencoder"])
def test_a_stopped_run_resumes_bit_identical_to_an_uninterrupted_one(case, stop_after, tiny_npz, tmp_path,
                                                                     monkeypatch):
    args = CHAINER + ["--data", tiny_npz] if case == "prednet-chainer" else AUTOENCODER
    whole, parted = tmp_path / "whole", tmp_path / "parted"
    done = _train(args, whole)
    assert done.exit_code == 0, done.output
    total = len(_rows(whole))
    assert total == 10 if case == "prednet-chainer" else total == 12
    # Snapshots on both sides of the stop: a continued run keeps those its checkpoint saved.
    assert len(np.load(whole / "trajectory.npz")["steps"]) == TRAJECTORY_POINTS + 1

    # A checkpoint after every update until the stop: writing them changes nothing the run computes.
    monkeypatch.setattr(protocol_training, "CHECKPOINT_SECONDS", 0)
    stop_after[0] = 4
    stopped = _train(args, parted)
    assert stopped.exit_code == worker.EXIT_INTERRUPTED, stopped.output
    state = json.loads((parted / "state.json").read_text())
    assert state["update"] == 4 and len(_rows(parted)) == 4
    assert [p.name for p in (parted / "checkpoints").iterdir()] == ["update-0000004.weights.h5"]
    assert json.loads((parted / "manifest.json").read_text())["status"] == "interrupted"

    stop_after[0] = None
    resumed = _train(args, parted, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert f"Run folder: {parted} (4 updates checkpointed)" in resumed.output
    assert "Resuming after update 4 of" in resumed.output
    assert _rows(parted) == _rows(whole)
    assert _outcome(parted) == _outcome(whole)
    manifest = json.loads((parted / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["resumes"][0]["after_update"] == 4
    # The same code as the run's: the resume records it, and nothing about a change of code.
    assert manifest["resumes"][0]["code"] == manifest["code"] and "code_changed" not in manifest["resumes"][0]
    assert "package" not in resumed.output
    assert manifest["sessions"][-1]["start_update"] == 4
    # A complete run keeps no checkpoint (the study packs the same files as before).
    assert not (parted / "state.json").exists() and not (parted / "checkpoints").exists()


# Slow: two trainings (about 8 s); the fast loop keeps the autoencoder's resume above within its 3 minutes.
@pytest.mark.slow
def test_a_resume_with_other_options_or_of_a_complete_run_is_refused_and_changes_nothing(stop_after, tmp_path):
    folder = tmp_path / "run"
    stop_after[0] = 3
    assert _train(AUTOENCODER, folder).exit_code == worker.EXIT_INTERRUPTED
    before = _folder_hashes(folder)
    assert "state.json" in before

    refused = _train([*AUTOENCODER[:-1], "13"], folder, "--resume")
    assert refused.exit_code == 2, refused.output
    errors = [line for line in refused.output.splitlines() if line.startswith("Error:")]
    assert errors == ["Error: --images 13 differs from this run's 12; --resume continues a run as it was started "
                      "(none of its options may change)."], refused.output
    assert _folder_hashes(folder) == before

    # Resumed as started (no option repeated: the run's own), it completes; then there is nothing to resume.
    stop_after[0] = None
    assert _train([], folder, "--resume").exit_code == 0
    complete = _folder_hashes(folder)
    refused = _train(AUTOENCODER, folder, "--resume")
    assert refused.exit_code == 1, refused.output
    assert f"{folder} is complete: nothing to resume" in refused.output
    assert _folder_hashes(folder) == complete


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_last_checkpoint(tiny_npz, tmp_path):
    # Processes as a user runs them: stopped by SIGINT after update 3 (checkpointed there), resumed and killed
    # by SIGKILL after update 6 (rows 4-6 written, no checkpoint since), resumed again: the rows after the
    # checkpoint are made again, and the run ends as an uninterrupted one.
    args = [*CHAINER, "--data", tiny_npz, "--quiet"]
    whole, parted = tmp_path / "whole", tmp_path / "parted"
    assert run_cli("prednet_keras.cli.train", [*args, "-o", whole]).returncode == 0
    first = run_cli("prednet_keras.cli.train", [*args, "-o", parted], env={"PREDNET_TEST_KILL_AT": "1:3:SIGINT"})
    assert first.returncode == worker.EXIT_INTERRUPTED, first.stdout + first.stderr
    killed = run_cli("prednet_keras.cli.train", [*args, "-o", parted, "--resume"],
                     env={"PREDNET_TEST_KILL_AT": "1:6"})
    assert killed.returncode == 128 + 9, killed.stdout + killed.stderr
    assert len(_rows(parted)) == 6 and json.loads((parted / "state.json").read_text())["update"] == 3
    last = run_cli("prednet_keras.cli.train", [*args, "-o", parted, "--resume"])
    assert last.returncode == 0, last.stdout + last.stderr
    assert _rows(parted) == _rows(whole)
    assert _outcome(parted) == _outcome(whole)


def test_a_checkpoint_or_history_changed_since_is_refused_before_anything_is_written(tmp_path):
    from prednet_keras.files.diskwrite import file_sha256
    from prednet_keras.session.bookkeeping import RunSession
    from prednet_keras.session.folder import RunFolderError

    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    folder.write_manifest({"options": {"model": "autoencoder"}})
    folder.history_path.write_text("update,loss,image,seconds\n1,0.5,7,0.1\n2,0.25,3,0.1\n3,0.125,9,0.1\n")
    checkpoint = folder.update_checkpoint_path(2)
    checkpoint.parent.mkdir()
    checkpoint.write_bytes(b"weights")
    text = "".join(folder.history_path.read_text().splitlines(keepends=True)[:3])
    state = {"update": 2, "checkpoint": "checkpoints/update-0000002.weights.h5",
             "checkpoint_sha256": file_sha256(checkpoint),
             "history_sha256": hashlib.sha256(text.encode()).hexdigest()}
    run = RunSession(folder.path)
    # The rows after the checkpoint's update do not count: they are made again.
    protocol_training.UpdateCheckpoint.check_files(run, state)

    before = _folder_hashes(folder.path)
    folder.history_path.write_text("update,loss,image,seconds\n1,0.5,7,0.1\n2,0.3,3,0.1\n")
    with pytest.raises(RunFolderError, match="does not begin with the 2 rows it held"):
        protocol_training.UpdateCheckpoint.check_files(run, state)
    folder.history_path.write_text("update,loss,image,seconds\n1,0.5,7,0.1\n")
    with pytest.raises(RunFolderError, match="holds 1 rows, fewer than the 2 updates"):
        protocol_training.UpdateCheckpoint.check_files(run, state)
    checkpoint.write_bytes(b"other weights")
    with pytest.raises(RunFolderError, match="not the checkpoint written at update 2"):
        protocol_training.UpdateCheckpoint.check_files(run, state)
    # The checks read: the manifest (and the folder's other files) are as they were.
    after = _folder_hashes(folder.path)
    assert after["manifest.json"] == before["manifest.json"] and sorted(after) == sorted(before)


# A user's model that draws random numbers as it trains (Dropout), and the shipped example, on a few images.
DROPOUT_MODEL = '''
import keras
import numpy as np

from prednet_keras.model_kinds import UserModel


def tiny():
    data = np.random.default_rng(0)
    x = data.normal(size=(40, 6)).astype("float32")
    y = (x @ data.normal(size=(6, 1))).astype("float32")
    inputs = keras.Input((6,), name="x")
    hidden = keras.layers.Dense(16, activation="relu", name="hidden")(inputs)
    hidden = keras.layers.Dropout(0.5, name="dropout")(hidden)
    outputs = keras.layers.Dense(1, name="out")(hidden)
    return UserModel(keras.Model(inputs, outputs), (x, y), loss="mse", batch_size=8, epochs=2)
'''
MNIST_CNN_MODEL = '''
from prednet_keras.examples.mnist_cnn import small_cnn


def tiny():
    return small_cnn(train_images=60, val_images=16, batch_size=16, epochs=2)
'''


# A Dropout run has checkpoints on the suite's backend: not where random layers draw from the framework's global
# generator (KERAS_BACKEND=torch), whose run keeps none and says so (test_on_torch_..._keeps_no_checkpoints_...).
DROPOUT_CHECKPOINTED = pytest.mark.skipif(
    backends.named(keras.backend.backend()).random_layers_draw_globally,
    reason="an unseeded Dropout draws from the framework's global generator: no checkpoints")


# Three trainings each (about 10 s on 2 cores): the fast loop keeps the first; the others are slow.
@pytest.mark.parametrize(("case", "stop"), [pytest.param("dropout", 3, marks=DROPOUT_CHECKPOINTED),
                                            pytest.param("dropout", 5, marks=[pytest.mark.slow, DROPOUT_CHECKPOINTED]),
                                            pytest.param("mnist_cnn", 6, marks=pytest.mark.slow)])
def test_a_stopped_user_model_run_resumes_bit_identical_to_an_uninterrupted_one(case, stop, stop_after, tmp_path,
                                                                                monkeypatch):
    # Stopped inside the first epoch (3 of the dropout model's 5 updates per epoch), at the end of it (5), or
    # inside the second (6 of the CNN's 4 per epoch): the continuation makes the same batches with the same
    # dropout masks, so history.csv (seconds aside), the result and the final weights are the uninterrupted run's.
    model_file = tmp_path / f"{case}_model.py"
    model_file.write_text(DROPOUT_MODEL if case == "dropout" else MNIST_CNN_MODEL)
    args = ["--model", f"{model_file}:tiny"]
    whole, parted = tmp_path / "whole", tmp_path / "parted"
    assert _train(args, whole).exit_code == 0
    total = len(_rows(whole))
    assert total == (10 if case == "dropout" else 8)

    monkeypatch.setattr(protocol_training, "CHECKPOINT_SECONDS", 0)
    stop_after[0] = stop
    assert _train(args, parted).exit_code == worker.EXIT_INTERRUPTED
    state = json.loads((parted / "state.json").read_text())
    assert state["update"] == stop
    # Dropout's generator is recorded beside the checkpoint; the CNN draws no random numbers.
    assert len(state.get("random_generators", [])) == (1 if case == "dropout" else 0)

    stop_after[0] = None
    resumed = _train(args, parted, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert f"Resuming after update {stop} of {total}." in resumed.output
    assert _rows(parted) == _rows(whole)
    assert _outcome(parted) == _outcome(whole)
    manifest = json.loads((parted / "manifest.json").read_text())
    assert manifest["resumes"][0]["after_update"] == stop


@pytest.mark.slow
@DROPOUT_CHECKPOINTED
def test_without_its_dropout_state_a_resumed_user_model_run_would_differ(stop_after, tmp_path, monkeypatch):
    # The control of the test above: the random generator's state recorded beside the checkpoint is what the
    # continuation's dropout masks come from. Set back to its start (the state a model has when it is made,
    # which is all that the weights and optimizer of save_weights would leave), the continuation draws other
    # masks, so other losses.
    model_file = tmp_path / "dropout_model.py"
    model_file.write_text(DROPOUT_MODEL)
    args = ["--model", f"{model_file}:tiny"]
    whole, parted = tmp_path / "whole", tmp_path / "parted"
    assert _train(args, whole).exit_code == 0
    monkeypatch.setattr(protocol_training, "CHECKPOINT_SECONDS", 0)
    stop_after[0] = 3
    assert _train(args, parted).exit_code == worker.EXIT_INTERRUPTED
    stop_after[0] = None
    state = json.loads((parted / "state.json").read_text())
    (generator,) = state["random_generators"]
    assert generator["state"][1] > 0  # its counter: it has drawn
    generator["state"][1] = 0
    (parted / "state.json").write_text(json.dumps(state))
    assert _train(args, parted, "--resume").exit_code == 0
    assert _rows(parted)[:3] == _rows(whole)[:3] and _rows(parted)[3:] != _rows(whole)[3:]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_on_torch_a_user_model_with_random_layers_keeps_no_checkpoints_and_says_why(tmp_path):
    # Keras' torch Dropout without a seed draws from torch's global generator, as Keras' fit does as each epoch
    # starts and ends: no checkpoint could continue such a run as it would have gone on, so none is written
    # and the run says so when it starts; stopped, it is removed as a run stopped before its first checkpoint.
    model_file = tmp_path / "dropout_model.py"
    model_file.write_text(DROPOUT_MODEL)
    folder = tmp_path / "run"
    stopped = run_cli("prednet_keras.cli.train", ["--model", f"{model_file}:tiny", "--backend", "torch", "--quiet",
                                                  "-o", folder], env={"PREDNET_TEST_KILL_AT": "1:3:SIGINT"})
    assert stopped.returncode == worker.EXIT_INTERRUPTED, stopped.stdout + stopped.stderr
    assert ("(No checkpoints, so --resume cannot continue this run: on PyTorch, Keras' random layers (a Dropout "
            "made without a seed) draw from PyTorch's global generator, which Keras' fit also draws from as each "
            "epoch starts and ends, so no checkpoint holds where a continued run's random numbers would be. Train "
            "it with --backend tensorflow or jax to have checkpoints.)") in stopped.stdout + stopped.stderr
    assert not folder.exists()
