"""PredNet of Lotter, Kreiman & Cox (2016) as a Keras 3 recurrent layer.

A faithful port of the authors' Keras 2 `prednet.py`: same constructor arguments
and defaults, same state layout, same order of operations, same weights. The
whole model is in this file and reads in the order of the paper's equations:

    for each time step t
      0. (extrapolation) from `extrap_start_time` on, the input frame is replaced
         by the previous step's prediction
      1. top-down, l = L-1 .. 0 : convolutional LSTM
           x   = [r_l(t-1), e_l(t-1), up(r_{l+1}(t))]
           i,f,o = hard_sigmoid(conv(x)),  c_l = f*c_l + i*tanh(conv_c(x)),
           r_l = o * tanh(c_l)
      2. bottom-up, l = 0 .. L-1 : prediction and error
           ahat_l = relu(conv(r_l))            (ahat_0 is clipped at pixel_max)
           e_l    = [relu(ahat_l - a_l), relu(a_l - ahat_l)]
           a_l+1  = maxpool(relu(conv(e_l)))

Only `keras.ops` is used, so the layer runs on the TensorFlow, JAX and PyTorch
backends and compiles as one XLA program on TensorFlow and JAX.

Deliberate differences from the Keras 2 code (numerically equivalent):
- the four gate convolutions of a layer are evaluated as one convolution with
  concatenated kernels (faster on every backend; the weights stay separate and
  keep their original names `layer_{i,f,c,o}_{l}`);
- the cell computes in channels_last. With `data_format="channels_first"` the
  wrapper transposes inputs and image outputs, so users see channels_first
  tensors; the states (`return_state`, `stateful`) are kept channels_last.
- the extrapolation step counter is a per-sample state of shape (batch, 1)
  rather than a scalar;
- the time loop calls the cell's `call` directly (PredNet.inner_loop), so that
  torch.compile can trace it;
- on eager torch, the Python numbers given to ops (the clip's bounds, pixel_max) are
  made into device tensors once, not at every call (device_constants);
- on eager torch, the gates' kernels and biases are concatenated once per sequence,
  not at every time step (PredNetCell.weights_once): the same bits;
- on eager torch, the convolutions and the pooling are given channels_first views of
  the channels_last tensors, which spares Keras' copies of them, and the error activation
  runs once over both halves (feature_maps): the same bits; the errors, the targets A_l and
  the predictions stay channels_first views from step to step, so that only the LSTM's
  inputs and outputs are transposed (PredNetCell.carried_channels_first): the same bits;
- on eager torch, the gate activation runs once over the four gates' fused output, the
  candidate's part unused (PredNetCell._gates), and every kernel is laid out once per
  sequence as torch's convolution reads it (feature_maps.concatenated_kernel,
  PredNetCell.weights_once): the same bits;
- opt-in (PREDNET_CHANNEL_MULTIPLE), the convolutions' input channels are padded with
  zeros inside the step for GPU kernels (channel_alignment); off by default.

Mixed precision (a Keras dtype policy such as "mixed_bfloat16": float32
variables, bfloat16 compute). The activations run in the policy's compute dtype
(`activation_dtype`): the convolutions (inputs, kernels and biases cast to it),
the gates i, f, o and the candidate, r_l, A_l and Ahat_l, and the errors E_l as
they are kept for the next step and fed to the next layer's convolution. On a
GPU the training step is bound by the memory traffic of this elementwise work
and of the activations saved for the backward pass, not by the convolutions'
arithmetic, so this is where the speed is. Float32 (the variables' dtype),
each for a reason:
- the LSTM cell state c_l: it accumulates `f * c + i * g` over the sequence;
  rounded to bfloat16's 8 significant bits at every step, the small increments
  `i * g` are lost against a larger c. `f * c` and the sum are computed in
  float32 (`i * g` is rounded once, as one increment);
- the frame A_0 and the error against it, E_0 (ahat_0 in bfloat16 minus the
  frame in float32): the frame is the data, and pixel values k/255 are not
  bfloat16 numbers; E_0 enters the state (and A_1's convolution) in bfloat16;
- the per-layer mean errors (output_mode "error" / "all"): the mean of each E_l
  is taken in float32, as the loss is made of them (and `WeightedError` in
  models/lotter.py, the loss itself, is float32 whatever the policy);
- the biases' gradients: a bias is broadcast in float32 and then cast, so that
  its gradient, a sum over batch and pixels, is taken in float32;
- what the layer takes and gives: `compute_dtype` of the layer and of the cell is
  float32, so frames come in and outputs and states leave (`return_state`) as
  float32, and a stateful layer's state variables are float32. keras.layers.RNN
  gives every state one dtype (its state variables and its initial state are cast
  to the cell's compute_dtype: keras-team/keras#20605, #15164); PredNet.inner_loop
  then casts each state to its own dtype (`cell.state_dtypes`) before the time
  loop, so that c crosses calls of a stateful layer unrounded.
Under a float32 policy every dtype is float32 and there is no cast at all: the
same operations as without this feature (each cast is a Python-level decision).
"""

