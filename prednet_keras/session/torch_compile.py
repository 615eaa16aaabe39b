"""What a Keras model trained with torch.compile (the torch backend's jit_compile=True) needs, how
many graphs torch compiled, how many of them came from Inductor's cache, and how many Inductor ran without the
CUDA graphs asked for.

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

This module imports torch only when the torch backend is in use.
"""

from prednet_keras import backends

__all__ = [
    "compile_training_step", "compiled_graphs", "cudagraph_skips", "inductor_cache_line", "inductor_cache_use",
    "settle_gradients",
]


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
        y_pred, loss = forward(x, y, sample_weight)
        model.zero_grad()
        model.optimizer.scale_loss(loss).backward()
        with torch.no_grad():
            return update(x, y, y_pred.detach(), sample_weight, loss.detach(), [w.value.grad for w in weights])

    # Keras' fit, train_on_batch and make_train_function keep a train_function they find.
    model.train_function = train_function
    return True


def compiled_graphs():
    """Graphs TorchDynamo has compiled in this process so far (first compilations and
    recompilations alike), or None when torch is not imported here."""
    if not backends.TORCH.imported():
        return None
    try:
        from torch._dynamo.utils import counters
    except Exception:  # a torch without dynamo
        return None
    return int(counters["stats"]["unique_graphs"])


def cudagraph_skips():
    """How many times Inductor has declined to run a compiled graph as a CUDA graph in this process, or None
    when torch is not imported here or Inductor's CUDA graphs are off (TORCHINDUCTOR_CUDAGRAPHS unset).

    Inductor gives each reason only in its logs, which are off by default; this count says whether a
    run that asked for CUDA graphs got them.
    """
    if not backends.TORCH.imported():
        return None
    try:
        from torch._dynamo.utils import counters
        from torch._inductor import config
    except Exception:  # a torch without Inductor
        return None
    if not config.triton.cudagraphs:
        return None
    return int(counters["inductor"]["cudagraph_skips"])


def inductor_cache_use():
    """{"hits", "misses", "folder"}: the graphs Inductor looked up in its cache in this process so far and found
    or compiled (runtime.compile_cache; folder: TORCHINDUCTOR_CACHE_DIR, None for Inductor's default), or None when
    torch is not imported here or compiled nothing."""
    if not backends.TORCH.imported():
        return None
    try:
        from torch._dynamo.utils import counters
    except Exception:  # a torch without dynamo
        return None
    import os

    from prednet_keras.runtime import compile_cache

    inductor = counters["inductor"]
    hits, misses = int(inductor["fxgraph_cache_hit"]), int(inductor["fxgraph_cache_miss"])
    if hits + misses == 0:
        return None
    return {"hits": hits, "misses": misses, "folder": os.environ.get(compile_cache.INDUCTOR_DIR_ENV) or None}


def inductor_cache_line():
    """The line a process prints after its first compiled step (compile_cache.inductor_cache_line), or None."""
    from prednet_keras.runtime import compile_cache

    use = inductor_cache_use()
    return None if use is None else compile_cache.inductor_cache_line(use["hits"], use["misses"], use["folder"])
