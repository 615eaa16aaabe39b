"""The Chainer-lineage PredNet (quadjr/PredNet -> Watanabe lab) as a Keras 3 recurrent layer.

This is the model the retracted GPU-uncertainty study trained, not Lotter's:
the errors come first, computed from the predictions of the PREVIOUS step, and
the ConvLSTM has sigmoid gates, separate input and recurrent convolutions and
per-pixel peepholes. Per time step, in this order:

    1. errors, bottom-up, from the input x and the previous predictions p_l
         e_0 = [relu(x - p_0), relu(p_0 - x)]
         a_l = maxpool2(relu(ConvA_l(e_{l-1}))),  e_l = [relu(a_l - p_l), relu(p_l - a_l)]
    2. top-down ConvLSTM, highest layer first (r_l = h_l, r_{l+1} the NEW one)
         z_g = conv(x_g0, e_l) + conv(x_g1, up2(r_{l+1})) + conv(h_g, h_l) + b_g
         i = sigmoid(z_i + w_ci * c_l),  f = sigmoid(z_f + w_cf * c_l)
         o = sigmoid(z_o + w_co * c_l)      (peephole on the OLD c, as the original)
         c_l = f * c_l + i * tanh(z_c),  h_l = o * tanh(c_l)
    3. new predictions
         p_0 = clip(ConvP_0(h_0), 0, 1),  p_l = relu(ConvP_l(h_l))

p_0 after step t is the prediction of frame t+1. All states start at zero.

The peepholes w_c* are per-pixel weights, so a built layer runs on one frame
size only. Weights keep the original's names (`ConvA1`, `ConvP0`,
`ConvLSTM0_x_i0`, `ConvLSTM0_h_i`, `ConvLSTM0_c_i`, ...), which makes the
mapping to the authors' Chainer files one line per weight
(`prednet_keras.formats.chainer`). Only `keras.ops` is used: the layer runs on
TensorFlow, JAX and PyTorch.

Deliberate differences from the Chainer code (numerically equivalent up to
float32 round-off):
- the four gates' input and recurrent convolutions of a layer run as one
  convolution with concatenated kernels (the weights stay separate);
- channels_last layout: Chainer's (out, in, kh, kw) kernels are stored as
  (kh, kw, in, out), its (1, C, H, W) peepholes as (H, W, C);
- any batch size (the original's zero states had batch 1 built in);
- on eager torch, the operations of `feature_maps` (convolutions and pooling through
  channels_first views, the errors' relu once over both halves), the clip's bounds made
  once (device_constants) and, in the study's window, the gates' kernels concatenated once
  per window and every kernel laid out once as torch's convolution reads it
  (`ChainerPredNetCell.weights_once`): the same bits.
"""

import math

import keras
import numpy as np
from keras import ops
from keras.src import backend as _keras_backend

from prednet_keras.layers import device_constants
from prednet_keras.layers.device_constants import scalar
from prednet_keras.layers.feature_maps import (
    concatenated_kernel,
    convolve_same,
    maxpool2x2,
    rectified_halves,
    upsample2x,
)
from prednet_keras.layers.lotter import check_frame_size, loop_unrolled

__all__ = [
    "ChainerPredNet",
    "ChainerPredNetCell",
    "NumpyRandomNormal",
    "NumpyVarianceScaling",
    "NumpyZeros",
    "Peephole",
    "chainer_prediction_model",
    "find_chainer_prednet",
]

_PACKAGE = "prednet_keras"
GATES = ("i", "f", "c", "o")
PEEPHOLE_GATES = ("i", "f", "o")  # the candidate has none
OUTPUT_MODES = ("prediction", "aligned_prediction", "error")
DEFAULT_STACK_SIZES = (3, 48, 96, 192)
DEFAULT_FRAME_SIZE = (120, 160)  # (H, W): the study's 160x120 frames


# Initial values are drawn with numpy, as Chainer draws them. Besides fidelity
# this spares JAX one XLA compilation per weight shape when the layer is built
# (seconds per layer on a small CPU). The classes subclass Keras' own, so
# `prednet_keras.models.starting_point` knows their distributions.


