"""Channel counts of PredNet's convolutions rounded up inside the step, for GPU kernels that want multiples.

Lotter's KITTI model convolves tensors of 3, 6 and 57 channels at its bottom layer; cuDNN's fast kernels
take channel counts that are multiples of 8 (4 for TF32) and pad other tensors with kernels of their own
(issue 40's profile). With a multiple set, the cell pads the input of every convolution with zero channels
and the kernel with zero input rows to match: zero inputs meet zero weights, so the outputs are the same
sums (to the round-off of a kernel that may add them in another order) and the real weights' gradients
are the same. The padding exists only inside the step: the layer's weights, its config and its saved
files are those of the unpadded model.

Off unless asked for: `PREDNET_CHANNEL_MULTIPLE=8` in the environment of the process that builds the
model (prednet-train, prednet-bench), or `cell.channel_multiple = 8` before the layer is first called.
"""

import os

from keras import ops

__all__ = ["ENV", "channel_multiple_from_environment", "pad_input_channels"]

ENV = "PREDNET_CHANNEL_MULTIPLE"


def channel_multiple_from_environment():
    """The multiple PREDNET_CHANNEL_MULTIPLE asks for, or None (unset, empty, or 1: no padding)."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    try:
        multiple = int(text)
    except ValueError:
        multiple = 0
    if multiple < 1:
        raise ValueError(f"{ENV} must be a positive whole number of channels (e.g. 8), got {text!r}.")
    return multiple if multiple > 1 else None


def pad_input_channels(x, kernel, multiple, channels_first=False):
    """(x, kernel) with x's channels (last axis; the second with `channels_first`) and the kernel's input rows
    (its third axis) padded with zeros to a multiple of `multiple`; unchanged when they are one already.

    The zeros are concatenated, not added by `ops.pad`: Keras' pad makes a new named `Pad` operation at every
    call, and registering its name writes Keras' global table of names, which under torch.compile is a side
    effect that broke the compiled step's graph and recompiled it at every step."""
    extra = -int(kernel.shape[2]) % multiple
    if not extra:
        return x, kernel
    axis = 1 if channels_first else -1
    one_channel = x[:, :1] if channels_first else x[..., :1]
    repeats = (1, extra, 1, 1) if channels_first else (1, 1, 1, extra)
    x = ops.concatenate([x, ops.tile(ops.zeros_like(one_channel), repeats)], axis=axis)
    height, width, _, filters = (int(size) for size in kernel.shape)
    kernel = ops.concatenate([kernel, ops.zeros((height, width, extra, filters), dtype=kernel.dtype)], axis=2)
    return x, kernel
