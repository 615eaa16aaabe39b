"""Python numbers as operands of eager PyTorch ops, made into device tensors once, not at every call.

Keras' torch backend turns a Python number given to an op (`ops.clip(x, 0.0, 1.0)`,
`ops.minimum(x, 1.0)`, `ops.full((), w)`) into a tensor on the device at every call
(`torch.as_tensor(value, device=...)`). On a GPU that is a copy from pageable host memory
followed by a wait for the stream, i.e. for every kernel queued before it: a training step of
Lotter's KITTI model made 269 of them, so the host could never run ahead of the GPU.

`scalar` and `cached` make such a tensor once per value, dtype and device and hand out the
same one afterwards: the op is the same and gets the same values, so it computes exactly
what it did. On the other backends, and while torch.compile traces (its graph holds the
constants itself), nothing is cached: the number goes to the op as before, so their
programs are unchanged. `made_at_every_call` switches the tensors made once off for a while, so that
`python -m prednet_keras.bench.probes.torch_constants_ab` times a training step both ways in one process.
"""

import contextlib

import keras
from keras import ops

from prednet_keras import backends

__all__ = ["cached", "eager_torch", "made_at_every_call", "scalar", "torch_compile_tracing", "torch_copies_numbers"]

_TENSORS = {}


def torch_copies_numbers():
    """Backend.numbers_copied_per_call of torch: eager torch does; torch.compile's trace holds the constants."""
    import torch

    return not torch.compiler.is_compiling()


def _numbers_copied_check():
    entry = backends.find(keras.backend.backend())
    check = entry.numbers_copied_per_call if entry is not None else None
    return check.load() if check is not None else None


# Resolved once, at import (Keras' backend is fixed in a process): this is asked at every op of a step, and
# torch.compile must trace nothing but the check itself.
_NUMBERS_COPIED = _numbers_copied_check()


def eager_torch():
    """Whether operations run one by one from Python now: eager torch, not while torch.compile traces and
    not on TensorFlow or JAX, whose programs merge repeated work themselves."""
    return _NUMBERS_COPIED is not None and _NUMBERS_COPIED()


def torch_compile_tracing():
    """Whether torch.compile traces this code now (TorchDynamo), where a change to a module's dict is a side
    effect it must replay and guard."""
    return _NUMBERS_COPIED is not None and not _NUMBERS_COPIED()


_eager_torch = eager_torch  # what `scalar` and `cached` ask; made_at_every_call swaps it


def _never():
    return False


@contextlib.contextmanager
def made_at_every_call():
    """Within it, `scalar` and `cached` hand out the numbers as they do on other backends: Keras makes each
    into a tensor at every call, as before this module. For timing the two forms (bench.probes); the ops and
    their values are the same either way."""
    global _eager_torch
    made_once = _eager_torch
    _eager_torch = _never  # swapped, not tested per call: every op of a step asks _eager_torch
    try:
        yield
    finally:
        _eager_torch = made_once


def cached(key, like, make):
    """`make()`, made once per (key, device of `like`) on eager torch; elsewhere made at every call.

    Args:
        key: what identifies the value (hashable; make() must depend on nothing else).
        like: a tensor of the op the value is for (its device is part of the key).
        make: builds the tensor with keras.ops.
    """
    if not _eager_torch():
        return make()
    return _made_once(key, like, make)


def scalar(value, like, dtype=None):
    """The operand `value` (a Python number) for an op with the tensor `like`.

    On eager torch, the tensor Keras would make of `value` (`ops.convert_to_tensor(value, dtype)`;
    dtype None: Keras' floatx, as Keras converts a bare Python float), made once. Elsewhere
    `value` itself.
    """
    if not _eager_torch():
        return value
    dtype = dtype or keras.config.floatx()
    return _made_once(("scalar", type(value).__name__, repr(value), dtype), like,
                      lambda: ops.convert_to_tensor(value, dtype=dtype))


def _made_once(key, like, make):
    key = (key, getattr(like, "device", None))
    tensor = _TENSORS.get(key)
    if tensor is None:
        tensor = _TENSORS[key] = make()
    return tensor