@keras.saving.register_keras_serializable(package=_PACKAGE)
class NumpyVarianceScaling(keras.initializers.VarianceScaling):
    """`keras.initializers.VarianceScaling`, drawn with numpy's global generator
    (which `keras.utils.set_random_seed` seeds) or from `seed`."""

    def __call__(self, shape, dtype=None):
        shape = tuple(int(s) for s in shape)
        receptive = math.prod(shape[:-2]) if len(shape) > 2 else 1
        fan_in = shape[-2] * receptive if len(shape) > 1 else shape[0]
        fan_out = shape[-1] * receptive if len(shape) > 1 else shape[0]
        fan = {"fan_in": fan_in, "fan_out": fan_out}.get(self.mode, (fan_in + fan_out) / 2.0)
        scale = self.scale / max(1.0, fan)
        rng = _numpy_generator(self.seed)
        if self.distribution == "untruncated_normal":
            values = rng.normal(0.0, math.sqrt(scale), shape)
        elif self.distribution == "uniform":
            limit = math.sqrt(3.0 * scale)
            values = rng.uniform(-limit, limit, shape)
        else:
            raise ValueError(
                f"NumpyVarianceScaling draws 'untruncated_normal' or 'uniform', not {self.distribution!r}."
            )
        return np.asarray(values, dtype=_numpy_dtype(dtype))


@keras.saving.register_keras_serializable(package=_PACKAGE)
class NumpyRandomNormal(keras.initializers.RandomNormal):
    """`keras.initializers.RandomNormal`, drawn with numpy (see NumpyVarianceScaling)."""

    def __call__(self, shape, dtype=None):
        values = _numpy_generator(self.seed).normal(self.mean, self.stddev, tuple(int(s) for s in shape))
        return np.asarray(values, dtype=_numpy_dtype(dtype))


@keras.saving.register_keras_serializable(package=_PACKAGE)
class NumpyZeros(keras.initializers.Zeros):
    """`keras.initializers.Zeros` as a numpy array."""

    def __call__(self, shape, dtype=None):
        return np.zeros(tuple(int(s) for s in shape), dtype=_numpy_dtype(dtype))


def _numpy_generator(seed):
    return np.random if seed is None else np.random.default_rng(seed)


def _numpy_dtype(dtype):
    return np.dtype(keras.backend.standardize_dtype(dtype or keras.config.floatx()))


