"""The Chainer PredNet's window trains alike on every installed backend, a padded first window included, where
layer 0's R channels differ from the frame's (Keras' JAX loop took the first state for a masked step's output,
which failed to trace there until the window's RNN zeroed masked outputs)."""

import json

import numpy as np
import pytest

from tests import backend_processes
from tests.study_models import window_worker


@pytest.fixture(scope="module")
def here():
    return window_worker.logged_losses()


@pytest.mark.parametrize("backend", backend_processes.others())
def test_a_padded_first_window_trains_alike_on_every_backend(here, backend, tmp_path):
    backend_processes.run_module(backend, "tests.study_models.window_worker", tmp_path / "losses.json")
    there = json.loads((tmp_path / "losses.json").read_text())
    assert len(here) == 6 and np.all(np.isfinite(here)) and len(set(here)) == 6
    np.testing.assert_allclose(there, here, rtol=1e-5)
