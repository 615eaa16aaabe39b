"""The Keras callbacks through which every protocol of the training session reports (its metric,
`LastBatchLoss`, the per-step loss history.csv records, is in models/lotter.py with the other models' metrics).

Lotter's recipe, under Keras' fit: `RunRecorder` (history rows, a checkpoint every completed epoch, the best
model kept), `StopOnRequest`, `FirstCallAnnouncer` and `ProgressLogger` (the progress lines of `display`,
per epoch), and what they use: `StepLosses` (reading losses without stalling the device), `export_best`,
and the PREDNET_TEST_KILL_AT test hook. On JAX all four are `async_safe`, so that Keras converts each
batch's logs in its thread pool while fit dispatches the next step (`StepLosses` says how the rows stay in
order); elsewhere the recorder is not, and Keras calls them all in fit's thread, as it always did.

A protocol counted in updates (`protocol_training`; its loop calls `on_train_begin` and
`on_train_batch_end` with each update's record as the logs): `UpdateRows` (history.csv),
`TrajectorySnapshots` (trajectory.npz), `UpdateProgressLines` (the update lines of `display`) and
`UpdateCheckpoints` (its checkpoints).
"""

import math
import os
import signal
import sys
import threading
import time

import keras
import numpy as np

from prednet_keras import backends
from prednet_keras.files.diskwrite import file_sha256, write_through_temporary
from prednet_keras.options.recipe import learning_rate_at
from prednet_keras.session import interrupts, torch_compile
from prednet_keras.session.display import FirstStep, is_terminal
from prednet_keras.session.history import draw_loss

# Test hook: "EPOCH:STEP" (from 1) kills the training process with SIGKILL right
# after that step, as a power cut would, to test --resume; "EPOCH:MOMENT" at one
# of the moments of that epoch's end (KILL_MOMENTS, in the order they happen);
# a third field names another signal to send instead ("2:checkpoint:SIGINT": a Ctrl-C).
KILL_AT_ENV = "PREDNET_TEST_KILL_AT"
KILL_MOMENTS = ("history", "checkpoint-partial", "checkpoint", "state", "model-partial", "model", "cleanup")


