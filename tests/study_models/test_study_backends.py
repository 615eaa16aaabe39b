"""The Chainer PredNet and its protocol give the same numbers on TensorFlow, JAX and PyTorch."""

import subprocess
import sys

import numpy as np
import pytest

from tests import backend_processes
from tests.study_models import backend_task
from tests.study_models import numpy_chainer as ref

# Slow (a process per backend): in the full suite, not in the fast loop (pytest -m "not slow").
pytestmark = pytest.mark.slow

OTHERS = backend_processes.others()
STACK, R_STACK, FRAME = (3, 4), (3, 5), (8, 8)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    import keras

    folder = tmp_path_factory.mktemp("study_backends")
    rng = np.random.default_rng(21)
    w = ref.random_weights(STACK, R_STACK, 3, FRAME[0], FRAME[1], rng)
    np.savez(folder / "weights.npz", **{f"predictor/{k}": v for k, v in w.items()})
    sequences = (rng.random((2, 8) + FRAME + (3,)) * 255).astype(np.uint8)
    np.save(folder / "frames.npy", sequences)
    # The other backends start first and run while this process computes its own result
    # (the reference for them): the start-up of a process is most of the cost.
    processes = {}
    for backend in OTHERS:
        processes[backend] = subprocess.Popen(
            [sys.executable, "-m", "tests.study_models.backend_task", str(folder)],
            env=backend_processes.environment(backend), cwd=backend_processes.ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
    try:
        backend_task.run(str(folder))
    finally:
        outcomes = {b: (p.communicate(timeout=600), p.returncode) for b, p in processes.items()}
    return dict(folder=folder, w=w, sequences=sequences, backend=keras.backend.backend(), outcomes=outcomes)


def load(folder, backend):
    with np.load(folder / f"result_{backend}.npz") as result, np.load(folder / f"trained_{backend}.npz") as trained:
        return {k: result[k] for k in result.files}, {k: trained[k] for k in trained.files}


def test_this_backend_matches_numpy(shared):
    result, _ = load(shared["folder"], shared["backend"])
    frames = shared["sequences"][:, :5].astype(np.float64) / 255
    want = np.stack([ref.run(seq, shared["w"], STACK, R_STACK)[0] for seq in frames])
    np.testing.assert_allclose(result["predictions"], want, atol=2e-5)
    assert len(result["logged"]) == 4  # two sequences of 8 frames, bprop 3: updates at i = 2 and 5


@pytest.mark.parametrize("backend", OTHERS)
def test_other_backend_gives_the_same_numbers(shared, backend):
    folder = shared["folder"]
    (_, stderr), returncode = shared["outcomes"][backend]
    assert returncode == 0, stderr[-3000:]
    mine, mine_weights = load(folder, shared["backend"])
    theirs, their_weights = load(folder, backend)
    np.testing.assert_allclose(theirs["predictions"], mine["predictions"], atol=1e-5)
    np.testing.assert_allclose(theirs["logged"], mine["logged"], rtol=1e-4)
    np.testing.assert_allclose(theirs["window_loss"], mine["window_loss"], rtol=1e-4)
    assert sorted(their_weights) == sorted(mine_weights)
    for key in mine_weights:
        np.testing.assert_allclose(their_weights[key], mine_weights[key], atol=2e-5, err_msg=key)
    # The training moved the weights: the comparison is not of untouched initial values.
    assert np.abs(mine_weights["predictor/ConvP1/W"] - shared["w"]["ConvP1/W"]).max() > 1e-4
