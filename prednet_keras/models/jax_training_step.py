"""The Chainer window's training step on JAX, compiled without buffer donation.

Keras' JAX trainer compiles its training step with `donate_argnums=0`: the step may write its new state (the
weights, Adam's moments, the metrics, and for the study's Chainer window the feature maps it carries from one
window to the next) into the buffers of the state it was given. For the window that made each update about 10%
slower on XLA:CPU for the same arithmetic (the same FLOPs in XLA's cost analysis; docs/benchmarks.md, "The
Chainer window's update on JAX without buffer donation"): every output aliased to an input constrains the
program XLA builds around the window's time loop. The step here is Keras' own `train_step`, compiled as Keras
compiles it but without the donation, and its numbers are the same bit for bit
(tests/study_models/test_undonated_step.py). What it costs is memory: the old state lives until the step ends, one
more copy of the weights, the moments and the carried maps, small beside the activations the step keeps for its
backward pass. Lotter's recipe keeps Keras' step: on the same CPU it showed no consistent difference.

Keras' `train_on_batch` (the window's update) and `make_train_function` keep a `train_function` they find, as
for the torch step (torch_training_step). Imports jax only when the JAX backend is in use.
"""

from prednet_keras import backends

__all__ = ["compile_undonated_step"]


def compile_undonated_step(model):
    """Gives `model` (compiled with jit_compile on JAX) a training function that runs Keras' `train_step`
    compiled without buffer donation, one batch per call, as Keras' own with steps_per_execution 1.

    Returns:
        whether the model got it: False on other backends, without jit_compile and with steps_per_execution
        above 1 (Keras' own function then stays).
    """
    import keras

    if backends.find(keras.backend.backend()) is not backends.JAX or model.jit_compile is not True:
        return False
    if model.steps_per_execution != 1:
        return False
    import jax

    step = jax.jit(model.train_step)

    def train_function(state, batches):
        # Keras' JAX trainer hands its train_function the state and an iterator over the step's batches.
        return step(state, next(batches))

    model.train_function = train_function
    return True