class RunRecorder(keras.callbacks.Callback):
    """Writes history rows, checkpoints every completed epoch, keeps the best model.

    End of epoch e, in this order: checkpoint (weights + optimizer) written
    atomically; state.json (names that checkpoint) written atomically; the
    best model exported if e improved it; older checkpoints removed; loss.png
    redrawn. A kill at any point leaves a state.json naming a complete
    checkpoint; if it strikes between state.json and model.keras, resuming
    re-exports model.keras from the checkpoint (then the same weights).

    Step rows are written as `StepLosses` reads the losses: where steps run
    asynchronously, once the next step has been dispatched; the rows of an
    epoch are all written before its end-of-epoch work. On JAX (without a
    trajectory) the recorder is `async_safe`: Keras converts the logs in its
    thread pool and the rows are written in fit's thread, in order, before
    each step (`StepLosses.begin`), so a non-finite loss at step N stops
    training after step N+2 (fit checks `stop_training` only after a step);
    elsewhere, the rows written in `on_train_batch_end`, after step N+1 where
    steps run asynchronously (torch on a GPU), after step N where not.

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
        # The trajectory needs each step's weights, in fit's thread: it reads every step at once.
        # export_model holds the trained layers' variables (where they are decides the lag).
        self._losses = StepLosses(export_model, lag=0 if trajectory is not None else None)
        self.async_safe = self._losses.async_safe
        self.last_step = None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._epoch_start = time.perf_counter()

    def on_train_batch_begin(self, batch, logs=None):
        if self.async_safe:
            self._write_steps(self._losses.begin((self._epoch + 1, batch + 1)))

    def on_train_batch_end(self, batch, logs=None):
        # Async-safe: from Keras' thread pool, in any order; nothing here but handing the loss over.
        if self.async_safe:
            self._losses.arrive((self._epoch + 1, batch + 1), logs)
        else:
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
        # Ctrl-C or SIGTERM meanwhile takes effect after this, in StopOnRequest: the epoch counts whole.
        with interrupts.deferred():
            self._record_epoch(epoch, logs or {})

    def _record_epoch(self, epoch, logs):
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
        from prednet_keras.models.starting_point import weights_checksum

        checkpoint = self.folder.checkpoint_path(done)

        def save_checkpoint(path):
            self.model.save_weights(path)
            self._maybe_killed(done, "checkpoint-partial")

        write_through_temporary(checkpoint, save_checkpoint, needed=variables_bytes(self.model))
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
        draw_loss(self.folder.read_history(), self.folder.loss_plot_path, title=self.folder.path.name)

    def on_train_end(self, logs=None):
        self._write_steps(self._losses.flush())
        self.history.close()

    def _maybe_killed(self, epoch, moment):
        """The KILL_AT_ENV test hook: SIGKILL, as a power cut, at (epoch, step or moment); or the signal the
        hook names (EPOCH:MOMENT:SIGINT, a Ctrl-C there)."""
        if self._kill_at and self._kill_at[:2] == (epoch, moment):
            name = self._kill_at[2]
            if name == "SIGKILL":
                self.history.close()
            os.kill(os.getpid(), getattr(signal, name, signal.SIGTERM))


class UpdateRows(keras.callbacks.Callback):
    """Writes each update's record (the batch's logs) as a row of history.csv.

    Args:
        history: the session's history.HistoryWriter.
    """

    def __init__(self, history):
        super().__init__()
        self.history = history

    def on_train_batch_end(self, batch, logs=None):
        self.history.write(**logs)


class TrajectorySnapshots(keras.callbacks.Callback):
    """Samples the model's weights at the start and at the trajectory's due updates.

    Args:
        trajectory: the run's trajectory.Trajectory (a disabled one samples nothing).
    """

    def __init__(self, trajectory):
        super().__init__()
        self.trajectory = trajectory

    def on_train_begin(self, logs=None):
        self.trajectory.start(self.model)

    def on_train_batch_end(self, batch, logs=None):
        self.trajectory.after_update(logs["update"])


class UpdateProgressLines(keras.callbacks.Callback):
    """The progress lines of a run counted in updates (display.UpdateProgress).

    Args:
        progress: the display.UpdateProgress.
    """

    def __init__(self, progress):
        super().__init__()
        self.progress = progress

    def on_train_begin(self, logs=None):
        self.progress.start()

    def on_train_batch_end(self, batch, logs=None):
        self.progress(logs)


class UpdateCheckpoints(keras.callbacks.Callback):
    """Checkpoints a run counted in updates when a checkpoint is due and at the update a stop was asked at
    (before StopOnRequest ends the run), through the run's protocol_training.UpdateCheckpoint.

    The PREDNET_TEST_KILL_AT test hook reaches it as "1:UPDATE[:SIGNAL]" (a run's updates are the steps of
    its one epoch): the signal is sent once the update is recorded, before its checkpoint is considered.

    Args:
        checkpoint: the run's UpdateCheckpoint.
        should_stop: the session's stop request (a function), or None.
    """

    def __init__(self, checkpoint, should_stop=None):
        super().__init__()
        self.checkpoint = checkpoint
        self.should_stop = should_stop
        self._kill_at = _parse_kill_at(os.environ.get(KILL_AT_ENV))

    def on_train_batch_end(self, batch, logs=None):
        update = int(logs["update"])
        if self._kill_at and self._kill_at[:2] == (1, update):
            os.kill(os.getpid(), getattr(signal, self._kill_at[2], signal.SIGTERM))
        if self.checkpoint.due() or (self.should_stop is not None and self.should_stop()):
            self.checkpoint.save(update)


class StopOnRequest(keras.callbacks.Callback):
    """Stops training (KeyboardInterrupt) at the next step once `should_stop()` is true.

    A signal handler that raises KeyboardInterrupt raises it wherever the
    main thread is, which can be a finalizer, where Python prints it and
    drops it; the request the handler also recorded stops training here.

    Async-safe: where Keras calls `on_train_batch_end` in its thread pool, the interrupt raised there
    reaches fit at its next dispatch or at the epoch's end, before any epoch work; the check before the
    next step, in fit's thread, stops it there first. Either way no step is dispatched once fit's thread
    has seen the request, and an epoch whose last step saw it is not recorded.

    Args:
        should_stop: a function returning True once a stop was asked for.
    """

    async_safe = True

    def __init__(self, should_stop):
        super().__init__()
        self.should_stop = should_stop

    def _check(self, *args, **kwargs):
        if self.should_stop():
            raise KeyboardInterrupt

    on_train_batch_begin = on_train_batch_end = on_test_batch_begin = on_epoch_end = _check


class FirstCallAnnouncer(keras.callbacks.Callback):
    """Says when the first training and validation steps, which compile, start and end
    (`display.FirstStep`: a log, a pipe or nohup would otherwise show a process that looks hung); nothing
    where the model's steps run eagerly.

    Async-safe: where Keras calls `on_train_batch_end` in its thread pool, the first of those calls to
    come says that the first step is done (its logs have been read, so it is); the validation's first line
    waits for it, so the two come in their order.

    Args:
        bar: a progress bar is being drawn (the validation's line then
            starts on a new line, below the bar).
    """

    async_safe = True

    def __init__(self, bar=False):
        super().__init__()
        self.lead = "\n" if bar else ""
        self.training = FirstStep("training step", "training step", "first step")
        self.validation = FirstStep("validation step", "validation", "first validation")
        self._training_step_dispatched = False
        self._training_step_ended = threading.Event()
        self._once = threading.Lock()

    def on_train_begin(self, logs=None):
        model = self.model
        compiles = not model.run_eagerly and backends.named(keras.backend.backend()).steps_compile(model.jit_compile)
        self.training.compiles = self.validation.compiles = compiles
        self.training.begin()

    def on_train_batch_begin(self, batch, logs=None):
        self._training_step_dispatched = True

    def on_train_batch_end(self, batch, logs=None):
        with self._once:
            if not self.training.done:
                self.training.end()
                if self.training.done and (cache_line := torch_compile.inductor_cache_line()):
                    print(f"  {cache_line}", flush=True)
        self._training_step_ended.set()

    def on_test_begin(self, logs=None):
        if self._training_step_dispatched:
            self._training_step_ended.wait()
        self.validation.begin(self.lead)

    def on_test_end(self, logs=None):
        self.validation.end()


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
        self.quiet = quiet or not is_terminal(sys.stdout)
        self.bar = None

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()
        self._epoch = epoch
        if not self.quiet:
            lr = learning_rate_at(epoch, self.config)
            print(f"Epoch {epoch + 1}/{self.epochs} (lr {lr:g})", flush=True)
            self.bar = keras.utils.Progbar(self.steps_per_epoch, stateful_metrics=["loss", "val_loss"])

    def on_train_batch_begin(self, batch, logs=None):
        # The recorder's last written step (before the next step, in fit's thread, where the recorder
        # writes when async-safe): reading a step's loss here would make the host wait for the device.
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


def _parse_kill_at(text):
    if not text:
        return None
    epoch, when, *name = text.split(":")
    return int(epoch), when if when in KILL_MOMENTS else int(when), name[0] if name else "SIGKILL"


def dispatches_asynchronously(model):
    """Whether a training step of `model` returns before the device has done it.

    True on JAX (every device) and on torch with the model on a GPU; there a
    caller can queue the next step before reading this one's loss. TensorFlow
    and torch on a CPU return when the step is done.
    """
    backend = backends.find(keras.backend.backend())
    when = "never" if backend is None else backend.asynchronous_steps
    if when == "always":
        return True
    if when == "gpu":
        return any("cuda" in str(getattr(v.value, "device", "")) for v in model.trainable_variables[:1])
    return False


class StepLosses:
    """Reads training steps' losses in order, as late as keeps the device busy.

    Reading a loss waits for its step to finish. Where a step returns before
    the device has done it (`dispatches_asynchronously`), the loss of a step is
    read only once the next step has been dispatched, so the device always has
    a step queued; elsewhere at once.

    Keras' fit converts a batch's logs to floats (a wait for the step) before any callback sees them: in
    fit's own thread, unless every callback with `on_train_batch_end` is `async_safe`; then in a pool of
    threads, batches in any order, while fit dispatches the next step. A callback that is `async_safe` where
    this is (JAX: its steps run asynchronously and their outputs outlive the next step) hands each batch's
    logs over with `arrive` from wherever Keras calls it, and reads in fit's thread with `begin` (before
    each step, the steps before it but `lag`, in dispatch order, waiting for any not yet arrived) and
    `flush`. Elsewhere `add`, in `on_train_batch_end`, does both.

    Args:
        model: the model being trained (decides the lag and `async_safe`).
        lag: steps left unread; None: 1 where steps run asynchronously, else 0.
    """

    def __init__(self, model, lag=None):
        self.lag = (1 if dispatches_asynchronously(model) else 0) if lag is None else lag
        # Torch's outputs are copied before the next step may overwrite them (Inductor's CUDA graphs), which
        # a pool thread, converting them after that step was dispatched, would not do.
        backend = backends.find(keras.backend.backend())
        self.async_safe = self.lag > 0 and backend is not None and backend.keep_step_output is None
        self._dispatched = []  # keys of the steps not yet read, in the order fit dispatched them
        self._arrived = {}  # key: loss, as the logs brought it
        self._arrival = threading.Condition()

    def add(self, key, logs):
        """Queues a finished call's loss under `key`; returns [(key, loss)] for the steps now read."""
        self._dispatched.append(key)
        self.arrive(key, logs)
        return self._read(keep=self.lag)

    def begin(self, key):
        """In fit's thread, before step `key` is dispatched: [(key, loss)] of the earlier steps now read."""
        read = self._read(keep=self.lag)
        self._dispatched.append(key)
        return read

    def arrive(self, key, logs):
        """Keeps step `key`'s loss from its logs, from any thread, in any order (`begin`)."""
        logs = logs or {}
        loss = _kept(logs.get("batch_loss", logs.get("loss", math.nan)))
        with self._arrival:
            self._arrived[key] = loss
            self._arrival.notify_all()

    def flush(self):
        """Reads every queued step: [(key, loss)]."""
        return self._read(keep=0)

    def _read(self, keep):
        out = []
        while len(self._dispatched) > keep:
            key = self._dispatched.pop(0)
            with self._arrival:
                self._arrival.wait_for(lambda key=key: key in self._arrived)
                loss = self._arrived.pop(key)
            out.append((key, float(loss)))
        return out


def _kept(value):
    """`value`, copied on its device where it is a torch tensor (a copy queued like any kernel, no wait).

    Under Inductor's CUDA graphs (TORCHINDUCTOR_CUDAGRAPHS=1) a compiled step's outputs live in
    memory the next replay of that graph overwrites, and torch refuses to read them after it;
    StepLosses reads a loss only after the next step was dispatched.
    """
    backend = backends.owning_package(value)
    if backend is not None and backend.keep_step_output is not None:
        return backend.keep_step_output(value)
    return value


def torch_step_output_kept(value):
    """A torch tensor's copy on its device (Backend.keep_step_output)."""
    return value.detach().clone()


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

    write_through_temporary(folder.model_path, save, needed=variables_bytes(export_model))


