"""The Chainer PredNet's training protocol, on any Keras backend.

Chainer PredNet (`train_chainer_prednet`), as the authors' `main.py` trains it:

    for each sequence, cycling through the list until `period` frames:
        reset the state (h, c, p of every layer to zero)
        for i = 1 .. len(sequence) - 1:          one frame step: x_{i-1} in, x_i the target
            loss += MSE(p_0 after the step, x_i)
            if (i + 1) % bprop == 0: one Adam update on `loss`, then truncate
            count += 1; stop at count == period

So the first window of a sequence has bprop-1 steps, the others bprop, and the
frames after a sequence's last update are never trained on (they are skipped
here: they change nothing that is kept). Batch 1, Adam(lr 1e-3, betas 0.9 /
0.999, eps 1e-8 as Chainer; Keras' default eps is 1e-7), one logged value per
update: the MSE of the window's last frame, from the forward pass before the
update. With period 5000 and bprop 20 on sequences longer than 5000 frames
that is 250 updates.

A window is one call of a Keras model over a fixed (1, bprop + 1, H, W, C)
block of frames, so it compiles once: the state carried between windows lives
in non-trainable variables of that model (assigned in its forward pass, which
every backend's trainer supports), the shorter first window is padded in front
with a masked step, and a `reset` input zeroes the carried state at the start
of a sequence. The two quirks of the original are expressed through which
gradients flow, never by changing a forward value:

- `tbptt="chainer"` (the original, on CPU and GPU alike): Chainer's
  `unchain_backward()` does not cut the graph of the upper predictions
  p_l = relu(ConvP_l(r_l)), l >= 1, made at a window's last step, because the
  loss does not reach them; the next window's backward then flows through them
  into ConvP_l (r_l itself is cut). Here the carried p_l enters the next window
  as `p_l + [p_l > 0] * (z - stop_gradient(z))`, z = ConvP_l(r_l): the value is
  p_l, the gradient is relu's (its mask from the stored p_l) times the
  convolution's, as Chainer's backward computes it.
- `tbptt="clean"`: textbook truncation, the carried state is constant.
- `emulate_cpu_aliasing=True` (the original on CPU only): main.py reuses one
  numpy buffer for the targets and Chainer's MSE keeps a reference to it, so
  at backward every step's loss pulls towards the window's LAST frame (on GPU
  `cupy.asarray` copies and the gradients are the intended ones). Here each
  step's loss is `MSE(p, x_t)` in value and `MSE(p, x_last)` in gradient.
"""

import dataclasses
import time

import keras
import numpy as np
from keras import ops

from prednet_keras.layers import device_constants
from prednet_keras.layers.chainer import NumpyZeros
from prednet_keras.models.protocols import (
    ProtocolResult,
    UpdateLog,
    chainer_adam,
    load_initial_weights_into,
    protocol_metric,
    resolve_protocol,
)
from prednet_keras.models.jax_training_step import compile_undonated_step
from prednet_keras.models.torch_training_step import compile_for_training

__all__ = [
    "ChainerPredNetTrainer",
    "TBPTT_MODES",
    "Window",
    "build_chainer_prednet",
    "chainer_sequences",
    "heldout_errors",
    "plan_windows",
    "train_chainer_prednet",
]

TBPTT_MODES = ("chainer", "clean")
LAYER_NAME = "chainer_prednet"


# -- Chainer PredNet: the windows of main.py -----------------------------------------


@dataclasses.dataclass(frozen=True)
class Window:
    """One truncated-BPTT window, i.e. one update, in main.py's numbering.

    Attributes:
        sequence: index of the sequence in the list.
        first_step, last_step: main.py's `i` of the window's first and last
            frame steps (step i feeds frame i-1 and targets frame i); the update
            happens at last_step, and main.py logs that `i`.
        frames_before: main.py's `count` when the update happens (frames
            stepped through before this last step).
    """

    sequence: int
    first_step: int
    last_step: int
    frames_before: int

    @property
    def steps(self):
        return self.last_step - self.first_step + 1

    @property
    def starts_sequence(self):
        """The state is reset before this window."""
        return self.first_step == 1

    @property
    def frame_slice(self):
        """The frames the window reads: inputs first_step-1 .. last_step-1, targets up to last_step."""
        return slice(self.first_step - 1, self.last_step + 1)


