"""PredNet and the Chainer PredNet given a mask on every installed backend, rolled and unrolled, as Keras 2's masked
RNN: a masked step keeps the output before it and every state, so what follows is what the sequence gives without
that step. JAX's rolled loop could not mask their states (backends.py, rolled_loop_masks_image_states)."""

import json

import pytest

from tests import backend_processes
from tests.layers import masked_worker


def assert_masked_as_keras2(found):
    assert sorted(found) == sorted(f"{mode}-{loop}" for mode in masked_worker.MODES for loop in ("rolled", "unrolled"))
    for name, differences in found.items():
        assert differences["held_output"] == 0.0, name  # the output before it, as it was
        assert differences["after_held"] <= 1e-6 and differences["states"] <= 1e-6, (name, differences)
        assert differences["unmasked_sequence"] <= 1e-6, (name, differences)
    assert all(found[f"{mode}-{loop}"]["first_output"] > 0 for mode in ("error", "chainer") for loop in ("rolled", "unrolled"))


def test_a_masked_step_keeps_the_output_and_states_here():
    assert_masked_as_keras2(masked_worker.masked_differences())


@pytest.mark.parametrize("backend", backend_processes.others())
def test_a_masked_step_keeps_the_output_and_states_on_every_backend(backend, tmp_path):
    backend_processes.run_module(backend, "tests.layers.masked_worker", tmp_path / "masked.json")
    assert_masked_as_keras2(json.loads((tmp_path / "masked.json").read_text()))
