"""StepLosses: losses read in order, one step late where steps run asynchronously."""

import importlib.util

import pytest

from prednet_keras.session.callbacks import StepLosses


def test_losses_come_back_in_order_one_step_late_and_all_on_flush():
    losses = StepLosses(model=None, lag=1)
    assert losses.add(0, {"loss": 3.0}) == []
    assert losses.add(1, {"batch_loss": 2.0, "loss": 9.0}) == [(0, 3.0)]
    assert losses.flush() == [(1, 2.0)]
    assert losses.flush() == []


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_a_torch_loss_is_kept_as_it_was_when_its_step_ended():
    # Under Inductor's CUDA graphs the next replay writes over a step's outputs in place;
    # here the overwrite is done by hand, on the CPU.
    import torch

    output = torch.tensor(0.75)
    losses = StepLosses(model=None, lag=1)
    losses.add(0, {"loss": output})
    output.fill_(99.0)
    assert losses.add(1, {"loss": torch.tensor(0.5)}) == [(0, 0.75)]
