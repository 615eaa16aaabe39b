"""Run with KERAS_BACKEND set: the Chainer PredNet's window trained by its protocol, three updates from fixed
weights (a padded first window, then two whole ones), at channel counts where R_stack_sizes[0] differs from
stack_sizes[0]; writes each update's last-frame MSE and loss as JSON. test_window_on_every_backend.py compares the backends."""

import json
import sys

import numpy as np

from prednet_keras.models.chainer_protocol import ChainerPredNetTrainer
from tests.study_models import numpy_chainer as ref

STACK, R_STACK, FRAME, BPROP = (2, 3, 4), (3, 3, 5), (8, 12), 3


def logged_losses():
    rng = np.random.default_rng(5)
    weights = ref.random_weights(STACK, R_STACK, 3, FRAME[0], FRAME[1], rng)
    frames = rng.random((3 * BPROP,) + FRAME + (STACK[0],)).astype("float32")
    trainer = ChainerPredNetTrainer(FRAME + (STACK[0],), dict(stack_sizes=STACK, R_stack_sizes=R_STACK), bprop=BPROP)
    ref.assign_to_layer(trainer.layer, weights)
    # The first window holds BPROP frames, one step fewer than a whole window: its first step is padding (masked).
    windows = [(frames[0:BPROP], True), (frames[BPROP - 1:2 * BPROP], False), (frames[2 * BPROP - 1:3 * BPROP], False)]
    return [value for window, first in windows for value in trainer.update(window, first)]


if __name__ == "__main__":
    with open(sys.argv[1], "w") as out:
        json.dump(logged_losses(), out)