def plan_windows(sequence_lengths, period, bprop):
    """The updates main.py makes on sequences of these lengths, in order.

    Args:
        sequence_lengths: frames per sequence, in main.py's cycling order.
        period: frames to step through (main.py's --period).
        bprop: main.py's --bprop.

    Returns:
        (windows, frames): the list of `Window`s and the frames stepped through
        (= period).
    """
    lengths = [int(n) for n in sequence_lengths]
    if not lengths:
        raise ValueError("No sequences to train on.")
    if min(lengths) < 1:
        raise ValueError(f"Sequence {lengths.index(min(lengths))} is empty.")
    if max(lengths) < 2:
        raise ValueError("Every sequence has a single frame: there is no next frame to predict.")
    if bprop < 1 or period < 1:
        raise ValueError(f"period and bprop must be positive, got period={period}, bprop={bprop}.")
    windows = []
    count = 0
    sequence = 0
    while count < period:
        first = 1
        for i in range(1, lengths[sequence]):
            if (i + 1) % bprop == 0:
                windows.append(Window(sequence, first, i, count))
                first = i + 1
            count += 1
            if count >= period:
                break
        sequence = (sequence + 1) % len(lengths)
    return windows, count


class _Sequence:
    """A run of frames (uint8 or float in [0, 1]) read a window at a time as float32."""

    def __init__(self, frames, start=0, stop=None):
        self.frames = frames
        self.start = int(start)
        self.stop = int(len(frames) if stop is None else stop)

    def __len__(self):
        return self.stop - self.start

    def read(self, window_slice):
        a = self.start + window_slice.start
        b = self.start + window_slice.stop
        block = np.asarray(self.frames[a:b])
        if block.dtype == np.uint8:
            # As main.py: float32 image / 255.
            return block.astype(np.float32) / np.float32(255)
        return block.astype(np.float32, copy=False)


def chainer_sequences(data):
    """The sequences main.py would cycle through, from a FrameDataset (one per source run,
    so a sequence never crosses a scene cut) or a list of (T, H, W, C) arrays."""
    if hasattr(data, "source_runs"):
        return [_Sequence(data.frames, start, stop) for _, start, stop in data.source_runs()]
    if isinstance(data, np.ndarray) and data.ndim == 4:
        return [_Sequence(data)]
    sequences = []
    for index, item in enumerate(data):
        if isinstance(item, _Sequence):
            sequences.append(item)
            continue
        shape = getattr(item, "shape", None)
        if shape is None or len(shape) != 4:
            raise ValueError(f"Sequence {index} must be (T, H, W, C) frames, got shape {shape}.")
        sequences.append(_Sequence(item))
    return sequences


def build_chainer_prednet(frame_shape, model_config=None, name=LAYER_NAME, **layer_options):
    """A built ChainerPredNet for frames of `frame_shape` (H, W, C).

    Args:
        frame_shape: (H, W, C).
        model_config: ChainerPredNet arguments (stack_sizes, R_stack_sizes,
            filter_size); default the study's (3, 48, 96, 192), 3x3. A
            `stack_sizes` of None is replaced by the default with the data's channels.
        name: layer name; the default makes weight keys (and so initial-weights
            files) the same in every process.
        **layer_options: other ChainerPredNet options (return_sequences, ...).
    """
    from prednet_keras.layers.chainer import DEFAULT_STACK_SIZES, ChainerPredNet

    height, width, channels = (int(s) for s in frame_shape)
    config = dict(model_config or {})
    if config.get("stack_sizes") is None:
        config["stack_sizes"] = (channels,) + tuple(DEFAULT_STACK_SIZES[1:])
    if int(config["stack_sizes"][0]) != channels:
        raise ValueError(
            f"stack_sizes starts with {config['stack_sizes'][0]} but the frames have {channels} channel(s); "
            "the first stack size is the number of image channels."
        )
    layer = ChainerPredNet(**config, name=name, **layer_options)
    layer.build((1, None, height, width, channels))
    return layer


