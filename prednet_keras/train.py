"""Training PredNet into a run folder: the authors' KITTI recipe, made resumable.

The recipe (kitti_train.py): nt=10, batch 4, 500 sequences per epoch, 150
epochs, Adam at 1e-3 dropped to 1e-4 from the halfway epoch, "L_0" layer
weighting, MAE of the weighted error against zero, the model with the lowest
validation loss (100 fixed validation sequences) kept.

What this module adds to it:
- the order of training sequences is a pure function of (seed, global batch
  index), so a resumed run reads exactly the batches an uninterrupted one would;
- at the end of every epoch the weights and optimizer state are checkpointed
  atomically and `state.json` records the epoch, so `--resume` continues from
  the last completed epoch with the same history;
- initial weights come from `starting_point` (NumPy, seeded), so every backend
  starts from the same numbers.

`run_training` runs in the training process (`prednet_keras.worker`), after
`runtime.configure`; `TrainConfig` is also what the CLI validates before it
starts that process.
"""

import concurrent.futures
import gc
import hashlib
import math
import os
import shutil
import signal
import sys
import threading
import time

import keras
import numpy as np

from prednet_keras import runs, torch_compile
from prednet_keras.distribution import batch_problem
from prednet_keras.early_stopping import ResumableEarlyStopping
from prednet_keras.runs import plural
from prednet_keras.layers.lotter import check_frame_size
from prednet_keras.models import build_training_model
from prednet_keras.recipe import (
    AUGMENTATIONS,
    MODELS,
    TrainConfig,
    layer_loss_weights_for,
    learning_rate_at,
    schedule_text,
    time_loss_weights_for,
)
from prednet_keras.trajectory import FILE as TRAJECTORY_FILE
from prednet_keras.trajectory import Trajectory

__all__ = [
    "MODELS",
    "TrainConfig",
    "TrainingDiverged",
    "learning_rate_at",
    "run_training",
]

# Test hook: "EPOCH:STEP" (from 1) kills the training process with SIGKILL right
# after that step, as a power cut would, to test --resume; "EPOCH:MOMENT" at one
# of the moments of that epoch's end (KILL_MOMENTS, in the order they happen).
KILL_AT_ENV = "PREDNET_TEST_KILL_AT"
KILL_MOMENTS = ("history", "checkpoint-partial", "checkpoint", "state", "model-partial", "model", "cleanup")


class TrainingDiverged(ValueError):
    """The loss became NaN or infinite."""


def jit_compile_for(requested, effective):
    """The `jit_compile` argument of Model.compile.

    Args:
        requested: the RuntimeConfig dict asked for (its "xla": None, True, False).
        effective: what runtime.configure returned (its "jit_compile").
    """
    if requested.get("xla") is not None:
        return effective.get("jit_compile", requested["xla"])
    # Left to us: on CPU, TensorFlow's oneDNN kernels ran PredNet about twice as
    # fast as XLA did.
    if requested.get("backend") == "tensorflow" and str(requested.get("device", "cpu")).startswith("cpu"):
        return False
    return effective.get("jit_compile", "auto")


# -- data -------------------------------------------------------------------


def dataset_checksum(dataset, chunk=256):
    """SHA-256 of a FrameDataset's frames (shape and bytes) and source ids.

    Args:
        dataset: a FrameDataset (in memory or streamed from disk).
        chunk: frames hashed per read.
    """
    digest = hashlib.sha256()
    digest.update(repr(tuple(dataset.frames.shape)).encode())
    for start in range(0, len(dataset), chunk):
        digest.update(np.ascontiguousarray(dataset.frames[start : start + chunk]).tobytes())
    digest.update("\x00".join(str(s) for s in np.asarray(dataset.sources).tolist()).encode())
    return "sha256:" + digest.hexdigest()


def load_training_data(config):
    """The training and validation FrameDatasets of a run, and a description of each.

    Args:
        config: a resolved TrainConfig.

    Returns:
        (train, val, info): val is None when config.val_sequences is 0.
    """
    from prednet_keras import data as pdata

    size = config.size
    if config.data is None:
        train = pdata.load_frames(pdata.embedded_dataset("train"), size=size)
        train_origin = "embedded:train"
    else:
        train = pdata.load_frames(config.data, size=size)
        train_origin = config.data
    val, val_origin = None, None
    if config.val_sequences:
        if config.val_data is not None:
            val, val_origin = pdata.load_frames(config.val_data, size=size), config.val_data
        elif config.data is None:
            val, val_origin = pdata.load_frames(pdata.embedded_dataset("val"), size=size), "embedded:val"
        else:
            train, val = split_frames(train, config.val_fraction)
            val_origin = f"{config.data} (last {config.val_fraction:g} of frames)"
            train_origin = f"{config.data} (first {1 - config.val_fraction:g} of frames)"
    if val is not None and val.frame_shape != train.frame_shape:
        raise ValueError(
            f"Validation frames are {val.frame_shape}, training frames {train.frame_shape}; give --size."
        )
    info = {"train": _describe_data(train, train_origin)}
    if val is not None:
        info["val"] = _describe_data(val, val_origin)
    return train, val, info


def split_frames(dataset, fraction):
    """Splits off the last `fraction` of frames for validation, at a source
    boundary when one lies within a quarter of the cut (so validation scenes
    are unseen); the two parts never share a sequence either way.

    Args:
        dataset: a FrameDataset.
        fraction: share of frames for the second part.

    Returns:
        (first, second) FrameDatasets.
    """
    count = len(dataset)
    cut = int(round(count * (1 - fraction)))
    boundaries = [start for _, start, _ in dataset.source_runs() if start > 0]
    near = [b for b in boundaries if abs(b - cut) <= max(1, count * fraction / 4)]
    if near:
        cut = min(near, key=lambda b: abs(b - cut))
    if not 0 < cut < count:
        raise ValueError(f"{count} frames are too few to hold out a validation part; give --val-data.")
    return dataset.select(slice(0, cut)), dataset.select(slice(cut, count))


