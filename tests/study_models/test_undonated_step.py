"""On JAX the Chainer window trains with Keras' train_step compiled without buffer donation
(models/jax_training_step.py): the same losses and the same final state, bit for bit, as with Keras' own donated
step. Run in a JAX process (the backend is fixed when Keras starts)."""

import json

import numpy as np
import pytest

from tests import backend_processes


@pytest.mark.slow  # starts a JAX process
@pytest.mark.skipif("jax" not in backend_processes.INSTALLED, reason="JAX is not installed")
def test_the_undonated_step_gives_keras_steps_bits(tmp_path):
    backend_processes.run_module("jax", "tests.study_models.undonated_worker", tmp_path / "runs.json")
    runs = json.loads((tmp_path / "runs.json").read_text())
    ours, keras_own = runs["undonated"], runs["keras"]
    # The trainer gave the window its step; forcing Keras' own function replaced it.
    assert ours["undonated_step_given"] and "compile_undonated_step" in ours["train_function"]
    assert "compile_undonated_step" not in keras_own["train_function"]
    assert len(ours["losses"]) == 12 and np.all(np.isfinite(ours["losses"])) and len(set(ours["losses"])) == 12
    assert ours["losses"] == keras_own["losses"]
    assert ours["state_sha256"] == keras_own["state_sha256"]


def test_other_backends_keep_keras_step():
    import keras

    from prednet_keras.models.chainer_protocol import ChainerPredNetTrainer

    if keras.backend.backend() == "jax":
        pytest.skip("this process is on JAX: the test above covers it")
    trainer = ChainerPredNetTrainer((8, 8, 3), dict(stack_sizes=(3, 4), R_stack_sizes=(3, 4)), bprop=2)
    trainer.update(np.zeros((3, 8, 8, 3), np.float32), starts_sequence=True)
    assert "compile_undonated_step" not in trainer.window_model.train_function.__qualname__
