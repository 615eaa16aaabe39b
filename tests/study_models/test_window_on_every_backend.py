"""The Chainer PredNet's window trains alike on every installed backend, a padded first window included, where
layer 0's R channels differ from the frame's (Keras' JAX loop took the first state for a masked step's output,
which failed to trace there until the window's RNN zeroed masked outputs)."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.study_models import window_worker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OTHERS = [b for b in ("tensorflow", "jax", "torch")
          if importlib.util.find_spec(b) is not None and b != os.environ.get("KERAS_BACKEND", "tensorflow")]


@pytest.fixture(scope="module")
def here():
    return window_worker.logged_losses()


@pytest.mark.parametrize("backend", OTHERS)
def test_a_padded_first_window_trains_alike_on_every_backend(here, backend, tmp_path):
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu",
               CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-m", "tests.study_models.window_worker", str(tmp_path / "losses.json")],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    there = json.loads((tmp_path / "losses.json").read_text())
    assert len(here) == 6 and np.all(np.isfinite(here)) and len(set(here)) == 6
    np.testing.assert_allclose(there, here, rtol=1e-5)
