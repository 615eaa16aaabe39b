"""Run on JAX: the Chainer window trained six updates from one set of fixed weights twice, with its own step (Keras'
train_step compiled without buffer donation, jax_training_step) and with Keras' own donated step; writes each run's
losses and final weights' bytes as JSON. test_undonated_step.py compares them."""

import hashlib
import json
import sys

import numpy as np

from prednet_keras.models.chainer_protocol import ChainerPredNetTrainer
from tests.study_models import numpy_chainer as ref

STACK, FRAME, BPROP = (3, 4, 6), (8, 12), 4


def train(keras_own_step):
    rng = np.random.default_rng(11)
    weights = ref.random_weights(STACK, STACK, 3, FRAME[0], FRAME[1], rng)
    frames = rng.random((6 * BPROP + 1,) + FRAME + (STACK[0],)).astype("float32")
    trainer = ChainerPredNetTrainer(FRAME + (STACK[0],), dict(stack_sizes=STACK, R_stack_sizes=STACK), bprop=BPROP)
    ref.assign_to_layer(trainer.layer, weights)
    model = trainer.window_model
    ours = "compile_undonated_step" in model.train_function.__qualname__
    if keras_own_step:
        model.make_train_function(force=True)
    losses = [value for u in range(6)
              for value in trainer.update(frames[u * BPROP:(u + 1) * BPROP + 1], starts_sequence=u == 0)]
    digest = hashlib.sha256()
    for variable in model.trainable_variables + model.non_trainable_variables + model.optimizer.variables:
        digest.update(np.asarray(variable.value).tobytes())
    return {"losses": losses, "state_sha256": digest.hexdigest(), "undonated_step_given": ours,
            "train_function": model.train_function.__qualname__}


if __name__ == "__main__":
    with open(sys.argv[1], "w") as out:
        json.dump({"undonated": train(False), "keras": train(True)}, out)