def chainer_conv_initializer():
    """Chainer's default for `L.Convolution2D` weights (LeCunNormal): N(0, 1/fan_in), not truncated."""
    return NumpyVarianceScaling(scale=1.0, mode="fan_in", distribution="untruncated_normal")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Peephole(keras.layers.Layer):
    """A per-pixel weight multiplied into the cell state: `y = c * kernel`.

    The original's `EltFilter(nobias=True)`, kernel shape (H, W, C), drawn like
    the original from N(0, sqrt(1 / (H * W * C))).

    Args:
        shape: (H, W, C) of the cell state it multiplies.
    """

    def __init__(self, shape, **kwargs):
        super().__init__(**kwargs)
        self.shape = tuple(int(s) for s in shape)
        self.kernel_initializer = NumpyRandomNormal(mean=0.0, stddev=math.sqrt(1.0 / math.prod(self.shape)))

    def build(self, input_shape=None):
        self.kernel = self.add_weight(
            shape=self.shape, initializer=self.kernel_initializer, name="kernel"
        )
        self.built = True

    def call(self, c):
        return c * self.kernel

    def get_config(self):
        config = super().get_config()
        config["shape"] = list(self.shape)
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ChainerPredNetCell(keras.layers.Layer):
    """One time step of the Chainer-lineage PredNet (channels_last).

    Use it through `ChainerPredNet`; the arguments are the same (see there).
    The state is `h_0..h_{L-1}, c_0..c_{L-1}, p_0..p_{L-1}`: LSTM outputs,
    LSTM cells, predictions.
    """

    def __init__(
        self,
        stack_sizes=DEFAULT_STACK_SIZES,
        R_stack_sizes=None,
        filter_size=3,
        frame_size=None,
        output_mode="prediction",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.stack_sizes = _positive_ints("stack_sizes", stack_sizes)
        self.nb_layers = len(self.stack_sizes)
        if self.nb_layers < 1:
            raise ValueError("`stack_sizes` must name at least one layer.")
        if R_stack_sizes is None:
            R_stack_sizes = self.stack_sizes
        self.R_stack_sizes = _positive_ints("R_stack_sizes", R_stack_sizes)
        if len(self.R_stack_sizes) != self.nb_layers:
            raise ValueError(
                f"len(R_stack_sizes) must be {self.nb_layers} (one per layer of stack_sizes="
                f"{self.stack_sizes}), got {len(self.R_stack_sizes)}."
            )
        self.filter_size = int(filter_size)
        if self.filter_size < 1 or self.filter_size % 2 == 0:
            # Chainer's pad=(k-1)/2 keeps the size only for odd kernels.
            raise ValueError(f"`filter_size` must be a positive odd integer, got {filter_size!r}.")
        if frame_size is not None:
            frame_size = _positive_ints("frame_size", frame_size)
            if len(frame_size) != 2:
                raise ValueError(f"`frame_size` must be (H, W), got {frame_size!r}.")
            check_frame_size(frame_size[0], frame_size[1], self.nb_layers)
            frame_size = tuple(frame_size)
        self.frame_size = frame_size
        if output_mode not in OUTPUT_MODES:
            raise ValueError(f"Unknown output_mode {output_mode!r}. Expected one of {list(OUTPUT_MODES)}.")
        self.output_mode = output_mode
        self.state_size = list(self.R_stack_sizes) * 2 + list(self.stack_sizes)

    # ------------------------------------------------------------------ build
    def build(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(
                f"ChainerPredNetCell expects frames of shape (batch, H, W, C), got {tuple(input_shape)}."
            )
        height, width, channels = input_shape[1:]
        if channels is not None and channels != self.stack_sizes[0]:
            raise ValueError(
                f"Frames have {channels} channels but stack_sizes[0] is {self.stack_sizes[0]}: they must match."
            )
        if self.frame_size is None:
            if height is None or width is None:
                raise ValueError(
                    "ChainerPredNet needs the frame size when it is built (its peephole weights are "
                    f"per pixel): give frame_size=(H, W) or an input with a known size, got {tuple(input_shape)}."
                )
            check_frame_size(height, width, self.nb_layers)
            self.frame_size = (int(height), int(width))
        else:
            check_same_frame_size(self.frame_size, (height, width))

        L = self.nb_layers
        kernel = (self.filter_size, self.filter_size)
        self.conv_a = [None] * L
        self.conv_p = []
        self.gate_convs = []  # per layer: {gate: [x_g0, (x_g1,) h_g]}
        self.peepholes = []  # per layer: {gate: Peephole}
        ordered = []

        def conv(name, filters, in_channels, use_bias):
            layer = keras.layers.Conv2D(
                filters,
                kernel,
                padding="same",
                use_bias=use_bias,
                kernel_initializer=chainer_conv_initializer(),
                bias_initializer=NumpyZeros(),
                name=name,
                dtype=self.dtype_policy,
            )
            layer.build((None, None, None, in_channels))
            ordered.append(layer)
            return layer

        # The original's link order: ConvA_l, ConvP_l, then the layer's ConvLSTM.
        for l in range(L):
            channels, r_channels = self.stack_sizes[l], self.R_stack_sizes[l]
            if l > 0:
                self.conv_a[l] = conv(f"ConvA{l}", channels, 2 * self.stack_sizes[l - 1], True)
            self.conv_p.append(conv(f"ConvP{l}", channels, r_channels, True))
            inputs = [2 * channels] + ([self.R_stack_sizes[l + 1]] if l < L - 1 else [])
            convs = {}
            for gate in GATES:
                convs[gate] = [
                    conv(f"ConvLSTM{l}_x_{gate}{k}", r_channels, in_channels, False)
                    for k, in_channels in enumerate(inputs)
                ]
                convs[gate].append(conv(f"ConvLSTM{l}_h_{gate}", r_channels, r_channels, True))
            self.gate_convs.append(convs)
            peepholes = {}
            for gate in PEEPHOLE_GATES:
                peephole = Peephole(
                    self.layer_shape(l, r_channels), name=f"ConvLSTM{l}_c_{gate}", dtype=self.dtype_policy
                )
                peephole.build()
                peepholes[gate] = peephole
                ordered.append(peephole)
            self.peepholes.append(peepholes)
        self.weight_layers = ordered
        self.built = True

    def layer_shape(self, l, channels):
        """(H_l, W_l, channels) of layer l's maps."""
        height, width = self.frame_size
        return (height >> l, width >> l, channels)

    def get_initial_state(self, batch_size=None):
        states = []
        for index, channels in enumerate(self.state_size):
            l = index % self.nb_layers
            states.append(ops.zeros((batch_size,) + self.layer_shape(l, channels), dtype=self.compute_dtype))
        return states

    # ------------------------------------------------------------------- step
    def call(self, x, states, training=False, weights=None):
        """One time step. `weights`: the convolutions' weights made once for the window (`weights_once`);
        None: made here from the variables."""
        L = self.nb_layers
        h_prev, c_prev, p_prev = states[:L], states[L : 2 * L], states[2 * L : 3 * L]

        # 1. Errors, bottom-up, against the predictions made at the previous step.
        e = []
        a = x
        for l in range(L):
            if l > 0:
                a = maxpool2x2(ops.relu(self._conv(self.conv_a[l], e[l - 1], weights and weights["a"][l])))
            e.append(rectified_halves(ops.relu, a, p_prev[l]))

        # 2. Top-down ConvLSTM: layer l reads the NEW h of layer l+1.
        h = [None] * L
        c = [None] * L
        for l in reversed(range(L)):
            inputs = [e[l]] + ([upsample2x(h[l + 1])] if l < L - 1 else []) + [h_prev[l]]
            z_i, z_f, z_c, z_o = self._gate_preactivations(l, ops.concatenate(inputs, axis=-1), weights)
            peep = self.peepholes[l]
            i = ops.sigmoid(z_i + peep["i"](c_prev[l]))
            f = ops.sigmoid(z_f + peep["f"](c_prev[l]))
            # The output gate's peephole reads the old cell, as in the original.
            o = ops.sigmoid(z_o + peep["o"](c_prev[l]))
            c[l] = f * c_prev[l] + i * ops.tanh(z_c)
            h[l] = o * ops.tanh(c[l])

        # 3. New predictions; p_0 is the prediction of the next frame.
        p = [self.predict(l, h[l], weights and weights["p"][l]) for l in range(L)]

        if self.output_mode == "prediction":
            output = p[0]
        elif self.output_mode == "aligned_prediction":
            output = p_prev[0]
        else:  # "error"
            output = ops.stack([ops.mean(e_l, axis=(1, 2, 3)) for e_l in e], axis=-1)
        return output, h + c + p

    def predict(self, l, h_l, kernel=None):
        """Layer l's prediction from its LSTM output: clip(ConvP_0(h), 0, 1) or relu(ConvP_l(h)); `kernel`:
        ConvP_l's, laid out once for the window, or None for the variable."""
        z = self._conv(self.conv_p[l], h_l, kernel)
        # The bounds as Keras makes them, made once on torch (device_constants: not a copy to the GPU per call).
        return ops.clip(z, scalar(0.0, z), scalar(1.0, z)) if l == 0 else ops.relu(z)

    def _conv(self, layer, x, kernel=None):
        y = convolve_same(x, layer.kernel if kernel is None else kernel)
        return y + layer.bias if layer.use_bias else y

    def _gate_preactivations(self, l, x, weights=None):
        """z_i, z_f, z_c, z_o of layer l from [e_l, up(h_{l+1}), h_l]: one fused convolution.

        Summing separate convolutions over the inputs equals one convolution of
        the concatenated inputs with the kernels concatenated on the input axis.
        """
        kernel, bias = weights["gates"][l] if weights is not None else self._fused_gate_weights(l)
        return ops.split(convolve_same(x, kernel) + bias, 4, axis=-1)

    def _fused_gate_weights(self, l):
        convs = self.gate_convs[l]
        kernel = concatenated_kernel([ops.concatenate([conv.kernel for conv in convs[gate]], axis=2) for gate in GATES])
        return kernel, ops.concatenate([convs[gate][-1].bias for gate in GATES], axis=0)

    def weights_once(self):
        """The convolutions' weights for every step of a window to share: {"gates": [(kernel, bias)] of the
        gates fused, "a": [kernel or None] (layer 0 has no ConvA), "p": [kernel]} per layer, each kernel laid
        out as torch's convolution reads it (feature_maps.concatenated_kernel); None where not.

        The weights do not change within a window, so the values are the ones each step would make. On eager
        torch, where each operation and its backward is dispatched from Python, the 5 concatenations per layer
        and step (each gate's kernels over its inputs, the gates, the biases) are made once per window, and
        their backward, which splits the kernel's gradient back into its 12 weights, runs once, after every
        step's gradient is summed; and the convolutions read kernels laid out once instead of copying them at
        every step, forward and backward. Elsewhere None: XLA and torch.compile merge the repeats themselves.
        Only where the weights are computed in their own dtype: under a mixed policy each step's access casts
        them, and a cast made once would have the steps' gradients summed in the lower precision."""
        if not device_constants.eager_torch() or self.compute_dtype != self.variable_dtype:
            return None
        return {"gates": [self._fused_gate_weights(l) for l in range(self.nb_layers)],
                "a": [None if conv is None else concatenated_kernel([conv.kernel]) for conv in self.conv_a],
                "p": [concatenated_kernel([conv.kernel]) for conv in self.conv_p]}

    def output_shape_for(self):
        """Per-step output shape (without batch)."""
        if self.output_mode == "error":
            return (self.nb_layers,)
        return self.layer_shape(0, self.stack_sizes[0]) if self.frame_size else (None, None, self.stack_sizes[0])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "stack_sizes": list(self.stack_sizes),
                "R_stack_sizes": list(self.R_stack_sizes),
                "filter_size": self.filter_size,
                "frame_size": list(self.frame_size) if self.frame_size is not None else None,
                "output_mode": self.output_mode,
            }
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ChainerPredNet(keras.layers.RNN):
    """The Chainer-lineage PredNet of the GPU-uncertainty study (Watanabe lab, after quadjr/PredNet).

    Input: frame sequences `(batch, time, H, W, C)`, channels_last, values in
    [0, 1]. H and W must be divisible by 2**(L-1) and, once the layer is built,
    equal its `frame_size`: the peephole weights are per pixel.

    Args:
        stack_sizes: channels of each layer's targets and predictions;
            `stack_sizes[0]` is the number of image channels. The original's
            `channels`, default (3, 48, 96, 192).
        R_stack_sizes: channels of each layer's ConvLSTM (the original's
            `r_channels`); None: the same as `stack_sizes`.
        filter_size: kernel size of every convolution (odd; 3 in the original).
        frame_size: (H, W) the layer is made for; None: taken from the first
            input. The study's frames are (120, 160).
        output_mode: "prediction" (default): at step t the prediction of frame
            t+1, what the original returns; "aligned_prediction": at step t
            the prediction of frame t made at step t-1 (zeros at t=0), the
            convention of Lotter's `PredNet`, so that tools comparing output t
            with frame t work for both; "error": the mean of each layer's error
            units at step t, shape (L,).
        **kwargs: recurrent options of `keras.layers.RNN` (`return_sequences`,
            `return_state`, `go_backwards`, `stateful`, `unroll`) and layer
            options (`name`, `dtype`, `trainable`).

    Example:

    ```python
    import numpy as np, prednet_keras
    from prednet_keras.layers.chainer import ChainerPredNet
    layer = ChainerPredNet(stack_sizes=(3, 48, 96, 192), return_sequences=True)
    frames = np.random.rand(1, 20, 120, 160, 3).astype("float32")
    predictions = layer(frames)  # (1, 20, 120, 160, 3); step t predicts frame t+1
    ```
    """

    def __init__(
        self,
        stack_sizes=DEFAULT_STACK_SIZES,
        R_stack_sizes=None,
        filter_size=3,
        frame_size=None,
        output_mode="prediction",
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        unroll=False,
        **kwargs,
    ):
        cell = ChainerPredNetCell(
            stack_sizes,
            R_stack_sizes=R_stack_sizes,
            filter_size=filter_size,
            frame_size=frame_size,
            output_mode=output_mode,
            name="chainer_pred_net_cell",
            dtype=kwargs.get("dtype"),
        )
        super().__init__(
            cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            unroll=unroll,
            **kwargs,
        )
        self.input_spec = keras.layers.InputSpec(ndim=5)

    def build(self, sequences_shape, initial_state_shape=None):
        if len(sequences_shape) != 5:
            raise ValueError(
                f"ChainerPredNet expects input of shape (batch, time, H, W, C), got {tuple(sequences_shape)}."
            )
        super().build(sequences_shape, initial_state_shape)

    def call(self, sequences, initial_state=None, mask=None, training=False):
        # Keras builds a layer once; a later call with other frames would fail
        # deep inside a broadcast, so say what is wrong here.
        check_same_frame_size(self.cell.frame_size, tuple(sequences.shape[2:4]))
        return super().call(sequences, initial_state=initial_state, mask=mask, training=training)

    def inner_loop(self, sequences, initial_state, mask, training=False):
        if self.unroll or not loop_unrolled(self.unroll, mask):  # Keras' loop as this layer asks for it
            return super().inner_loop(sequences, initial_state, mask, training=training)
        # A mask Keras' rolled loop cannot apply here (JAX's took the first state, h of layer 0, for the output
        # before a masked step): Keras' loop unrolled, whose masking keeps that output and every state.
        return _keras_backend.rnn(
            lambda inputs, states: self.cell(inputs, states, training=training),
            sequences,
            list(initial_state),
            go_backwards=self.go_backwards,
            mask=mask,
            unroll=True,
            input_length=sequences.shape[1],
            zero_output_for_mask=self.zero_output_for_mask,
            return_all_outputs=self.return_sequences,
        )

    def compute_output_shape(self, sequences_shape, initial_state_shape=None):
        batch, steps = sequences_shape[0], sequences_shape[1]
        cell = self.cell
        if cell.frame_size is None and cell.output_mode != "error":
            step_shape = tuple(sequences_shape[2:])
        else:
            step_shape = cell.output_shape_for()
        output_shape = (batch, steps) + step_shape if self.return_sequences else (batch,) + step_shape
        if not self.return_state:
            return output_shape
        frame_size = cell.frame_size or tuple(sequences_shape[2:4])
        states = []
        for index, channels in enumerate(cell.state_size):
            l = index % cell.nb_layers
            size = tuple(None if s is None else s >> l for s in frame_size)
            states.append((batch,) + size + (channels,))
        return (output_shape, *states)

    @property
    def weight_layers(self):
        """The sub-layers holding the weights, in the original's link order."""
        return self.cell.weight_layers

    def get_config(self):
        config = self.cell.get_config()
        for key in ("name", "trainable", "dtype"):
            config.pop(key, None)
        base = super().get_config()
        base.pop("cell", None)
        base.pop("zero_output_for_mask", None)
        config.update(base)
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


# `layer.stack_sizes`, `layer.frame_size`, ... read like the cell's.
def _cell_property(name):
    return property(lambda self: getattr(self.cell, name), doc=f"The cell's `{name}`.")


for _name in ("stack_sizes", "R_stack_sizes", "filter_size", "frame_size", "output_mode", "nb_layers"):
    setattr(ChainerPredNet, _name, _cell_property(_name))
del _name


def find_chainer_prednet(target):
    """The ChainerPredNet of a model (or the layer itself); errors unless there is exactly one."""
    if isinstance(target, ChainerPredNet):
        return target
    found = [layer for layer in target._flatten_layers(include_self=False) if isinstance(layer, ChainerPredNet)]
    if len(found) != 1:
        raise ValueError(
            f"Expected exactly one ChainerPredNet layer in {getattr(target, 'name', target)!r}, found {len(found)}."
        )
    return found[0]


def chainer_prediction_model(source, nt=None, output_mode="aligned_prediction"):
    """A model running a trained ChainerPredNet in another output mode, with a copy of its weights.

    The default, "aligned_prediction", makes output t the prediction of frame t
    (as Lotter's PredNet), so that code comparing output t with frame t serves
    both PredNets; "prediction" is the original's (output t predicts frame t+1).

    Args:
        source: a model holding one built ChainerPredNet, or the layer.
        nt: sequence length of the input; None: any.
        output_mode: "prediction", "aligned_prediction" or "error".

    Returns:
        A `keras.Model`: frames (batch, nt, H, W, C) -> per-step outputs.
    """
    layer = find_chainer_prednet(source)
    if not layer.built:
        raise ValueError("The ChainerPredNet has no weights yet (it was never built or trained).")
    config = layer.get_config()
    config.update(output_mode=output_mode, return_sequences=True, return_state=False, stateful=False)
    new_layer = ChainerPredNet.from_config(config)
    height, width = layer.frame_size
    inputs = keras.Input(shape=(nt, height, width, layer.stack_sizes[0]), name="frames")
    model = keras.Model(inputs, new_layer(inputs), name=f"chainer_prednet_{output_mode}")
    new_layer.set_weights(layer.get_weights())
    return model


def check_same_frame_size(expected, got):
    """Raises a clear error when frames of size `got` (H, W) reach a layer made for `expected`."""
    if expected is None:
        return
    got = tuple(got)
    if any(g is not None and g != e for g, e in zip(got, expected)):
        shown = "x".join("?" if g is None else str(g) for g in got)
        raise ValueError(
            f"This ChainerPredNet is made for {expected[0]}x{expected[1]} frames (H x W): its peephole "
            f"weights are per pixel, so it cannot run on {shown} frames. Resize or crop the frames to "
            f"{expected[0]}x{expected[1]}, or make a new layer with frame_size=({got[0]}, {got[1]})."
        )


def _positive_ints(name, values):
    try:
        out = [int(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a list of positive integers, got {values!r}.") from None
    if any(v < 1 for v in out):
        raise ValueError(f"`{name}` must be a list of positive integers, got {values!r}.")
    return out