@keras.saving.register_keras_serializable(package="prednet_keras")
def window_objective(y_true, y_pred):
    """The window's loss: the sum over its steps of the (masked) per-step objective, channel 0 of
    the window model's output (y_true is a placeholder)."""
    return ops.sum(y_pred[:, 0], axis=-1)


@keras.saving.register_keras_serializable(package="prednet_keras")
class LastStepMSE(keras.metrics.Metric):
    """The MSE of the window's last frame (channel 1, last step of the window model's output):
    main.py's logged value, from the forward pass before the update."""

    def __init__(self, name="last_frame_mse", **kwargs):
        super().__init__(name=name, **kwargs)
        self.value = self.add_variable(shape=(), initializer="zeros", name="value")

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.value.assign(ops.cast(ops.mean(y_pred[:, 1, -1]), self.value.dtype))

    def result(self):
        return ops.convert_to_tensor(self.value)

    def reset_state(self):
        self.value.assign(0.0)


class ChainerWindowModel(keras.Model):
    """One truncated-BPTT window of the Chainer PredNet, with the state carried in variables.

    Inputs (a dict): "frames" (1, bprop + 1, H, W, C): the window's input
    frames followed by its last target; "valid" (1, bprop): 1 for real steps,
    0 for the padding in front of a shorter first window; "reset" (1, 1): 1 to
    start from the zero state (a new sequence).

    Output (1, 2, bprop): channel 0 the per-step objective (value = MSE against
    the next frame; gradient as `tbptt` and `emulate_cpu_aliasing` say),
    channel 1 the per-step MSE (no gradient); padded steps are 0.

    Args:
        cell: a built ChainerPredNetCell (output_mode "prediction"); its
            weights are the ones trained.
        bprop: steps per window.
        tbptt: "chainer" or "clean" (see the module docstring).
        emulate_cpu_aliasing: train every step towards the window's last frame.
        unroll: the window's time loop unrolled in the compiled update (see
            `ChainerPredNetTrainer`).
    """

    def __init__(self, cell, bprop, tbptt="chainer", emulate_cpu_aliasing=False, unroll=False, **kwargs):
        super().__init__(**kwargs)
        if tbptt not in TBPTT_MODES:
            raise ValueError(f"tbptt must be one of {', '.join(TBPTT_MODES)}, got {tbptt!r}.")
        if not cell.built or cell.output_mode != "prediction":
            raise ValueError("ChainerWindowModel needs a built ChainerPredNetCell with output_mode='prediction'.")
        self.cell = cell
        # A plain RNN around the same cell: the window needs the final states,
        # the saved model does not (it keeps the ChainerPredNet wrapper). Eager
        # torch steps through the window itself (`_time_loop`).
        # A masked step's output is zeros (their loss is multiplied by `valid`, so the value is not used): Keras'
        # JAX loop would otherwise take the first state for the output before it, which has the R channels of
        # layer 0, not the frame's (a window with R_stack_sizes[0] != stack_sizes[0] failed to trace on JAX).
        # Only a first window has masked steps, in front, where the output before them is zeros on every backend.
        self.rnn = keras.layers.RNN(cell, return_sequences=True, return_state=True, unroll=bool(unroll),
                                    zero_output_for_mask=True, name="window_rnn")
        self.bprop = int(bprop)
        # Built here, where eager torch never calls it: a model with an unbuilt layer has Keras trace its whole
        # call symbolically at every call, looking for the state to build.
        self.rnn.build((1, self.bprop) + cell.layer_shape(0, cell.stack_sizes[0]))
        self.tbptt = tbptt
        self.emulate_cpu_aliasing = bool(emulate_cpu_aliasing)
        L = cell.nb_layers
        self.carried = []
        for index, channels in enumerate(cell.state_size):
            kind = ("h", "c", "p")[index // L]
            self.carried.append(
                self.add_variable(
                    shape=(1,) + cell.layer_shape(index % L, channels),
                    initializer=NumpyZeros(),
                    trainable=False,
                    name=f"carried_{kind}{index % L}",
                )
            )

    def call(self, inputs, training=False):
        cell = self.cell
        L = cell.nb_layers
        frames = inputs["frames"]
        valid = ops.cast(inputs["valid"], frames.dtype)
        reset = ops.reshape(inputs["reset"], (-1, 1, 1, 1)) > 0.5
        # `where` makes new tensors: on torch, autograd must not hold the
        # variables' own storage, which the assignments below overwrite.
        states = []
        for variable in self.carried:
            value = ops.convert_to_tensor(variable)
            states.append(ops.where(reset, ops.zeros_like(value), value))
        if self.tbptt == "chainer":
            for l in range(1, L):
                h_l, p_l = states[l], states[2 * L + l]
                z = cell._conv(cell.conv_p[l], h_l)
                relu_mask = ops.cast(p_l > 0, p_l.dtype)
                states[2 * L + l] = p_l + relu_mask * (z - ops.stop_gradient(z))
        if device_constants.eager_torch():
            predictions, new_states = self._time_loop(frames[:, :-1], states, valid > 0.5, training)
        else:
            result = self.rnn(frames[:, :-1], initial_state=states, mask=valid > 0.5, training=training)
            predictions, new_states = result[0], result[1:]
        for variable, value in zip(self.carried, new_states):
            variable.assign(value)

        targets = frames[:, 1:]
        true_mse = ops.mean(ops.square(predictions - targets), axis=(2, 3, 4))
        if self.emulate_cpu_aliasing:
            aliased = ops.mean(ops.square(predictions - frames[:, -1:]), axis=(2, 3, 4))
            objective = ops.stop_gradient(true_mse) + (aliased - ops.stop_gradient(aliased))
        else:
            objective = true_mse
        return ops.stack([objective * valid, ops.stop_gradient(true_mse) * valid], axis=1)

    def _time_loop(self, inputs, states, mask, training):
        """The masked RNN over the window as Keras' torch backend computes it, the same operations on the same
        values, written out for eager torch, where every operation is dispatched from Python: Keras' rolled
        form runs the cell once more, on the first frame, to learn the output's shape, and its masked form
        passes the outputs and states through its tree functions at every step. A masked step (the padding in
        front of a first window) keeps the state it had and outputs zeros.

        Not for torch.compile, which traces a Python loop whole: with the window's 20 steps in one graph, the
        first update at 64x80 was still compiling after 7.5 minutes on 2 CPU cores (Keras' rolled loop: 2.6
        minutes, TorchDynamo reusing one step's graph at every step)."""
        outputs = []
        weights = self.cell.weights_once()
        # Only a first window has masked steps. The mask is read on the host once per window (eager torch's
        # train_on_batch waits for every update's loss anyway), and a step that is real in the whole batch takes
        # the cell's output and states as they are: `where` would give the same values and, backward, a zero
        # gradient to add to the old ones, 13 operations forward and more backward per step.
        real_steps = ops.convert_to_numpy(mask).all(axis=0)
        for t in range(inputs.shape[1]):
            new_output, new_states = self.cell(inputs[:, t], states, training=training, weights=weights)
            if real_steps[t]:
                output, states = new_output, list(new_states)
            else:
                keep = ops.reshape(mask[:, t], (-1, 1, 1, 1))
                output = ops.where(keep, new_output, ops.zeros_like(new_output))
                states = [ops.where(keep, new, old) for new, old in zip(new_states, states)]
            outputs.append(output)
        return ops.stack(outputs, axis=1), states


class ChainerPredNetTrainer:
    """The Chainer PredNet, its window model (compiled once) and the update of one window.

    Args:
        frame_shape: (H, W, C) of the frames.
        model_config: ChainerPredNet arguments (see `build_chainer_prednet`).
        bprop: steps per window.
        tbptt: "chainer" (the original's truncation) or "clean".
        emulate_cpu_aliasing: the original's CPU gradients.
        optimizer: default `chainer_adam()`.
        jit_compile: Model.compile's jit_compile.
        run_eagerly: Model.compile's run_eagerly (no tracing; for debugging and
            quick tests, slow per update on large frames).
        unroll: unroll the window's time loop in the compiled update. The same
            operations: rolled (the default, as every run before the option),
            JAX and TensorFlow run the loop as one compiled step repeated bprop
            times (JAX's `lax.scan`); unrolled, the compiler sees the whole
            window. Which is faster depends on the backend and device: at the
            paper's size on 2 CPU cores JAX takes about 8 s per update unrolled
            against 105 s rolled, TensorFlow shows no consistent difference; on
            an H200 JAX takes 54 ms unrolled against 46 ms rolled; torch loops
            in Python either way (python -m
            prednet_keras.bench.probes.chainer_unroll, docs/benchmarks.md). Losses may differ in their last digits (the
            compiler may order sums differently).

    Example:

    ```python
    trainer = ChainerPredNetTrainer((120, 160, 3))
    mse, window_loss = trainer.update(frames[0:20], starts_sequence=True)   # 19 steps
    mse, window_loss = trainer.update(frames[19:40], starts_sequence=False) # 20 steps
    ```
    """

    def __init__(
        self,
        frame_shape,
        model_config=None,
        bprop=20,
        tbptt="chainer",
        emulate_cpu_aliasing=False,
        optimizer=None,
        jit_compile="auto",
        run_eagerly=False,
        unroll=False,
    ):
        self.frame_shape = tuple(int(s) for s in frame_shape)
        self.bprop = int(bprop)
        self.unroll = bool(unroll)
        self.layer = build_chainer_prednet(self.frame_shape, model_config, return_sequences=True)
        self.window_model = ChainerWindowModel(
            self.layer.cell, self.bprop, tbptt, emulate_cpu_aliasing, unroll=self.unroll, name="chainer_prednet_window"
        )
        compile_for_training(
            self.window_model,
            optimizer=optimizer if optimizer is not None else chainer_adam(),
            loss=window_objective,
            metrics=[LastStepMSE()],
            jit_compile=jit_compile,
            run_eagerly=run_eagerly,
        )
        # On JAX, Keras' step without buffer donation: the same bits, 11% faster per update on 2 CPU cores; on the
        # H100 the update took 36.3 ms beside 37.8 ms for Keras' stateless step, the donated step not timed there
        # (jax_training_step, docs/benchmarks.md).
        compile_undonated_step(self.window_model)
        self._placeholder = np.zeros((1, 1), np.float32)

    @property
    def model_config(self):
        """The layer's arguments (JSON-ready)."""
        cell = self.layer.cell
        return {
            "stack_sizes": list(cell.stack_sizes),
            "R_stack_sizes": list(cell.R_stack_sizes),
            "filter_size": cell.filter_size,
            "frame_size": list(cell.frame_size),
        }

    def window_inputs(self, frames, starts_sequence):
        """The window model's inputs for `frames` (steps + 1 frames, steps <= bprop)."""
        frames = np.asarray(frames, dtype=np.float32)
        steps = len(frames) - 1
        if not 1 <= steps <= self.bprop:
            raise ValueError(
                f"A window has 1 to {self.bprop} steps ({self.bprop + 1} frames), got {len(frames)} frames."
            )
        if tuple(frames.shape[1:]) != self.frame_shape:
            raise ValueError(f"Frames are {tuple(frames.shape[1:])}, the model is for {self.frame_shape}.")
        pad = self.bprop - steps
        if pad:
            frames = np.concatenate([np.zeros((pad,) + self.frame_shape, np.float32), frames])
        valid = np.ones((1, self.bprop), np.float32)
        valid[0, :pad] = 0.0
        if pad and not starts_sequence:
            # Padding keeps the zero state only because a reset precedes it.
            raise ValueError("Only the first window of a sequence can be shorter than bprop.")
        reset = np.full((1, 1), 1.0 if starts_sequence else 0.0, np.float32)
        return {"frames": frames[np.newaxis], "valid": valid, "reset": reset}

    def build_window(self):
        """Builds the window model by one forward pass over zero frames (its carried state is then whatever
        that pass left, so a checkpoint is loaded after it): what loading a checkpoint needs before the
        first update, which would build it otherwise."""
        frames = np.zeros((self.bprop + 1,) + self.frame_shape, np.float32)
        self.window_model(self.window_inputs(frames, starts_sequence=True))

    def update(self, frames, starts_sequence):
        """One window: forward, backward, one optimizer step.

        Args:
            frames: (steps + 1, H, W, C) float32 in [0, 1]: the window's inputs and its last target.
            starts_sequence: reset the state first.

        Returns:
            (mse of the window's last frame, the window's summed loss), both from
            the forward pass before the update.
        """
        logs = self.window_model.train_on_batch(
            self.window_inputs(frames, starts_sequence), self._placeholder, return_dict=True
        )
        return float(logs["last_frame_mse"]), float(logs["loss"])

    def prediction_model(self, nt=None):
        """frames (batch, nt, H, W, C) -> next-frame predictions, sharing the trained weights
        (the layer, not a copy: later updates show in it)."""
        inputs = keras.Input(shape=(nt,) + self.frame_shape, name="frames")
        return keras.Model(inputs, self.layer(inputs), name="chainer_prednet")


def train_chainer_prednet(
    data,
    *,
    model_config=None,
    protocol="paper",
    tbptt="chainer",
    emulate_cpu_aliasing=False,
    seed=0,
    initial_weights=None,
    on_update=None,
    jit_compile="auto",
    optimizer=None,
    period=None,
    bprop=None,
    on_start=None,
    unroll=False,
    checkpoint=None,
):
    """Trains the Chainer PredNet as the authors' main.py did (see the module docstring).

    Args:
        data: a FrameDataset (its source runs are the sequences) or a list of
            (T, H, W, C) frame arrays, uint8 (divided by 255 as main.py) or
            float in [0, 1]. Every frame must have the model's size (the
            study's: 120x160; `load_frames(..., size=(120, 160))`).
        model_config: ChainerPredNet arguments (stack_sizes, R_stack_sizes,
            filter_size); default (3, 48, 96, 192), 3x3.
        protocol: "paper", "quick" or a `ChainerProtocol`.
        tbptt: "chainer" (the original's truncation) or "clean".
        emulate_cpu_aliasing: the original's CPU gradients (every step
            trained towards the window's last frame).
        seed: seed of the initial weights when `initial_weights` is None
            (numpy, identical on every backend and device). The data order is
            main.py's: the sequences in the given order, cycled.
        initial_weights: a starting_point HDF5 file or an authors' Chainer .npz.
        on_update: called after every update with its record (dict: update,
            sequence, frame, frames_seen, steps, loss, window_loss, seconds).
        jit_compile: Model.compile's jit_compile for the window.
        optimizer: a Keras optimizer instead of the protocol's Adam (tests).
        period, bprop: override the protocol's.
        on_start: called once with the layer being trained, after its initial
            weights are set and before the first update (e.g. to snapshot weights).
        unroll: the window's time loop unrolled in the compiled update
            (`ChainerPredNetTrainer`).
        checkpoint: the run's checkpoints (`protocols`' module docstring): it is given the window
            model, which holds all a continuation needs (the weights, Adam's variables and iteration
            count, the state carried into the next window); the windows after its records are trained.

    Returns:
        ProtocolResult: model = the trained prediction model (frames ->
        next-frame predictions), records, metric (mean of the last
        `metric_updates` logged values), summary.
    """
    protocol = resolve_protocol("prednet-chainer", protocol, period=period, bprop=bprop)
    sequences = chainer_sequences(data)
    if not sequences:
        raise ValueError("No sequences to train on.")
    frame_shape = _common_frame_shape(sequences)
    windows, frames_seen = plan_windows([len(s) for s in sequences], protocol.period, protocol.bprop)
    if not windows:
        raise ValueError(
            f"No update would happen: {protocol.period} frames of sequences of "
            f"{sorted({len(s) for s in sequences})} frames never complete a window of {protocol.bprop}."
        )
    trainer = ChainerPredNetTrainer(
        frame_shape,
        model_config,
        bprop=protocol.bprop,
        tbptt=tbptt,
        emulate_cpu_aliasing=emulate_cpu_aliasing,
        optimizer=optimizer
        if optimizer is not None
        else chainer_adam(protocol.lr, protocol.beta_1, protocol.beta_2, protocol.epsilon),
        jit_compile=jit_compile,
        unroll=unroll,
    )
    initial = load_initial_weights_into(trainer.layer, initial_weights, seed)
    done = ()
    if checkpoint is not None:
        checkpoint.attach(trainer.window_model, build=trainer.build_window)
        done = checkpoint.records
    if on_start is not None:
        on_start(trainer.layer)

    log = UpdateLog(on_update, checked=("loss", "window_loss"), records=done)
    started = time.perf_counter()
    for window in windows[len(log.records):]:
        frames = sequences[window.sequence].read(window.frame_slice)
        log.start()
        loss, window_loss = trainer.update(frames, window.starts_sequence)
        log.add(
            {
                "sequence": window.sequence,
                "frame": window.last_step,
                "frames_seen": window.frames_before + 1,
                "steps": window.steps,
                "loss": loss,
                "window_loss": window_loss,
            },
            where=f" (frame {window.last_step})",
        )
    records = log.records
    seconds = time.perf_counter() - started

    metric = protocol_metric([r["loss"] for r in records], protocol.metric_updates, "updates")
    summary = {
        "protocol": dataclasses.asdict(protocol),
        "model": "prednet-chainer",
        "model_config": trainer.model_config,
        "tbptt": tbptt,
        "emulate_cpu_aliasing": bool(emulate_cpu_aliasing),
        "unroll": trainer.unroll,
        "sequences": len(sequences),
        "sequence_lengths": [len(s) for s in sequences],
        "frames_seen": frames_seen,
        "frames_trained": int(sum(w.steps for w in windows)),
        "updates": len(records),
        "initial_weights": initial,
        "parameters": int(trainer.layer.count_params()),
        "train_seconds": round(seconds, 3),
        # The first update includes compiling the window.
        "first_update_seconds": records[0]["seconds"] if records else None,
        "backend": keras.backend.backend(),
    }
    return ProtocolResult(trainer.prediction_model(), records, metric, summary)


def heldout_errors(model, data):
    """The next-frame error of a trained model on sequences it never trained on, one number per sequence.

    A second measure beside the protocol's metric (the last logged training
    losses): it asks what the network learned, on frames no update saw. Each
    sequence (a source run of `data`, as in training) starts from the zero
    state; the prediction made at step t is compared with frame t + 1, and a
    sequence's error is the mean over its T - 1 predictions of the per-frame
    MSE (over H, W and C), summed in float64 so that the number does not depend
    on how many frames were added up.

    Args:
        model: a prediction model, frames (1, T, H, W, C) -> next-frame
            predictions (`ChainerPredNetTrainer.prediction_model()`).
        data: a FrameDataset (or what `chainer_sequences` takes).

    Returns:
        (errors, predictions): errors a list of floats, one per sequence in
        order; predictions a list of float32 arrays (T - 1, H, W, C), the
        predictions that were scored.

    Raises:
        ValueError: a sequence shorter than 2 frames, or a prediction that is
            not finite (NaN or inf is never a score).
    """
    errors, predictions = [], []
    for index, sequence in enumerate(chainer_sequences(data)):
        if len(sequence) < 2:
            raise ValueError(f"Held-out sequence {index} has {len(sequence)} frame(s); scoring a prediction "
                             "needs 2 or more.")
        frames = sequence.read(slice(0, len(sequence)))
        predicted = np.asarray(model.predict_on_batch(frames[np.newaxis]), dtype=np.float32)[0, :-1]
        if not np.all(np.isfinite(predicted)):
            raise ValueError(f"Held-out sequence {index}: the model predicts NaN or inf; no error can be scored.")
        difference = predicted.astype(np.float64) - frames[1:].astype(np.float64)
        per_frame = np.mean(np.square(difference), axis=(1, 2, 3))
        errors.append(float(np.mean(per_frame)))
        predictions.append(predicted)
    return errors, predictions


def _common_frame_shape(sequences):
    shapes = {tuple(int(s) for s in seq.frames.shape[1:]) for seq in sequences}
    if len(shapes) != 1:
        raise ValueError(f"All frames must have one size; found {sorted(shapes)}. Give a common size.")
    return shapes.pop()
