"""A Keras model's training step for torch.compile (Keras' jit_compile=True on the torch backend): traced once,
compiled once, for every protocol that compiles a model (Lotter's recipe, the autoencoder, a user's model).

Keras compiles its whole training step with torch.compile. Its step calls `loss.backward()`, which
TorchDynamo does not trace: a graph break. At a graph break TorchDynamo starts its analysis of the frame
over, to compile the part before the break, and the break is inside `train_step`, which Keras' compiled
function calls: so the forward pass, nearly all of the tracing, was traced three times (Keras'
function, then `train_step` as its own frame, twice; torch 2.13). That tracing is what a later process still spends
when every graph comes from Inductor's cache. `compile_training_step` gives the model a training
function of two compiled parts without a break, the backward between them: the forward pass with the
loss, and the weight update with the metrics: Keras' operations, traced once.

TorchDynamo guards the compiled code on the Python state it read. Keras' own compiled step reads
whether each weight's `.grad` is None (its train_step calls `zero_grad()`, which tests it): None
before the first step, a tensor after it, so its second step would compile the whole step again
(minutes for PredNet). Where a model keeps Keras' step (`compile_training_step` declines),
`settle_gradients` gives every trainable weight its gradient tensor before the first step, so the
first compilation is the only one. The two parts call `zero_grad()` outside the compiled code.
`compile_for_training` is `model.compile` followed by the one or the other: every protocol compiles the model it
trains through it, so that none gets Keras' step by forgetting the second call.

This module imports torch only when the torch backend is in use. What a process compiled, and what came from
Inductor's cache, is the run session's (session.torch_compile).
"""

from prednet_keras import backends

__all__ = ["compile_for_training", "compile_training_step", "settle_gradients"]


def compile_for_training(model, **compile_arguments):
    """`model.compile(**compile_arguments)`, then, compiled with jit_compile on torch, the two compiled parts
    (`compile_training_step`), or where the model keeps Keras' step, its gradients settled (`settle_gradients`).
    Elsewhere `model.compile` only."""
    model.compile(**compile_arguments)
    if model.jit_compile is True and not compile_training_step(model):
        settle_gradients(model)


def settle_gradients(model):
    """Gives each trainable weight of `model` a zero `.grad` (torch backend only).

    Harmless for the numbers: Keras' train_step sets every `.grad` to None before its
    backward pass. A no-op on other backends and for weights that have a gradient.

    Args:
        model: a Keras model.

    Returns:
        the number of weights given a gradient.
    """
    import keras

    if backends.find(keras.backend.backend()) is not backends.TORCH:
        return 0
    import torch

    count = 0
    with torch.no_grad():
        for variable in model.trainable_variables:
            parameter = variable.value
            if isinstance(parameter, torch.Tensor) and parameter.requires_grad and parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
                count += 1
    return count


def compile_training_step(model):
    """Gives a compiled model (`model.compile(jit_compile=True)`, torch backend) a training step of two
    graphs with the backward pass between them, in place of Keras' one compiled step (see the module
    docstring); call it after `model.compile`, which would drop it.

    As Keras' torch train_step: the forward pass with `training=True` and the loss, compiled; the
    gradients set to None; the (scaled) loss's backward pass; then, compiled, the loss tracker, the
    optimizer's update of the trainable weights from their gradients and the metrics, whose results
    are the step's logs. Keras' evaluation and prediction steps stay Keras' own.

    One difference from Keras' step, in when, not what: a variable the forward pass assigns (the Chainer
    window's carried state, a seed generator's) gets its new value after the backward pass (the forward
    runs in a `keras.StatelessScope`, where later reads see the new value). Assigned in place during the
    forward, as Keras' step does, it would be a compiled input that the step overwrites, and AOT autograd's
    backward may recompute values from it (it does for the Chainer window: "modified by an inplace
    operation").

    Returns:
        whether the model got it: False on other backends, without jit_compile, for a model with a
        train_step of its own or without trainable weights, and on a Keras whose trainer lacks what the
        step uses (it keeps Keras' step).
    """
    import keras

    if backends.find(keras.backend.backend()) is not backends.TORCH or model.jit_compile is not True:
        return False
    if type(model).train_step is not keras.Model.train_step:  # a model's own step is its to keep
        return False
    from keras.utils import unpack_x_y_sample_weight

    weights = model.trainable_weights[:]
    used = ("_call_has_training_arg", "_compute_loss", "_loss_tracker", "zero_grad")
    if not weights or not all(hasattr(model, name) for name in used):
        return False
    import torch

    def forward(x, y, sample_weight):
        y_pred = model(x, training=True) if model._call_has_training_arg else model(x)
        loss = model._compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
        return y_pred, loss

    class AssignedAfterBackward(keras.StatelessScope):
        """The variables assigned within, kept with their values for `assign`: any variable, the model's or
        not (a global seed generator's)."""

        def __init__(self):
            # Initializing at exit, as Keras' scopes do: a variable made within (the global seed generator,
            # by the first unseeded random op) would otherwise stay without a value.
            super().__init__()
            self.variables = []

        def add_update(self, update):
            super().add_update(update)
            self.variables.append(update[0])

        def clear(self):
            self.state_mapping.clear()
            self.variables.clear()

        def assign(self):
            for variable in self.variables:
                value = self.state_mapping.pop(id(variable), None)
                if value is not None:
                    variable.assign(value.detach())

    # Entered around the compiled forward, not inside it: a graph break inside a context manager makes
    # TorchDynamo give up the whole frame. One scope for every step, so that its guards hold.
    assignments = AssignedAfterBackward()

    def update(x, y, y_pred, sample_weight, loss, gradients):
        batch_size = next(i for i in keras.tree.flatten(x) if i is not None).shape[0]
        model._loss_tracker.update_state(loss, sample_weight=batch_size)
        model.optimizer.apply(gradients, weights)
        return model.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    forward, update = torch.compile(forward), torch.compile(update)

    def as_tensor(value):
        return value if value is None else keras.ops.convert_to_tensor(value)

    from torch._inductor import config as inductor_config

    def train_function(data):
        if inductor_config.triton.cudagraphs:
            # A new step: Inductor's CUDA graphs may reuse the last step's output memory, which the
            # backward pass of this step no longer reads (without it, the backward fails on the GPU).
            torch.compiler.cudagraph_mark_step_begin()
        # train_on_batch hands over NumPy arrays, which would break the graph at Keras' input conversion.
        x, y, sample_weight = unpack_x_y_sample_weight(keras.tree.map_structure(as_tensor, data[0]))
        assignments.clear()
        with assignments:
            y_pred, loss = forward(x, y, sample_weight)
        model.zero_grad()
        model.optimizer.scale_loss(loss).backward()
        with torch.no_grad():
            assignments.assign()
            return update(x, y, y_pred.detach(), sample_weight, loss.detach(), [w.value.grad for w in weights])

    # Keras' fit, train_on_batch and make_train_function keep a train_function they find.
    model.train_function = train_function
    return True