def _describe_data(dataset, origin):
    runs_ = dataset.source_runs()
    return {
        "source": origin,
        "frames": len(dataset),
        "frame_shape": list(dataset.frame_shape),
        "source_runs": len(runs_),
        "checksum": dataset_checksum(dataset),
        "provenance": dataset.provenance,
    }


class EpochBatches(keras.utils.PyDataset):
    """Training batches of an unbroken stream of shuffled passes over all sequences.

    Batch b (counted over the whole run) holds stream positions
    b*batch_size ... (b+1)*batch_size - 1; position p is sequence
    order(p // N)[p % N], where order(k) is pass k's permutation, a function
    of (seed, k) only. So an epoch of 125 steps continues where the last one
    stopped, like the original's generator, and a resumed run (first_epoch > 0)
    reads the very batches an uninterrupted run would, on any backend.

    Args:
        sequences: a SequenceGenerator with batch_size=1 and no shuffling
            (item j is sequence j).
        batch_size: sequences per batch.
        steps_per_epoch: batches per epoch.
        first_epoch: 0-based epoch this dataset starts at.
        epochs: total epochs of the run.
        seed: order seed.
        augment: augmentations drawn per sequence (see augment_sequence).
    """

    PREFETCH = 3  # batches made ahead, by two threads

    def __init__(self, sequences, batch_size, steps_per_epoch, first_epoch, epochs, seed, augment=()):
        super().__init__()
        self.sequences = sequences
        self.count = len(sequences)
        self.batch_size = batch_size
        self.steps_per_epoch = steps_per_epoch
        self.first_batch = first_epoch * steps_per_epoch
        self.total = (epochs - first_epoch) * steps_per_epoch
        self.seed = seed
        self.augment = tuple(augment)
        self._orders = {}
        self._orders_lock = threading.Lock()
        # Batches are read in order, so the next ones are made in a thread while the device runs a step:
        # at batch 16 of 128x160 frames, making one takes longer than a GPU step (about 35 ms here). Each
        # batch is a function of its index alone, so prefetching changes no number.
        self._pool = None
        self._made = {}

    def __len__(self):
        return self.total

    def order(self, k):
        """The permutation of sequence indices used by pass k over the data."""
        with self._orders_lock:
            if k not in self._orders:
                if len(self._orders) > 4:
                    self._orders.clear()
                self._orders[k] = pass_order(self.count, self.seed, k)
            return self._orders[k]

    def indices(self, batch):
        """Sequence indices of run-wide batch number `batch`."""
        positions = np.arange(batch * self.batch_size, (batch + 1) * self.batch_size)
        return np.array([self.order(int(p // self.count))[p % self.count] for p in positions])

    def __getitem__(self, index):
        if not 0 <= index < self.total:
            raise IndexError(f"batch {index} out of range for {self.total} batches")
        made = self._made.pop(index, None)
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="prednet-batches")
        for ahead in range(index + 1, min(index + 1 + self.PREFETCH, self.total)):
            if ahead not in self._made:
                self._made[ahead] = self._pool.submit(self.make, ahead)
        # A jump (a new epoch's iterator, a test reading one batch) leaves stale prefetches behind.
        for stale in [i for i in self._made if not index < i <= index + self.PREFETCH]:
            self._made.pop(stale).cancel()
        return made.result() if made is not None else self.make(index)

    def __del__(self):
        if getattr(self, "_pool", None) is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def make(self, index):
        """Batch `index` of this dataset (counted from its first epoch): (frames, zero targets)."""
        batch = self.first_batch + index
        chosen = self.indices(batch)
        first = batch * self.batch_size
        frames = np.concatenate([
            augment_sequence(self.sequences[int(j)][0], self.augment, self.seed, first + i)
            for i, j in enumerate(chosen)
        ])
        return frames, np.zeros((len(chosen), 1), np.float32)


def augment_sequence(frames, augment, seed, position):
    """A training sequence as augmentation draws it for one stream position.

    Each name in `augment` is applied with probability 1/2, the coin flips
    coming from numpy.random.default_rng([seed, position, 1]): a function of
    the run's seed and the sequence's run-wide position only, so a resumed run
    sees the same augmented batches as an uninterrupted one, on any backend.
    Both changes keep a sequence a plausible video: mirrored scenes, and
    motion played backwards.

    Args:
        frames: (..., nt, H, W, C) array.
        augment: names from AUGMENTATIONS ("flip": left-right, "reverse": time).
        seed: the run's seed.
        position: the sequence's position in the run's stream of sequences.

    Returns:
        The sequence, changed or not (a view when changed).
    """
    if not augment:
        return frames
    heads = np.random.default_rng([seed, position, 1]).random(len(AUGMENTATIONS)) < 0.5
    drawn = {name for name, head in zip(AUGMENTATIONS, heads) if head}
    if "flip" in augment and "flip" in drawn:
        frames = frames[..., ::-1, :]
    if "reverse" in augment and "reverse" in drawn:
        frames = frames[..., ::-1, :, :, :]
    return frames


def pass_order(count, seed, k):
    """Permutation of range(count) for pass k over the data, from (seed, k) only.

    The same orders as SequenceGenerator(shuffle=True, seed=seed) uses for its
    epochs: pass 0 is `starting_point.data_order(count, seed)`, pass k
    `data_order(count, seed, epoch=k)`.
    """
    from prednet_keras import starting_point

    return starting_point.data_order(count, seed, epoch=k if k else None)


def run_order_checksum(count, config):
    """Checksum of every sequence index the whole run visits, in order (EpochBatches' stream)."""
    from prednet_keras import starting_point

    positions = config.epochs * config.steps_per_epoch * config.batch_size
    passes = -(-positions // count)
    stream = np.concatenate([pass_order(count, config.seed, k) for k in range(passes)])[:positions]
    return starting_point.order_checksum(stream)


# -- Keras pieces -------------------------------------------------------------


@keras.saving.register_keras_serializable(package="prednet_keras")
class LastBatchLoss(keras.metrics.Metric):
    """The loss of the last batch alone (Keras' "loss" log is the running mean
    of the epoch); history.csv records it as the per-step loss.

    The training model is trained with MAE against zeros, so the loss is
    mean(|y_pred - y_true|).
    """

    def __init__(self, name="batch_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.value = self.add_variable(shape=(), initializer="zeros", name="value")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = keras.ops.convert_to_tensor(y_pred)
        y_true = keras.ops.cast(y_true, y_pred.dtype)
        self.value.assign(keras.ops.cast(keras.ops.mean(keras.ops.abs(y_pred - y_true)), self.value.dtype))

    def result(self):
        return keras.ops.convert_to_tensor(self.value)

    def reset_state(self):
        self.value.assign(0.0)


class RunRecorder(keras.callbacks.Callback):
    """Writes history rows, checkpoints every completed epoch, keeps the best model.

    End of epoch e, in this order: checkpoint (weights + optimizer) written
    atomically; state.json (names that checkpoint) written atomically; the
    best model exported if e improved it; older checkpoints removed; loss.png
    redrawn. A kill at any point leaves a state.json naming a complete
    checkpoint; if it strikes between state.json and model.keras, resuming
    re-exports model.keras from the checkpoint (then the same weights).

    Step rows are written as `StepLosses` reads the losses: where steps run
    asynchronously, once the next step has been dispatched (so a non-finite
    loss stops training one step later); the rows of an epoch are all written
    before its end-of-epoch work.

    Args:
        folder: the RunFolder.
        export_model: the uncompiled model sharing the trained layers (what
            model.keras holds).
        monitor: "val_loss" or "loss".
        best: (epoch, value) of the best epoch so far, or None.
        steps_per_epoch: steps per epoch (for global step numbers).
        config: the resolved TrainConfig (for the learning rate).
        trajectory: a trajectory.Trajectory to feed after every step and save
            with every checkpoint, or None.
        model_checksum: weights checksum of the model.keras already written
            (a resumed run's best so far), or None.
    """

    def __init__(self, folder, export_model, monitor, best, steps_per_epoch, config, trajectory=None,
                 model_checksum=None):
        super().__init__()
        self.folder = folder
        self.model_checksum = model_checksum
        self.trajectory = trajectory
        self.export_model = export_model
        self.monitor = monitor
        self.best_epoch, self.best_value = best if best else (None, math.inf)
        self.steps_per_epoch = steps_per_epoch
        self.config = config
        self.history = folder.open_history()
        self.diverged = None
        self.epochs_completed = None
        self.improved = False
        self._epoch = 0
        self._epoch_start = time.perf_counter()
        self._kill_at = _parse_kill_at(os.environ.get(KILL_AT_ENV))
        self._losses = None
        self.last_step = None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._epoch_start = time.perf_counter()

    def on_train_begin(self, logs=None):
        # The trajectory needs each step's weights: it reads every step at once.
        self._losses = StepLosses(self.model, lag=0 if self.trajectory is not None else None)

    def on_train_batch_end(self, batch, logs=None):
        self._write_steps(self._losses.add((self._epoch + 1, batch + 1), logs))

    def _write_steps(self, losses):
        for (epoch, step), loss in losses:
            self.history.write(
                kind="step",
                epoch=epoch,
                step=step,
                global_step=(epoch - 1) * self.steps_per_epoch + step,
                loss=loss,
                lr=learning_rate_at(epoch - 1, self.config),
                seconds=round(time.perf_counter() - self._epoch_start, 4),
            )
            self.last_step = (epoch, step, loss)
            if self.trajectory is not None:
                self.trajectory.after_update((epoch - 1) * self.steps_per_epoch + step)
            if not math.isfinite(loss) and self.diverged is None:
                self.diverged = (epoch, step)
                self.model.stop_training = True
            self._maybe_killed(epoch, step)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self._write_steps(self._losses.flush())
        if self.diverged:
            return
        done = epoch + 1
        loss = float(logs.get("loss", math.nan))
        val_loss = logs.get("val_loss")
        val_loss = None if val_loss is None else float(val_loss)
        self.history.write(
            kind="epoch",
            epoch=done,
            step=self.steps_per_epoch,
            global_step=done * self.steps_per_epoch,
            loss=loss,
            val_loss=val_loss,
            lr=learning_rate_at(epoch, self.config),
            seconds=round(time.perf_counter() - self._epoch_start, 4),
        )
        self._maybe_killed(done, "history")
        value = val_loss if self.monitor == "val_loss" else loss
        if value is not None and not math.isfinite(value):
            self.diverged = (done, None)
            self.model.stop_training = True
            return
        improved = value is not None and value < self.best_value
        if improved:
            self.best_epoch, self.best_value = done, value
        if self.trajectory is not None:
            # Before the checkpoint: a resumed run drops snapshots past its checkpoint.
            self.trajectory.save()
        from prednet_keras.starting_point import weights_checksum

        checkpoint = self.folder.checkpoint_path(done)

        def save_checkpoint(path):
            self.model.save_weights(path)
            self._maybe_killed(done, "checkpoint-partial")

        runs.write_through_temporary(checkpoint, save_checkpoint, needed=variables_bytes(self.model))
        self._maybe_killed(done, "checkpoint")
        # Checked when the checkpoint is loaded again (resume) and, for the
        # best epoch's, when model.keras is (prednet-eval).
        checksum = weights_checksum(self.model)
        if improved:
            self.model_checksum = checksum
        self.folder.write_state(
            {
                "epoch": done,
                "checkpoint": str(checkpoint.relative_to(self.folder.path)),
                "monitor": self.monitor,
                "best_epoch": self.best_epoch,
                "best_value": self.best_value if self.best_epoch else None,
                "loss": loss,
                "val_loss": val_loss,
                "weights_checksum": checksum,
                "model_weights_checksum": self.model_checksum,
                # The whole file, optimizer state included: a resume refuses a checkpoint changed since.
                "checkpoint_sha256": file_sha256(checkpoint),
            }
        )
        self._maybe_killed(done, "state")
        if improved:
            export_best(self.export_model, self.folder, after_write=lambda: self._maybe_killed(done, "model-partial"))
            self._maybe_killed(done, "model")
        self.folder.remove_checkpoints_except(checkpoint)
        self._maybe_killed(done, "cleanup")
        self.epochs_completed = done
        self.improved = improved
        try:
            runs.plot_history(self.folder.read_history(), self.folder.loss_plot_path, title=self.folder.path.name)
        except Exception as error:  # a plot must never stop a run
            print(f"warning: loss.png not updated ({error})", flush=True)

    def on_train_end(self, logs=None):
        self._write_steps(self._losses.flush())
        self.history.close()

    def _maybe_killed(self, epoch, moment):
        """The KILL_AT_ENV test hook: SIGKILL, as a power cut, at (epoch, step or moment)."""
        if self._kill_at == (epoch, moment):
            self.history.close()
            os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))


class StopOnRequest(keras.callbacks.Callback):
    """Stops training (KeyboardInterrupt) at the next step once `should_stop()` is true.

    A signal handler that raises KeyboardInterrupt raises it wherever the
    main thread is, which can be a finalizer, where Python prints it and
    drops it; the request the handler also recorded stops training here.

    Args:
        should_stop: a function returning True once a stop was asked for.
    """

    def __init__(self, should_stop):
        super().__init__()
        self.should_stop = should_stop

    def _check(self, *args, **kwargs):
        if self.should_stop():
            raise KeyboardInterrupt

    on_train_batch_begin = on_train_batch_end = on_test_batch_begin = on_epoch_end = _check


class FirstCallAnnouncer(keras.callbacks.Callback):
    """Says when the first training and validation steps, which compile, start and end.

    Compiling can take over a minute (74 s with XLA on a GPU) and prints
    nothing by itself, so a log, a pipe or nohup would show a process that
    looks hung; these lines appear on any output.

    Args:
        bar: a progress bar is being drawn (the validation's line then
            starts on a new line, below the bar).
    """

    def __init__(self, bar=False):
        super().__init__()
        self.lead = "\n" if bar else ""
        self._train_started = self._test_started = None

    def on_train_begin(self, logs=None):
        print("Compiling the training step (done by the first step; can take a minute or more) ...", flush=True)
        self._train_started = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if self._train_started is not None:
            seconds = time.perf_counter() - self._train_started
            print(f"  first training step done in {seconds:.1f} s (compilation included)", flush=True)
            self._train_started = None

    def on_test_begin(self, logs=None):
        if self._test_started is None:
            print(f"{self.lead}Compiling the validation step (done by the first validation) ...", flush=True)
            self._test_started = time.perf_counter()

    def on_test_end(self, logs=None):
        if self._test_started not in (None, False):
            seconds = time.perf_counter() - self._test_started
            print(f"  first validation done in {seconds:.1f} s (compilation included)", flush=True)
            self._test_started = False


class ProgressLogger(keras.callbacks.Callback):
    """A progress bar per epoch (loss and ETA), or with quiet one line per epoch.

    Args:
        epochs: total epochs.
        steps_per_epoch: steps per epoch.
        config: the resolved TrainConfig (for the learning rate).
        recorder: the RunRecorder (to mark the best epoch).
        quiet: one log line per epoch instead of a bar.
    """

    def __init__(self, epochs, steps_per_epoch, config, recorder, quiet=False):
        super().__init__()
        self.epochs = epochs
        self.steps_per_epoch = steps_per_epoch
        self.config = config
        self.recorder = recorder
        # A bar redrawn with carriage returns is noise in a log file.
        self.quiet = quiet or not _is_terminal(sys.stdout)
        self.bar = None

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()
        self._epoch = epoch
        if not self.quiet:
            lr = learning_rate_at(epoch, self.config)
            print(f"Epoch {epoch + 1}/{self.epochs} (lr {lr:g})", flush=True)
            self.bar = keras.utils.Progbar(self.steps_per_epoch, stateful_metrics=["loss", "val_loss"])

    def on_train_batch_end(self, batch, logs=None):
        # The recorder's last written step: reading this step's loss here would
        # make the host wait for the device after every step.
        last = self.recorder.last_step
        if self.bar is not None and last is not None and last[0] == self._epoch + 1:
            self.bar.update(last[1], [("loss", last[2])])

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        best = " *best*" if getattr(self.recorder, "improved", False) and self.recorder.epochs_completed == epoch + 1 else ""
        values = [("loss", float(logs.get("loss", math.nan)))]
        if "val_loss" in logs:
            values.append(("val_loss", float(logs["val_loss"])))
        if self.bar is not None:
            self.bar.update(self.steps_per_epoch, values, finalize=True)
            if best:
                print("  best so far, saved model.keras", flush=True)
        else:
            text = "  ".join(f"{k} {v:.6g}" for k, v in values)
            lr = learning_rate_at(epoch, self.config)
            seconds = time.perf_counter() - self._start
            print(
                f"epoch {epoch + 1}/{self.epochs}  {text}  lr {lr:g}  {seconds:.1f}s{best}",
                flush=True,
            )


def _is_terminal(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _parse_kill_at(text):
    if not text:
        return None
    epoch, when = text.split(":")
    return int(epoch), when if when in KILL_MOMENTS else int(when)


def dispatches_asynchronously(model):
    """Whether a training step of `model` returns before the device has done it.

    True on JAX (every device) and on torch with the model on a GPU; there a
    caller can queue the next step before reading this one's loss. TensorFlow
    and torch on a CPU return when the step is done.
    """
    backend = keras.backend.backend()
    if backend == "jax":
        return True
    if backend == "torch":
        return any("cuda" in str(getattr(v.value, "device", "")) for v in model.trainable_variables[:1])
    return False


class StepLosses:
    """Reads training steps' losses in order, as late as keeps the device busy.

    Reading a loss waits for its step to finish. Where a step returns before
    the device has done it (`dispatches_asynchronously`), the loss of a step is
    read only once the next step has been dispatched, so the device always has
    a step queued; elsewhere at once.

    Args:
        model: the model being trained (decides the lag).
        lag: steps left unread; None: 1 where steps run asynchronously, else 0.
    """

    def __init__(self, model, lag=None):
        self.lag = (1 if dispatches_asynchronously(model) else 0) if lag is None else lag
        self._pending = []

    def add(self, key, logs):
        """Queues a finished call's logs under `key`; returns [(key, loss)] for the steps now read."""
        self._pending.append((key, logs or {}))
        return self._read(keep=self.lag)

    def flush(self):
        """Reads every queued step: [(key, loss)]."""
        return self._read(keep=0)

    def _read(self, keep):
        out = []
        while len(self._pending) > keep:
            key, logs = self._pending.pop(0)
            out.append((key, float(logs.get("batch_loss", logs.get("loss", math.nan)))))
        return out


def variables_bytes(model):
    """What a file of the model's variables (weights, and the optimizer's when built) takes, roughly:
    their bytes plus HDF5's bookkeeping, about 1 KiB a variable."""
    variables = list(model.weights)
    if getattr(model, "optimizer", None) is not None and getattr(model.optimizer, "built", False):
        variables += list(model.optimizer.variables)
    return sum(int(np.prod(v.shape)) * np.dtype(str(v.dtype).split(".")[-1]).itemsize + 1024 for v in variables)


def export_best(export_model, folder, after_write=None):
    """Writes model.keras (weights and architecture, no optimizer), atomically.

    Args:
        after_write: called once the temporary file is complete, before it takes the final name (a test hook).
    """
    def save(path):
        export_model.save(path)
        if after_write is not None:
            after_write()

    runs.write_through_temporary(folder.model_path, save, needed=variables_bytes(export_model))


# -- the run ------------------------------------------------------------------


def build_model(config, frame_shape, jit_compile):
    """The compiled training model of a run.

    Args:
        config: a resolved TrainConfig.
        frame_shape: (H, W, C) of the frames.
        jit_compile: Model.compile's jit_compile.

    Returns:
        (model, prednet_kwargs).
    """
    check_frame_size(frame_shape[0], frame_shape[1], config.nb_layers)
    kwargs = config.prednet_kwargs(frame_shape[2])
    model = build_training_model(
        nt=config.nt, frame_shape=tuple(frame_shape), layer_loss_weights=_layer_loss_spec(config.layer_loss), **kwargs
    )
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=config.lr),
        loss="mean_absolute_error",
        metrics=[LastBatchLoss()],
        jit_compile=jit_compile,
    )
    if jit_compile is True:
        # torch.compile would otherwise compile the whole step a second time (see torch_compile).
        torch_compile.settle_gradients(model)
    return model, kwargs


def _layer_loss_spec(value):
    return value if isinstance(value, str) else list(value)


def run_training(run_dir, runtime_record=None, quiet=False, resume=None, should_stop=None):
    """Trains the run in `run_dir` from its last completed epoch (or from the start).

    The manifest must hold "options" (a TrainConfig dict) and "runtime"
    ("requested"); this function fills in everything else.

    Nothing in the folder is written until the data is loaded, the model is
    built and, when continuing, the checkpoint is loaded and matches the
    weights checksum recorded with it: a resume that fails before then leaves
    the folder as it was.

    Args:
        run_dir: the run folder (as prednet-train creates it).
        runtime_record: dict with "effective" settings and "fingerprint" of
            this process (from runtime.configure / runtime.fingerprint).
        quiet: one line per epoch instead of a progress bar.
        resume: for `prednet-train --resume`, a dict with "command", "time"
            and "epochs" (the new total, or None to keep the recorded one);
            recorded in the manifest once the run is verified.
        should_stop: a function; when it returns True, training stops at the
            next step with KeyboardInterrupt (see StopOnRequest).

    Returns:
        The manifest's "result" dict.
    """
    from prednet_keras import starting_point

    folder = runs.RunFolder(run_dir)
    manifest = folder.read_manifest()
    options = dict(manifest["options"])
    recorded_epochs = options["epochs"]
    if resume and resume.get("epochs") is not None:
        options["epochs"] = int(resume["epochs"])
    config = TrainConfig.from_dict(options).resolved()
    runtime_record = runtime_record or {}
    state = folder.read_state()
    first_epoch = int(state["epoch"]) if state else 0

    started = time.perf_counter()
    print(f"Loading data ({'embedded real video' if config.data is None else config.data}) ...", flush=True)
    train_data, val_data, data_info = load_training_data(config)
    if "data" in manifest and first_epoch > 0:
        _check_same_data(manifest["data"], data_info)
    print(f"  loaded {len(train_data):,} training and {len(val_data) if val_data is not None else 0:,} validation "
          f"frames in {time.perf_counter() - started:.1f} s", flush=True)

    from prednet_keras.data import SequenceGenerator

    sequences = SequenceGenerator(train_data, config.nt, batch_size=1, sequence_start_mode="all", shuffle=False)
    validation = None
    if val_data is not None:
        validation = SequenceGenerator(
            val_data,
            config.nt,
            batch_size=config.batch_size,
            sequence_start_mode="all",
            N_seq=config.val_sequences,
            shuffle=False,
            output_mode="error",
        )
    data_info["train"]["sequences"] = len(sequences)
    if validation is not None:
        data_info["val"]["sequences"] = int(validation.N_sequences)
    monitor = "val_loss" if validation is not None else "loss"

    requested = (manifest.get("runtime") or {}).get("requested") or {}
    devices = int(requested.get("devices") or 1)
    # The validation sequences there are, which may be fewer than asked for.
    uneven = batch_problem(config.batch_size, validation.N_sequences if validation is not None else 0, devices)
    if uneven:
        raise ValueError(uneven)
    jit = jit_compile_for(requested, runtime_record.get("effective") or {})
    keras.utils.set_random_seed(config.seed)
    model, prednet_kwargs = build_model(config, train_data.frame_shape, jit)
    export_model = keras.Model(model.inputs, model.outputs, name="prednet_training")

    initial = manifest.get("initial_weights") or {}
    if first_epoch > 0:
        started = time.perf_counter()
        checkpoint = folder.path / state["checkpoint"]
        print(f"Loading the checkpoint of epoch {first_epoch} ({checkpoint}) ...", flush=True)
        _check_checkpoint_file(checkpoint, state)
        # Optimizer variables must exist before load_weights can restore them.
        model.optimizer.build(model.trainable_variables)
        model.load_weights(checkpoint)
        _verify_checkpoint(folder, manifest, state, starting_point.weights_checksum(model))
        print(f"  loaded and verified in {time.perf_counter() - started:.1f} s", flush=True)

    # -- from here on the run folder is written ---------------------------
    session = _begin_session(folder, manifest, config, runtime_record, first_epoch, resume, recorded_epochs)

    if first_epoch == 0:
        if initial.get("file") and (folder.path / initial["file"]).is_file():
            # A restart before the first epoch ended: the same starting point as before.
            starting_point.load_initial_weights(model, folder.path / initial["file"])
        elif config.init_weights:
            # Copied in, so the run folder alone says where the run started.
            shutil.copyfile(config.init_weights, folder.initial_weights_path)
            loaded = starting_point.load_initial_weights(model, folder.initial_weights_path)
            initial = {"file": folder.initial_weights_path.name, "from": str(config.init_weights), "seed": loaded["seed"]}
        else:
            # save_initial_weights only writes the file; loading it is what
            # replaces Keras' backend-specific initialisation.
            starting_point.save_initial_weights(model, folder.initial_weights_path, config.seed)
            starting_point.load_initial_weights(model, folder.initial_weights_path)
            initial = {"file": folder.initial_weights_path.name, "from": "seed", "seed": config.seed}
        initial["checksum"] = starting_point.weights_checksum(model)
        folder.truncate_history(0)
        best = None
    else:
        folder.truncate_history(first_epoch)
        best = (state["best_epoch"], state["best_value"]) if state.get("best_epoch") else None
        if state.get("best_epoch") == first_epoch:
            export_best(export_model, folder)
        print(f"Resuming after epoch {first_epoch} of {config.epochs}.", flush=True)

    manifest["data"] = data_info
    manifest.update(
        initial_weights=initial,
        seeds={
            "seed": config.seed,
            "initial_weights": initial.get("seed", config.seed),
            "data_order": config.seed,
            "data_order_checksum": run_order_checksum(len(sequences), config),
        },
        model={
            "name": config.model,
            "layer": "prednet_keras.layers.lotter.PredNet",
            "kwargs": {k: list(v) if isinstance(v, tuple) else v for k, v in prednet_kwargs.items()},
            "parameters": int(model.count_params()),
            "frame_shape": list(train_data.frame_shape),
            "nt": config.nt,
            "layer_loss_weights": layer_loss_weights_for(_layer_loss_spec(config.layer_loss), config.nb_layers),
            "time_loss_weights": time_loss_weights_for(config.nt),
        },
    )
    # Merged, not replaced: the CLI records why the learning rate drops when it does.
    manifest["schedule"] = dict(
        manifest.get("schedule") or {},
        epochs=config.epochs,
        steps_per_epoch=config.steps_per_epoch,
        batch_size=config.batch_size,
        optimizer="adam",
        lr=config.lr,
        lr_drop_epoch=config.lr_drop_epoch,
        lr_after_drop=config.lr * config.lr_drop_factor,
        lr_by_epoch=schedule_text(config),
        loss="mean_absolute_error of the weighted error vs 0",
        monitor=monitor,
        jit_compile=jit,
        augment=list(config.augment),
    )
    session["jit_compile"] = jit
    folder.write_manifest(manifest)

    if first_epoch >= config.epochs:
        print(f"Nothing to do: {first_epoch} of {plural(config.epochs, 'epoch')} already completed.", flush=True)
        return _finish(folder, manifest, session, state, starting_point.weights_checksum(model))

    batches = EpochBatches(
        sequences, config.batch_size, config.steps_per_epoch, first_epoch, config.epochs, config.seed,
        augment=config.augment,
    )
    trajectory = Trajectory(folder.path / TRAJECTORY_FILE, config.epochs * config.steps_per_epoch,
                            (manifest.get("study") or {}).get("trajectory_points") or 0)
    if trajectory.enabled:
        trajectory.resume(first_epoch * config.steps_per_epoch)
        trajectory.start(model, first_epoch * config.steps_per_epoch)
    recorder = RunRecorder(folder, export_model, monitor, best, config.steps_per_epoch, config,
                           trajectory if trajectory.enabled else None,
                           model_checksum=state.get("model_weights_checksum") if state else None)
    progress = ProgressLogger(config.epochs, config.steps_per_epoch, config, recorder, quiet=quiet)
    callbacks = [
        keras.callbacks.LearningRateScheduler(lambda epoch, lr=None: learning_rate_at(epoch, config)),
        recorder,
        FirstCallAnnouncer(bar=not progress.quiet),
        progress,
    ]
    if should_stop is not None:
        callbacks.insert(0, StopOnRequest(should_stop))
    early = None
    if config.patience:
        # After the recorder: the epoch that stops training is recorded in full first.
        early = ResumableEarlyStopping(config.patience, config.epochs, best, first_epoch)
        callbacks.insert(callbacks.index(recorder) + 1, early)
    print(
        f"Training {config.model} ({model.count_params():,} parameters) on {len(sequences)} sequences of "
        f"{config.nt} frames {'x'.join(map(str, train_data.frame_shape))}, "
        f"{config.steps_per_epoch} steps of {config.batch_size} per epoch, "
        f"validation on {validation.N_sequences if validation is not None else 0} sequences; "
        f"backend {keras.backend.backend()}"
        + (f", data-parallel on {devices} devices ({config.batch_size // devices} sequences each)" if devices > 1
           else "") + ".",
        flush=True,
    )
    if early is not None:
        print(f"Early stopping: once val_loss has not improved for {plural(config.patience, 'epoch')}.", flush=True)
    print(f"Learning rate: {schedule_text(config)} ({_drop_rule(manifest, config)}).", flush=True)
    started = time.perf_counter()
    try:
        model.fit(
            batches,
            epochs=config.epochs,
            initial_epoch=first_epoch,
            steps_per_epoch=config.steps_per_epoch,
            validation_data=validation,
            callbacks=callbacks,
            # The order is EpochBatches' own: Keras' shuffle would reorder
            # batches with Python's random state, which a resumed run cannot replay.
            shuffle=False,
            verbose=0,
        )
    finally:
        recorder.history.close()
        session["seconds"] = round(time.perf_counter() - started, 3)
        # TensorFlow complains at exit about generator datasets still alive then.
        del batches
        gc.collect()
    if recorder.diverged:
        epoch, step = recorder.diverged
        where = f"epoch {epoch}" + (f", step {step}" if step else "")
        done = folder.completed_epochs()
        kept = (f"the {plural(done, 'completed epoch')} before it {'is' if done == 1 else 'are'} kept in {folder.path} "
                f"(model.keras: the best of them)" if done else "no epoch was completed before it")
        raise TrainingDiverged(
            f"The loss became NaN or infinite at {where}, so training stopped; {kept}. A new run with a lower --lr "
            f"(this one: {config.lr:g}) may train."
        )
    if trajectory.enabled and trajectory.save():
        manifest["trajectory"] = trajectory.record()
    if early is not None and early.record():
        manifest["result"] = dict(manifest.get("result") or {}, stopped_early=early.record())
    # Final weights, the same bytes on every backend: the determinism audit's record.
    return _finish(folder, manifest, session, folder.read_state(), starting_point.weights_checksum(model))


def file_sha256(path, chunk=1 << 20):
    """sha256 (hex) of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_checkpoint_file(checkpoint, state):
    """Fails before Keras reads a checkpoint whose bytes are not the ones written at its epoch.

    Keras loads what it recognises and passes over the rest: an optimizer state of another
    size is dropped with a warning (the run would go on from a fresh Adam), unknown groups are
    ignored, a kernel of another shape fails with a message full of numbers. The file's own
    hash, recorded when it was written, catches all of them. Runs from before that record are
    checked after loading, by their weights (_verify_checkpoint).
    """
    expected = state.get("checkpoint_sha256")
    if expected is not None and file_sha256(checkpoint) != expected:
        raise runs.RunFolderError(
            f"{checkpoint}: not the checkpoint written at epoch {state['epoch']} ({runs.STATE} records sha256 "
            f"{expected[:12]}..., the file's differs): it was changed or replaced since, so this run cannot be "
            "continued from it."
        )


def _verify_checkpoint(folder, manifest, state, actual):
    """Fails when a loaded checkpoint's weights are not the ones recorded with it.

    state.json records the checksum of each checkpoint it names; runs from
    before that record are checked against result.weights_checksum (the final
    weights) when the checkpoint is the final epoch's.
    """
    expected, where = state.get("weights_checksum"), f"{runs.STATE} weights_checksum"
    result = manifest.get("result") or {}
    if expected is None and result.get("weights_checksum") and result.get("epochs_completed") == state["epoch"]:
        expected, where = result["weights_checksum"], f"{runs.MANIFEST} result.weights_checksum"
    if expected is not None and expected != actual:
        raise runs.RunFolderError(
            f"{folder.path / state['checkpoint']} does not hold the weights recorded for it ({where} "
            f"{expected[:12]}..., the file holds {actual[:12]}...): it was changed after it was written, so "
            "this run cannot be continued."
        )


def _begin_session(folder, manifest, config, runtime_record, first_epoch, resume, recorded_epochs):
    """Records this process in the manifest (the first write of a training process); returns its session."""
    session = {"started": _now(), "pid": os.getpid(), "backend": keras.backend.backend()}
    # Each process that worked on the run (the first, then every resume) is
    # listed; its runtime is spelled out only where it differs from the first's.
    runtime = manifest.setdefault("runtime", {})
    if not runtime.get("effective") and runtime_record.get("effective"):
        runtime["effective"] = runtime_record["effective"]
        manifest["fingerprint"] = runtime_record.get("fingerprint")
    for key, first in (("effective", runtime.get("effective")), ("fingerprint", manifest.get("fingerprint"))):
        value = runtime_record.get(key)
        session[key] = "same as the run's" if value is not None and _comparable(value) == _comparable(first) else value
    session["start_epoch"] = first_epoch
    for earlier in manifest.setdefault("sessions", []):
        if "ended" not in earlier:
            # Killed without a chance to say so (SIGKILL, power cut).
            earlier.setdefault("status", "killed")
    if resume:
        manifest.setdefault("resumes", []).append(
            {"command": resume.get("command"), "time": resume.get("time") or _now(), "after_epoch": first_epoch}
        )
        if config.epochs != recorded_epochs:
            manifest["options"]["epochs"] = config.epochs
            manifest.setdefault("epochs_changed", []).append(
                {"from": recorded_epochs, "to": config.epochs, "at_epoch": first_epoch}
            )
    if "error" in manifest:
        # The error belongs to the session that stopped on it, not to the run continuing now.
        ended = [s for s in manifest["sessions"] if s.get("status") == "failed"]
        if ended:
            ended[-1].setdefault("error", manifest["error"])
        manifest.setdefault("earlier_errors", []).append(manifest.pop("error"))
    manifest["sessions"].append(session)
    manifest["status"] = "running"
    folder.remove_temporaries()
    folder.write_manifest(manifest)
    return session


def _drop_rule(manifest, config):
    return (manifest.get("schedule") or {}).get("lr_drop_epoch_rule") or f"dropped after epoch {config.lr_drop_epoch}"


def _finish(folder, manifest, session, state, weights_checksum=None):
    """Records the outcome in the manifest, redraws loss.png, prints a summary.

    The result is merged into the recorded one: a field this process cannot
    recompute is kept, never dropped.
    """
    history = folder.read_history()
    epochs = [r for r in history if r["kind"] == "epoch"]
    last = epochs[-1] if epochs else {}
    result = {
        "epochs_completed": int(state["epoch"]) if state else 0,
        "best_epoch": state.get("best_epoch") if state else None,
        "best_" + (state.get("monitor", "val_loss") if state else "val_loss"): state.get("best_value") if state else None,
        "final_loss": last.get("loss"),
        "final_val_loss": last.get("val_loss"),
        "train_seconds": round(
            sum(s.get("seconds") or 0.0 for s in manifest.get("sessions", [])), 3
        ),
    }
    if weights_checksum:
        result["weights_checksum"] = weights_checksum
    if state and state.get("model_weights_checksum"):
        result["model_weights_checksum"] = state["model_weights_checksum"]
    session["ended"] = _now()
    session["end_epoch"] = result["epochs_completed"]
    manifest["status"] = "complete"
    manifest["result"] = dict(manifest.get("result") or {}, **result)
    folder.write_manifest(manifest)
    if history:
        runs.plot_history(history, folder.loss_plot_path, title=folder.path.name)
    best = result.get("best_epoch")
    stopped = manifest["result"].get("stopped_early")
    print(
        f"Done: {plural(result['epochs_completed'], 'epoch')} completed in {folder.path}"
        + (f"; best epoch {best} ({state['monitor']} {state['best_value']:.6g}) in {folder.model_path}" if best else "")
        + (f"; stopped early at epoch {stopped['epoch']}: {stopped['reason']}" if stopped else ""),
        flush=True,
    )
    return result


def _comparable(record):
    """A runtime record without what differs between any two processes."""
    if not isinstance(record, dict):
        return record
    volatile = ("pid", "hostname", "cpu_ids")
    return {k: _comparable(v) for k, v in record.items() if k not in volatile}


def _check_same_data(recorded, current):
    for split, info in current.items():
        before = (recorded.get(split) or {}).get("checksum")
        if before and before != info["checksum"]:
            raise ValueError(
                f"The {split} data changed since this run started (checksum {before[:19]}... is now "
                f"{info['checksum'][:19]}...); resume with the same data, or start a new run."
            )


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def mark_stopped(run_dir, status, error=None):
    """Records how a training process ended early ("interrupted" or "failed").

    Only a process that has begun writing the run records anything: one that
    stopped before (a resume refused in the training process, data that
    would not load) leaves the run's record as it found it.

    Args:
        run_dir: the run folder.
        status: the new status.
        error: one-line description, for "failed".

    Returns:
        True when the manifest was written.
    """
    folder = runs.RunFolder(run_dir)
    try:
        manifest = folder.read_manifest()
    except runs.RunFolderError:
        return False
    sessions = manifest.get("sessions") or []
    ours = bool(sessions) and sessions[-1].get("pid") == os.getpid() and "ended" not in sessions[-1]
    if not ours and manifest.get("status") != "created":
        return False
    manifest["status"] = status
    if error:
        manifest["error"] = error
    if ours:
        sessions[-1]["ended"] = _now()
        sessions[-1]["end_epoch"] = folder.completed_epochs()
        sessions[-1]["status"] = status
        if error:
            sessions[-1]["error"] = error
    try:
        folder.write_manifest(manifest)
    except (OSError, runs.RunFolderError):
        # A full disk: the manifest is replaced atomically or not at all, so the last record stands.
        return False
    return True