import keras
from keras import ops
from keras.src import backend as _keras_backend

from prednet_keras import backends
from prednet_keras.options.frame_size import check_frame_size
from prednet_keras.layers.channel_alignment import channel_multiple_from_environment, pad_input_channels
from prednet_keras.layers import device_constants
from prednet_keras.layers.device_constants import scalar
from prednet_keras.layers.feature_maps import (
    concatenated_kernel,
    convolve_same,
    maxpool2x2,
    rectified_halves,
    to_channels_first,
    to_channels_last,
    upsample2x,
)
from prednet_keras.layers.lotter_args import (
    _as_int_list,
    _kernel_size,
    _resolve_data_format,
    _serialize_activation,
    get_activation,
    keras2_hard_sigmoid,
    parse_output_mode,
)

__all__ = ["PredNet", "PredNetCell", "keras2_hard_sigmoid"]

_PACKAGE = "prednet_keras"
# Whether a stateful layer copies its states before each step, and whether Keras' rolled loop can take a mask:
# fixed when Keras starts, and read as constants inside the step (torch.compile traces it).
_BACKEND = backends.find(keras.backend.backend())
_COPIES_RNN_STATES = _BACKEND is not None and _BACKEND.copies_rnn_states
_ROLLED_LOOP_MASKS = _BACKEND is None or _BACKEND.rolled_loop_masks_image_states
# Conv types in the order the original creates (and sorts) its weights.
CONV_TYPES = ("a", "ahat", "c", "f", "i", "o")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class PredNetCell(keras.layers.Layer):
    """One time step of PredNet (channels_last).

    Use it through `PredNet`, which runs it over a sequence. Arguments are
    those of `PredNet` (see there), without the recurrent-layer options.

    The state is the list `r_0..r_{L-1}, c_0..c_{L-1}, e_0..e_{L-1}`, followed
    by the previous frame prediction and a step counter when
    `extrap_start_time` is set, the same order as the original. What it takes
    and gives is channels_last; within `PredNet`'s time loop on eager torch,
    the states `carried_channels_first` names are channels_first views.
    """

    def __init__(
        self,
        stack_sizes,
        R_stack_sizes,
        A_filt_sizes,
        Ahat_filt_sizes,
        R_filt_sizes,
        pixel_max=1.0,
        error_activation="relu",
        A_activation="relu",
        LSTM_activation="tanh",
        LSTM_inner_activation="hard_sigmoid",
        output_mode="error",
        extrap_start_time=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.stack_sizes = _as_int_list("stack_sizes", stack_sizes)
        self.nb_layers = len(self.stack_sizes)
        self.R_stack_sizes = _as_int_list("R_stack_sizes", R_stack_sizes)
        self.A_filt_sizes = [_kernel_size(k) for k in A_filt_sizes]
        self.Ahat_filt_sizes = [_kernel_size(k) for k in Ahat_filt_sizes]
        self.R_filt_sizes = [_kernel_size(k) for k in R_filt_sizes]
        expected = {
            "R_stack_sizes": (self.R_stack_sizes, self.nb_layers),
            "A_filt_sizes": (self.A_filt_sizes, self.nb_layers - 1),
            "Ahat_filt_sizes": (self.Ahat_filt_sizes, self.nb_layers),
            "R_filt_sizes": (self.R_filt_sizes, self.nb_layers),
        }
        if self.nb_layers < 1:
            raise ValueError("`stack_sizes` must name at least one layer.")
        for name, (values, length) in expected.items():
            if len(values) != length:
                raise ValueError(
                    f"len({name}) must be {length} for {self.nb_layers} layers "
                    f"(stack_sizes={self.stack_sizes}), got {len(values)}."
                )
        self.pixel_max = float(pixel_max)
        self.error_activation = error_activation
        self.A_activation = A_activation
        self.LSTM_activation = LSTM_activation
        self.LSTM_inner_activation = LSTM_inner_activation
        self._error_act = get_activation(error_activation)
        self._a_act = get_activation(A_activation)
        self._lstm_act = get_activation(LSTM_activation)
        self._gate_act = get_activation(LSTM_inner_activation)
        self.output_layer_type, self.output_layer_num = parse_output_mode(
            output_mode, self.nb_layers
        )
        self.output_mode = output_mode
        if extrap_start_time is not None:
            extrap_start_time = int(extrap_start_time)
            if extrap_start_time < 1:
                raise ValueError(
                    "`extrap_start_time` must be >= 1 (the first prediction needs one "
                    f"real frame), got {extrap_start_time}."
                )
        self.extrap_start_time = extrap_start_time
        # Not a constructor argument: it changes no weight and no saved file (channel_alignment).
        self.channel_multiple = channel_multiple_from_environment()

        state_size = list(self.R_stack_sizes) * 2 + [2 * s for s in self.stack_sizes]
        if extrap_start_time is not None:
            state_size += [self.stack_sizes[0], 1]
        self.state_size = state_size
        self.frame_shape = None  # (H, W), known at build

    # --------------------------------------------------------------- dtypes
    @property
    def compute_dtype(self):
        """The dtype of what the cell takes and gives: frames, outputs, the state list
        keras.layers.RNN keeps. The variables' dtype (float32 under a mixed policy);
        see the module docstring."""
        return self.dtype_policy.variable_dtype

    @property
    def activation_dtype(self):
        """The dtype of the activations (convolutions, gates, r, A, Ahat, E): the policy's
        compute dtype (bfloat16 under "mixed_bfloat16")."""
        return self.dtype_policy.compute_dtype

    @property
    def state_dtypes(self):
        """The dtype of each state in the time loop: r and e in `activation_dtype`; c, the
        previous prediction (it replaces the frame) and the step counter in float32."""
        L, act, exact = self.nb_layers, self.activation_dtype, self.compute_dtype
        dtypes = [act] * L + [exact] * L + [act] * L
        if self.extrap_start_time is not None:
            dtypes += [exact, exact]
        return dtypes

    def _act(self, x):
        """x in the activation dtype. A Python-level decision: no cast when it is x's already,
        so that a float32 model has no cast in its graph at all."""
        return _as_dtype(x, self.activation_dtype)

    def _exact(self, x):
        """x in float32 (the variables' dtype); no cast when it is already."""
        return _as_dtype(x, self.compute_dtype)

    # ------------------------------------------------------------------ build
    def build(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(
                f"PredNetCell expects frames of shape (batch, H, W, C), got {input_shape}."
            )
        height, width, channels = input_shape[1:]
        check_frame_size(height, width, self.nb_layers)
        if channels is not None and channels != self.stack_sizes[0]:
            raise ValueError(
                f"Frames have {channels} channels but stack_sizes[0] is "
                f"{self.stack_sizes[0]}: they must match."
            )
        self.frame_shape = (int(height), int(width))

        # One Conv2D per (type, layer), created in the original's order so that
        # `weights` lists them exactly as Keras 2 did. They are used for their
        # variables only; `call` runs the convolutions itself.
        self.convs = {kind: [] for kind in CONV_TYPES}
        ordered = []
        for kind in CONV_TYPES:
            layers = range(self.nb_layers - 1) if kind == "a" else range(self.nb_layers)
            for l in layers:
                filters, kernel, in_channels = self._conv_geometry(kind, l)
                conv = keras.layers.Conv2D(
                    filters,
                    kernel,
                    padding="same",
                    name=f"layer_{kind}_{l}",
                    dtype=self.dtype_policy,
                )
                conv.build((None, None, None, in_channels))
                self.convs[kind].append(conv)
                ordered.append(conv)
        self.conv_layers = ordered
        self.built = True

    def _conv_geometry(self, kind, l):
        """(filters, kernel size, input channels) of conv `kind` at layer l."""
        if kind == "a":
            return self.stack_sizes[l + 1], self.A_filt_sizes[l], 2 * self.stack_sizes[l]
        if kind == "ahat":
            return self.stack_sizes[l], self.Ahat_filt_sizes[l], self.R_stack_sizes[l]
        gate_in = self.R_stack_sizes[l] + 2 * self.stack_sizes[l]
        if l < self.nb_layers - 1:
            gate_in += self.R_stack_sizes[l + 1]
        return self.R_stack_sizes[l], self.R_filt_sizes[l], gate_in

    def get_initial_state(self, batch_size=None):
        height, width = self.frame_shape
        states = []
        for l, channels in enumerate(self.R_stack_sizes * 2):
            l = l % self.nb_layers
            states.append(self._zeros(batch_size, height >> l, width >> l, channels))
        for l, channels in enumerate(self.stack_sizes):
            states.append(self._zeros(batch_size, height >> l, width >> l, 2 * channels))
        if self.extrap_start_time is not None:
            states.append(self._zeros(batch_size, height, width, self.stack_sizes[0]))
            states.append(ops.zeros((batch_size, 1), dtype=self.compute_dtype))
        return states

    def _zeros(self, batch_size, height, width, channels):
        return ops.zeros((batch_size, height, width, channels), dtype=self.compute_dtype)

    # ------------------------------------------------------------------- step
    def call(self, a, states, training=False, weights=None):
        """One time step. `weights`: the convolutions' weights made once for the sequence (`weights_once`);
        None: made here from the variables. With `weights["channels_first"]` (eager torch), the feature maps
        the convolutions take and give are channels_first views: `a`, the image outputs and the states that
        `carried_channels_first` names (PredNet.inner_loop makes and undoes them once per sequence)."""
        L = self.nb_layers
        channels_first = weights is not None and weights["channels_first"]
        to_maps = to_channels_first if channels_first else (lambda x: x)
        r_tm1 = states[:L]
        c_tm1 = states[L : 2 * L]
        e_tm1 = states[2 * L : 3 * L]

        if self.extrap_start_time is not None:
            previous_prediction, t = states[3 * L], states[3 * L + 1]
            extrapolating = ops.reshape(t >= self.extrap_start_time, (-1, 1, 1, 1))
            a = ops.where(extrapolating, previous_prediction, a)

        # 1. Top-down: the convolutional LSTM of each layer, highest first.
        r = [None] * L
        c = [None] * L
        for l in reversed(range(L)):
            inputs = [to_maps(r_tm1[l]), e_tm1[l]]
            if l < L - 1:
                inputs.append(to_maps(upsample2x(r[l + 1])))
            x = ops.concatenate(inputs, axis=1 if channels_first else -1)
            i, f, candidate, o = self._gates(x, l, weights)
            # c is float32 (see the module docstring): f * c and the sum are computed in it.
            c[l] = self._exact(f) * c_tm1[l] + self._exact(i * self._lstm_act(candidate))
            r[l] = o * self._act(self._lstm_act(c[l]))

        # 2. Bottom-up: predictions, errors and the next layer's target.
        e = [None] * L
        errors = [None] * L  # E_l as computed; e_l is E_l in the activation dtype
        output = None
        for l in range(L):
            ahat = ops.relu(self._conv("ahat", l, to_maps(r[l]), weights))
            if l == 0:
                # pixel_max as the tensor Keras makes of it, made once on torch (device_constants).
                ahat = ops.minimum(ahat, scalar(self.pixel_max, ahat, dtype_name(ahat.dtype)))
                frame_prediction = ahat
                # E_0 against the frame as given (float32 under a mixed policy).
                ahat = self._exact(ahat)
            error = rectified_halves(self._error_act, ahat, a, channels_first)
            errors[l], e[l] = error, self._act(error)
            if self.output_layer_num == l:
                output = {"A": a, "Ahat": ahat, "R": r[l], "E": error}[self.output_layer_type]
            if l < L - 1:
                a = maxpool2x2(self._a_act(self._conv("a", l, e[l], weights)), channels_first)

        if output is None:
            if self.output_mode == "prediction":
                output = frame_prediction
            else:
                # Means taken in float32: the loss is made of them.
                means = [ops.mean(self._exact(error), axis=(1, 2, 3)) for error in errors]
                errors = ops.stack(means, axis=-1)
                if self.output_mode == "error":
                    output = errors
                else:  # "all"
                    image = to_channels_last(frame_prediction) if channels_first else frame_prediction
                    flat = ops.reshape(image, (ops.shape(image)[0], -1))  # height, width, channels
                    output = ops.concatenate([self._exact(flat), errors], axis=-1)

        new_states = r + c + e
        if self.extrap_start_time is not None:
            new_states += [self._exact(frame_prediction), t + 1]
        return output, new_states

    def _conv(self, kind, l, x, weights=None):
        conv = self.convs[kind][l]
        if weights is None:
            return self._add_bias(self._convolve(x, conv.kernel), conv.bias)
        kernel, bias = weights[kind][l]
        return self._add_bias(self._convolve(x, kernel, weights["channels_first"]), bias)

    def _convolve(self, x, kernel, channels_first=False):
        x, kernel = self._act(x), self._act(kernel)
        if self.channel_multiple:  # off by default: then the graph has no trace of it
            x, kernel = pad_input_channels(x, kernel, self.channel_multiple, channels_first)
        return convolve_same(x, kernel, channels_first)

    def _add_bias(self, y, bias):
        # Under a mixed policy the bias is broadcast in float32, then cast: its gradient, a sum
        # over batch and pixels (tens of thousands of terms), is then taken in float32; a
        # bfloat16 bias would have it summed in bfloat16.
        if self.activation_dtype == self.compute_dtype:
            return y + bias
        return y + self._act(ops.broadcast_to(bias, ops.shape(y)))

    def _gates(self, x, l, weights=None):
        """i, f, candidate (pre-activation), o of layer l: one fused convolution.

        On eager torch the gate activation runs once over all four parts and the candidate's part of
        it is left unused: Keras 2's hard sigmoid is three operations forward and six backward, dispatched
        one by one from Python, and once instead of three times saves 14 of them per layer and step
        (tests/layers/test_kernels_once.py counts the clamps). It is elementwise, so i, f and o are the
        same values, and the candidate's part sends back a zero gradient, which adds nothing to the
        candidate's own: the same bits."""
        if weights is None:
            kernel, bias = self._fused_gate_weights(l)
            z = self._add_bias(self._convolve(x, kernel), bias)
        else:
            kernel, bias = weights["gates"][l]
            y = self._convolve(x, kernel, weights["channels_first"])
            z = self._add_bias(to_channels_last(y) if weights["channels_first"] else y, bias)
        if device_constants.eager_torch():
            i, f, _, o = ops.split(self._gate_act(z), 4, axis=-1)
            size = self.R_stack_sizes[l]
            return i, f, z[..., 2 * size : 3 * size], o
        z_i, z_f, z_c, z_o = ops.split(z, 4, axis=-1)
        return self._gate_act(z_i), self._gate_act(z_f), z_c, self._gate_act(z_o)

    def _fused_gate_weights(self, l):
        convs = [self.convs[kind][l] for kind in ("i", "f", "c", "o")]
        return (concatenated_kernel([conv.kernel for conv in convs]),
                ops.concatenate([conv.bias for conv in convs], axis=-1))

    def weights_once(self):
        """The convolutions' weights for every step of a sequence to share: {"gates": [(kernel, bias)] of the
        four gates fused, "a": [(kernel, bias)], "ahat": [(kernel, bias)]} per layer, each kernel laid out as
        torch's convolution reads it (feature_maps.concatenated_kernel) and the A and Ahat biases shaped
        (C, 1, 1), and "channels_first": True, the layout the convolutions then take and give; None where not.

        The weights do not change within a sequence, so the values are the ones each step would make. On
        eager torch, where each operation and its backward is dispatched from Python, the gates' 80
        concatenations of 4 layers and 10 steps become 8, and the convolutions read kernels laid out once
        instead of copying them at every step, forward and backward. Elsewhere None, and the steps use the
        variables: XLA and torch.compile merge the repeats themselves, and their programs stay as they were.
        Only float32 is shared: a kernel cast to bfloat16 once for all steps would have its gradient summed
        over the steps in bfloat16 (autograd sums in the tensor's dtype), where each step's own cast sums
        them in float32. `PredNet` hands them to every step of its time loop (`call`'s weights).

        With them the convolutions and poolings take and give channels_first views of channels_last memory
        (feature_maps), which `PredNet.inner_loop` makes of the frames and states once per sequence. Each
        transpose is a Keras call and a permute node of the backward pass, which cost an eager step more than
        their share of its arithmetic: of the 28 a step of Lotter's KITTI model made around its convolutions
        and poolings, 15 are left (each gate convolution's r and output, each upsampling's result, each
        prediction convolution's r). The
        LSTM's gates and update stay channels_last: the gradient autograd makes of the candidate's unused
        activation is zeros laid out as the tensor's shape reads, and the gates' biases' gradients, sums over
        it, would then be summed in another order. The memory and the kernels are the same, so the same
        bits (tests/layers/test_kernels_once.py)."""
        if not device_constants.eager_torch():
            return None

        def channels_first(conv):  # its bias shaped (C, 1, 1), to add to a channels_first output
            return concatenated_kernel([conv.kernel]), ops.reshape(conv.bias, (-1, 1, 1))

        return {"gates": [self._fused_gate_weights(l) for l in range(self.nb_layers)],
                **{kind: [channels_first(conv) for conv in self.convs[kind]] for kind in ("a", "ahat")},
                "channels_first": True}

    def carried_channels_first(self):
        """For each state, whether the steps carry it as a channels_first view when they compute on them
        (`weights_once`): e and the previous prediction, which convolutions make; not r and c, which the
        LSTM's update makes channels_last, nor the step counter.

        r stays channels_last, and each of its uses as a convolution's input gets its own transpose, because
        autograd adds the gradients of a tensor's uses in the order they come: r is used by the upsampling
        (twice), the prediction's convolution and the next step's gates, and one shared view for two of them
        would add those two first, another order of the same sum (other bits)."""
        L = self.nb_layers
        carried = [False] * L + [False] * L + [True] * L
        if self.extrap_start_time is not None:
            carried += [True, False]
        return carried

    def image_output_channels_first(self):
        """Whether an image output (A, Ahat, E, the prediction) leaves the steps as a channels_first view when
        they compute on them: all but R, which the LSTM makes channels_last."""
        return self.output_layer_type != "R"

    # ------------------------------------------------------------------ shapes
    def output_shape_for(self, height, width):
        """Per-step output shape (without batch) for frames of height x width."""
        channels = self.stack_sizes[0]
        if self.output_layer_type is not None:
            l = self.output_layer_num
            size = {
                "R": self.R_stack_sizes[l],
                "E": 2 * self.stack_sizes[l],
                "A": self.stack_sizes[l],
                "Ahat": self.stack_sizes[l],
            }[self.output_layer_type]
            return (_shrink(height, l), _shrink(width, l), size)
        if self.output_mode == "prediction":
            return (height, width, channels)
        if self.output_mode == "error":
            return (self.nb_layers,)
        if height is None or width is None:
            return (None,)
        return (height * width * channels + self.nb_layers,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "stack_sizes": list(self.stack_sizes),
                "R_stack_sizes": list(self.R_stack_sizes),
                "A_filt_sizes": [list(k) for k in self.A_filt_sizes],
                "Ahat_filt_sizes": [list(k) for k in self.Ahat_filt_sizes],
                "R_filt_sizes": [list(k) for k in self.R_filt_sizes],
                "pixel_max": self.pixel_max,
                "error_activation": _serialize_activation(self.error_activation),
                "A_activation": _serialize_activation(self.A_activation),
                "LSTM_activation": _serialize_activation(self.LSTM_activation),
                "LSTM_inner_activation": _serialize_activation(self.LSTM_inner_activation),
                "output_mode": self.output_mode,
                "extrap_start_time": self.extrap_start_time,
            }
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class PredNet(keras.layers.RNN):
    """PredNet (Lotter, Kreiman & Cox 2016): a predictive-coding recurrent layer.

    Input: a batch of frame sequences, `(batch, time, H, W, C)` in
    channels_last (`(batch, time, C, H, W)` with channels_first). H and W must
    be divisible by 2**(L-1) where L = len(stack_sizes), and C must equal
    `stack_sizes[0]`.

    Args:
        stack_sizes: channels of the targets A_l per layer; `stack_sizes[0]` is
            the number of image channels.
        R_stack_sizes: channels of the representation (LSTM) units R_l.
        A_filt_sizes: kernel sizes of the A_l -> A_{l+1} convolutions (L-1).
        Ahat_filt_sizes: kernel sizes of the R_l -> Ahat_l convolutions (L).
        R_filt_sizes: kernel sizes of the LSTM gate convolutions (L).
        pixel_max: upper clip of the frame prediction Ahat_0.
        error_activation: activation of the two halves of E_l.
        A_activation: activation of the A_l convolutions.
        LSTM_activation: cell and output activation of the LSTM.
        LSTM_inner_activation: gate activation; "hard_sigmoid" is the Keras 2
            hard sigmoid `clip(0.2 x + 0.5, 0, 1)` as in the original.
        output_mode: "error" (per-layer mean of E_l, shape (L,)),
            "prediction" (the predicted frame), "all" (flattened prediction
            followed by the L errors), or a layer output `R{l}`, `E{l}`, `A{l}`,
            `Ahat{l}`.
        extrap_start_time: from this time step on, the model is fed its own
            previous prediction instead of the input frame (multi-step
            prediction). None disables extrapolation.
        data_format: "channels_last" (native) or "channels_first". Keras 2's
            `dim_ordering` ("tf"/"th") is accepted for old configurations.
        **kwargs: recurrent options of `keras.layers.RNN` (`return_sequences`,
            `return_state`, `go_backwards`, `stateful`, `unroll`) and layer
            options (`name`, `dtype`, `trainable`).

    Example:

    ```python
    import numpy as np, keras, prednet_keras
    layer = prednet_keras.PredNet(
        stack_sizes=(3, 48, 96, 192), R_stack_sizes=(3, 48, 96, 192),
        A_filt_sizes=(3, 3, 3), Ahat_filt_sizes=(3, 3, 3, 3),
        R_filt_sizes=(3, 3, 3, 3), output_mode="prediction",
        return_sequences=True)
    frames = np.random.rand(2, 10, 128, 160, 3).astype("float32")
    predictions = layer(frames)  # (2, 10, 128, 160, 3); step t predicts frame t
    ```
    """

    def __init__(
        self,
        stack_sizes,
        R_stack_sizes,
        A_filt_sizes,
        Ahat_filt_sizes,
        R_filt_sizes,
        pixel_max=1.0,
        error_activation="relu",
        A_activation="relu",
        LSTM_activation="tanh",
        LSTM_inner_activation="hard_sigmoid",
        output_mode="error",
        extrap_start_time=None,
        data_format=None,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        unroll=False,
        **kwargs,
    ):
        data_format = _resolve_data_format(data_format, kwargs.pop("dim_ordering", None))
        cell = PredNetCell(
            stack_sizes,
            R_stack_sizes,
            A_filt_sizes,
            Ahat_filt_sizes,
            R_filt_sizes,
            pixel_max=pixel_max,
            error_activation=error_activation,
            A_activation=A_activation,
            LSTM_activation=LSTM_activation,
            LSTM_inner_activation=LSTM_inner_activation,
            output_mode=output_mode,
            extrap_start_time=extrap_start_time,
            name="pred_net_cell",
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
        self.data_format = data_format
        self.input_spec = keras.layers.InputSpec(ndim=5)

    @property
    def compute_dtype(self):
        """The dtype of the frames taken in, the states and the outputs: the variables' dtype.

        Under a mixed policy the cell's activations use the policy's compute dtype
        (`cell.activation_dtype`) inside the time loop; see the module docstring.
        """
        return self.dtype_policy.variable_dtype

    def inner_loop(self, sequences, initial_state, mask, training=False):
        # As keras.layers.RNN's, except that each time step runs the cell's `call`
        # rather than `cell(...)`: Layer.__call__ would convert and check the inputs,
        # open scopes and bind the call signature at every step, which this layer's
        # own __call__ has done once for the sequence. That bookkeeping is Python that
        # torch.compile cannot trace (a graph break and a recompilation per step) and
        # that costs eager backends time; the operations computed are the same.
        weights = self.cell.weights_once()  # None but on eager torch

        def step(inputs, states):
            if self.stateful and _COPIES_RNN_STATES:
                # Copies, as Keras' RNN makes: in-place updates of the state variables
                # would otherwise break autograd.
                states = [ops.copy(state) for state in states]
            # The cell's name scope, as its __call__ would open: TensorFlow names the
            # operations after it, and its gradient summation order follows the names.
            with keras.name_scope(self.cell.name, caller=self.cell):
                return self.cell.call(inputs, states, training=training, weights=weights)

        # keras.layers.RNN has cast every state to the cell's compute_dtype (float32);
        # each state enters the loop in its own dtype (no cast under a float32 policy).
        initial_state = [_as_dtype(s, d) for s, d in zip(initial_state, self.cell.state_dtypes)]
        channels_first = weights is not None and weights["channels_first"]
        carried = self.cell.carried_channels_first()
        if channels_first:  # the convolutions take channels_first views (PredNetCell.weights_once)
            sequences = to_channels_first(sequences)
            initial_state = [to_channels_first(s) if moved else s for s, moved in zip(initial_state, carried)]
        last_output, outputs, states = _keras_backend.rnn(
            step,
            sequences,
            initial_state,
            go_backwards=self.go_backwards,
            mask=mask,
            unroll=loop_unrolled(self.unroll, mask),
            input_length=sequences.shape[1],
            zero_output_for_mask=self.zero_output_for_mask,
            return_all_outputs=self.return_sequences,
        )
        if channels_first:
            if self.cell.image_output_channels_first() and len(last_output.shape) == 4:  # not the errors
                last_output, outputs = to_channels_last(last_output), to_channels_last(outputs)
            states = [to_channels_last(s) if moved else s for s, moved in zip(states, carried)]
        return last_output, outputs, states

    def get_initial_state(self, batch_size):
        # keras.layers.RNN's first tests whether the cell has the method (`if getattr(...)`), which
        # TorchDynamo in torch 2.11 cannot trace: a graph break in the compiled forward pass.
        return self.cell.get_initial_state(batch_size=batch_size)

    def _to_channels_last_shape(self, shape):
        shape = tuple(shape)
        if self.data_format == "channels_first":
            return shape[:2] + shape[3:] + shape[2:3]
        return shape

    def build(self, sequences_shape, initial_state_shape=None):
        shape = self._to_channels_last_shape(sequences_shape)
        if len(shape) != 5:
            raise ValueError(
                f"PredNet expects input of shape (batch, time, H, W, C), got {tuple(sequences_shape)}."
            )
        super().build(shape, initial_state_shape)

    def call(self, sequences, initial_state=None, mask=None, training=False):
        if self.data_format == "channels_first":
            sequences = ops.transpose(sequences, (0, 1, 3, 4, 2))
        result = super().call(sequences, initial_state=initial_state, mask=mask, training=training)
        if self.data_format != "channels_first":
            return result
        if self.return_state:
            return (self._output_to_channels_first(result[0]), *result[1:])
        return self._output_to_channels_first(result)

    def _output_to_channels_first(self, output):
        cell = self.cell
        time_axes = 2 if self.return_sequences else 1
        if len(output.shape) == time_axes + 3:  # an image: move channels to the front
            perm = list(range(time_axes)) + [time_axes + 2, time_axes, time_axes + 1]
            return ops.transpose(output, perm)
        if cell.output_mode == "all":  # the flattened prediction is re-flattened as C, H, W
            height, width = cell.frame_shape
            channels = cell.stack_sizes[0]
            lead = tuple(output.shape[:-1])
            lead = tuple(ops.shape(output)[i] for i in range(len(lead)))
            image = output[..., : height * width * channels]
            image = ops.reshape(image, lead + (height, width, channels))
            perm = list(range(len(lead))) + [len(lead) + 2, len(lead), len(lead) + 1]
            image = ops.reshape(ops.transpose(image, perm), lead + (-1,))
            return ops.concatenate([image, output[..., height * width * channels :]], axis=-1)
        return output

    def compute_output_shape(self, sequences_shape, initial_state_shape=None):
        batch, steps, height, width, _ = self._to_channels_last_shape(sequences_shape)
        step_shape = self.cell.output_shape_for(height, width)
        if self.data_format == "channels_first" and len(step_shape) == 3:
            step_shape = (step_shape[2], step_shape[0], step_shape[1])
        output_shape = (batch, steps) + step_shape if self.return_sequences else (batch,) + step_shape
        if not self.return_state:
            return output_shape
        state_shapes = []
        cell = self.cell
        L = cell.nb_layers
        for index, channels in enumerate(cell.state_size):
            if index == 3 * L + 1:
                state_shapes.append((batch, 1))
            else:
                l = index % L if index < 3 * L else 0
                state_shapes.append((batch, _shrink(height, l), _shrink(width, l), channels))
        return (output_shape, *state_shapes)

    def get_config(self):
        config = self.cell.get_config()
        for key in ("name", "trainable", "dtype"):
            config.pop(key, None)
        base = super().get_config()
        base.pop("cell", None)
        base.pop("zero_output_for_mask", None)
        config.update(base)
        config["data_format"] = self.data_format
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


_CELL_ATTRIBUTES = frozenset(
    [
        "stack_sizes",
        "R_stack_sizes",
        "A_filt_sizes",
        "Ahat_filt_sizes",
        "R_filt_sizes",
        "nb_layers",
        "pixel_max",
        "error_activation",
        "A_activation",
        "LSTM_activation",
        "LSTM_inner_activation",
        "output_mode",
        "extrap_start_time",
        "output_layer_type",
        "output_layer_num",
    ]
)


def loop_unrolled(unroll, mask):
    """Whether a PredNet's time loop runs unrolled: as `unroll` asks, and also where a mask is given that the
    backend's rolled loop cannot apply to feature-map states (backends.py, rolled_loop_masks_image_states)."""
    return bool(unroll) or (mask is not None and not _ROLLED_LOOP_MASKS)


def _cell_property(name):
    return property(lambda self: getattr(self.cell, name), doc=f"The cell's `{name}`.")


# `layer.stack_sizes`, `layer.output_mode`, ... read like the original layer's.
for _name in _CELL_ATTRIBUTES:
    setattr(PredNet, _name, _cell_property(_name))
del _name


def _shrink(size, l):
    return None if size is None else size // 2**l


def _as_dtype(x, dtype):
    """x in `dtype`: no cast (none in the graph) when it is x's already."""
    if dtype_name(x.dtype) == dtype:
        return x
    return ops.cast(x, dtype)


_DTYPE_NAMES = {}


def dtype_name(dtype):
    """keras.backend.standardize_dtype(dtype), looked up once per dtype: the cell asks about 20 times per
    layer and time step, and Keras' answer is Python work on eager backends' every step.

    Not written while torch.compile traces: TorchDynamo records a module dict's change as a side effect, and
    then breaks the graph at the next `inspect.Signature.bind` (Keras binds each layer's call signature), since
    it cannot tell whether the signature's mapping proxy reads that dict. A dtype first met in a trace (a
    Variable's "float32" where every eager step met only tensors' torch.float32) broke the compiled step 6
    times (tests/test_torch_compile.py)."""
    try:
        name = _DTYPE_NAMES.get(dtype)
    except TypeError:  # a dtype that cannot be a key
        return keras.backend.standardize_dtype(dtype)
    if name is None:
        name = keras.backend.standardize_dtype(dtype)
        if not device_constants.torch_compile_tracing():
            _DTYPE_NAMES[dtype] = name
    return name
