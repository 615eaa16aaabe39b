"""Weight trajectories of Lotter PredNet runs (for the study's divergence): recorded, and kept across --resume."""

import json
import subprocess
import sys

import numpy as np

from prednet_keras.session import folder as run_folders
from prednet_keras.runtime import RuntimeConfig
from prednet_keras.options.recipe import TrainConfig
from tests.train.conftest import train
import pytest

# Slow (real prednet-train runs, killed and resumed): in the full suite, not in the fast loop (pytest -m "not slow").
pytestmark = pytest.mark.slow

OPTIONS = dict(stack_sizes=(3, 4, 8), nt=4, batch_size=2, steps_per_epoch=2, epochs=2, val_sequences=4,
               val_fraction=0.25)


def make_run(folder, data, points):
    """A run folder as prednet-study run makes it: options, runtime, and study.trajectory_points."""
    config = TrainConfig(data=str(data), **OPTIONS).resolved()
    runtime = RuntimeConfig(backend="tensorflow", device="cpu", deterministic=True)
    folder.mkdir(parents=True)
    run_folders.RunFolder(folder).write_manifest(run_folders.new_manifest(
        folder.name, config.to_dict(), runtime.to_dict(), ["test"], study={"trajectory_points": points}))
    return runtime


def train_in(folder, runtime, env=None):
    from prednet_keras import runtime as rt

    full = {k: str(v) for k, v in rt.environment_for(runtime).items()}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "prednet_keras.session.worker", "train", str(folder), "--quiet"],
                          env=full, capture_output=True, text=True, timeout=400)


def test_trajectory_recorded_and_resumed_identically(tmp_path, tiny_npz):
    import concurrent.futures

    whole, broken = tmp_path / "whole", tmp_path / "broken"
    runtime = make_run(whole, tiny_npz, points=4)
    make_run(broken, tiny_npz, points=4)
    # The whole run and the run killed after the first step of epoch 2 are independent: side by side.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        finished = pool.submit(train_in, whole, runtime)
        killed = pool.submit(train_in, broken, runtime, env={"PREDNET_TEST_KILL_AT": "2:1"})
        result, killed = finished.result(), killed.result()
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((whole / "manifest.json").read_text())
    assert manifest["trajectory"]["points"] == 5
    with np.load(whole / "trajectory.npz") as data:
        steps, values = data["steps"], data["values"]
    assert steps.tolist() == [0, 1, 2, 3, 4]  # 2 epochs x 2 steps, 4 points + the start
    assert values.shape[0] == 5 and np.all(np.isfinite(values))
    assert not np.array_equal(values[0], values[-1])  # training moved the weights

    # Killed after the first step of epoch 2, then resumed: the same snapshots, bit for bit.
    assert killed.returncode != 0
    resumed = train(["--resume", "-o", broken, "--quiet"])
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    with np.load(broken / "trajectory.npz") as data:
        assert data["steps"].tolist() == steps.tolist()
        np.testing.assert_array_equal(data["values"], values)
