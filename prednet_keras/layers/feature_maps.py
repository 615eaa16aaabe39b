"""What both PredNets do to channels_last feature maps: a "same" convolution and the kernels it reads, 2x2 max
pooling, 2x nearest-neighbour upsampling and the rectified errors' two halves.

On eager torch, where every operation and its backward is dispatched from Python one by one, each is given
the form with the fewest operations for the same bits; TensorFlow, JAX and torch.compile, whose compilers
merge such work themselves, get the plain form, and their programs stay as they were. The same bits on eager
torch: tests/layers/test_kernels_once.py (Lotter's cell) and tests/study_models/test_window_time_loop.py (the
Chainer cell) compare both forms.

`channels_first=True` (eager torch only, Lotter's cell): the feature maps are channels_first views of
channels_last memory, (batch, C, H, W) tensors whose channels are adjacent in memory, which a cell can carry
through all its steps: its convolutions and pooling then take them as they are, with no transpose there and
back (two Keras calls each, and a permute node each in the backward pass), and the memory they run on, and
so the kernels cuDNN and oneDNN choose, is the same.
"""

from keras import ops

from prednet_keras.layers import device_constants

__all__ = ["concatenated_kernel", "convolve_same", "maxpool2x2", "rectified_halves", "to_channels_first",
           "to_channels_last", "upsample2x"]

# The permutations by rank: (batch, [time,] H, W, C) <-> (batch, [time,] C, H, W).
_TO_FIRST = {4: (0, 3, 1, 2), 5: (0, 1, 4, 2, 3)}
_TO_LAST = {4: (0, 2, 3, 1), 5: (0, 1, 3, 4, 2)}


def to_channels_first(x):
    """A (batch, [time,] H, W, C) tensor as a (batch, [time,] C, H, W) view of the same memory (on torch)."""
    return ops.transpose(x, _TO_FIRST[len(x.shape)])


def to_channels_last(x):
    """The view `to_channels_first` made, back: (batch, [time,] C, H, W) as (batch, [time,] H, W, C)."""
    return ops.transpose(x, _TO_LAST[len(x.shape)])


def convolve_same(x, kernel, channels_first=False):
    """The stride-1 "same" convolution of (batch, H, W, C_in) by a (kh, kw, C_in, C_out) kernel, no bias;
    of (batch, C_in, H, W) with `channels_first`."""
    if channels_first:
        return ops.conv(x, kernel, strides=1, padding="same", data_format="channels_first")
    if device_constants.eager_torch():
        return _through_channels_first(ops.conv, x, kernel, strides=1, padding="same")
    return ops.conv(x, kernel, strides=1, padding="same", data_format="channels_last")


def concatenated_kernel(kernels):
    """(kh, kw, in, out) kernels concatenated on the output axis, for `convolve_same`: the gates' fused kernel,
    or, given one kernel, that kernel laid out once for all the steps of a sequence.

    On eager torch the result is a view of a copy laid out (out, kh, kw, in) in memory, the channels_last kernel
    that cuDNN's and oneDNN's convolutions of a channels_last input read, so that they copy nothing at each
    convolution; the CPU's native convolution (batch 1, small maps) copies it fastest too. Keras hands torch a
    permuted view of the (kh, kw, in, out) kernel, which every convolution copied whole, forward and backward:
    at batch 1 on 2 CPU cores, 59% of a training step of Lotter's model at 16x16 copied the top layer's gate
    kernel (docs/benchmarks.md). The same values, so the same bits."""
    if not device_constants.eager_torch():
        return ops.concatenate(kernels, axis=-1)
    stored = ops.concatenate([ops.transpose(kernel, (3, 0, 1, 2)) for kernel in kernels], axis=0)
    return ops.transpose(stored, (1, 2, 3, 0))


def maxpool2x2(x, channels_first=False):
    """2x2 max pooling, stride 2 (Keras 2's MaxPooling2D and Chainer's max_pooling_2d(x, 2))."""
    if channels_first:
        return ops.max_pool(x, pool_size=2, strides=2, padding="valid", data_format="channels_first")
    if device_constants.eager_torch():
        return _through_channels_first(ops.max_pool, x, pool_size=2, strides=2, padding="valid")
    return ops.max_pool(x, pool_size=2, strides=2, padding="valid", data_format="channels_last")


def upsample2x(x):
    """Nearest-neighbour 2x upsampling of (batch, H, W, C) (Keras 2's UpSampling2D, Chainer's
    unpooling_2d(x, 2, cover_all=False)).

    Built from stack + reshape rather than `ops.repeat`: TensorFlow's gradient of repeat needs run-time
    shapes, which XLA (jit_compile) cannot compile.

    On eager torch the rows are repeated by `ops.repeat` before the one reshape: three operations where the
    plain form has four, and Keras' `stack` and `reshape` are among its costliest calls from Python (20-30 us
    each on this project's CPU against 11 for `repeat`). The columns stay a stack: its two copies are two uses
    of the input, whose gradients autograd adds to the input's other uses' one by one, as the plain form does
    (one `repeat` per axis would add them to each other first: other bits). The rows' repeat sums each pair of
    rows as the plain form's second stack does, so the same bits, but where both are zero and negative: +0.0
    where the plain form has -0.0, which changes no sum it joins.
    """
    _, height, width, channels = x.shape
    if device_constants.eager_torch():
        columns = ops.stack([x, x], axis=3)  # (batch, H, W, 2, C)
        return ops.reshape(ops.repeat(columns, 2, axis=1), (-1, 2 * height, 2 * width, channels))
    x = ops.reshape(ops.stack([x, x], axis=3), (-1, height, 2 * width, channels))
    return ops.reshape(ops.stack([x, x], axis=2), (-1, 2 * height, 2 * width, channels))


def rectified_halves(activation, x, y, channels_first=False):
    """[activation(x - y), activation(y - x)] on the channel axis: the error units of both PredNets.

    On eager torch the activation runs once, on the concatenation: it is elementwise, so the same bits, with one
    operation and its backward fewer. (As activation([d, -d]) with d = x - y it would save a subtraction too, but
    where x equals y, -d is -0.0 where y - x is +0.0.)"""
    axis = 1 if channels_first else -1
    if device_constants.eager_torch():
        return activation(ops.concatenate([x - y, y - x], axis=axis))
    return ops.concatenate([activation(x - y), activation(y - x)], axis=axis)


def _through_channels_first(operation, x, *args, **kwargs):
    """`operation` (a convolution or a pooling) of channels_last `x`, given to it as a channels_first view.

    On eager torch, Keras' channels_last convolution copies its input twice (to channels_first memory, then
    back to channels_last memory, the layout it runs in) and its kernel once, and its pooling copies its input
    once, each an operation dispatched from Python. The transposed view is already a channels_first tensor in
    channels_last memory: torch runs the same kernel on the same memory without copying the input (the kernel's
    layout is converted inside torch's convolution instead), and its output, transposed back, is the
    channels_last tensor Keras would give."""
    return to_channels_last(operation(to_channels_first(x), *args, data_format="channels_first", **kwargs))
