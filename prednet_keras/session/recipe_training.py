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

Its pieces: the frames and the order of batches (`training_data`), the metric and
the callbacks that record the run (`callbacks`).

The kind "prednet" states `protocol.RecipeProtocol` (it can resume); the one training session
(`session.training`, in the training process, after `runtime.configure`) opens the run and
calls `run_training` with it. `TrainConfig` is also what the CLI validates before it
starts that process.
"""

import gc
import shutil
import time

import keras

from prednet_keras import backends
from prednet_keras.runtime.distribution import batch_problem
from prednet_keras.session.early_stopping import ResumableEarlyStopping
from prednet_keras.session.bookkeeping import resume_entry
from prednet_keras.session.folder import plural
from prednet_keras.layers.lotter import check_frame_size
from prednet_keras.runtime.memory_estimate import memory_problem
from prednet_keras.models.lotter import LastBatchLoss, build_training_model
from prednet_keras.models.torch_training_step import compile_for_training
from prednet_keras.session.records import Manifest
from prednet_keras.options.recipe import (
    TrainConfig,
    layer_loss_weights_for,
    learning_rate_at,
    schedule_text,
    time_loss_weights_for,
)
from prednet_keras.session.callbacks import (
    FirstCallAnnouncer,
    ProgressLogger,
    RunRecorder,
    export_best,
)
from prednet_keras.session.training_data import EpochBatches, load_training_data, run_order_checksum
from prednet_keras.session.trajectory import FILE as TRAJECTORY_FILE
from prednet_keras.session.trajectory import Trajectory

__all__ = [
    "TrainingDiverged",
    "build_model",
    "check_best_model",
    "check_fits",
    "check_same_data",
    "comparable_runtime",
    "jit_compile_for",
    "run_training",
]


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
    backend = backends.find(requested.get("backend"))
    if backend is not None and backend.jit_on_cpu is not None and str(requested.get("device", "cpu")).startswith("cpu"):
        return backend.jit_on_cpu
    return effective.get("jit_compile", "auto")


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
    # On torch: the step traced once, and compiled once (models.torch_training_step).
    compile_for_training(
        model,
        optimizer=keras.optimizers.Adam(learning_rate=config.lr),
        loss="mean_absolute_error",
        metrics=[LastBatchLoss()],
        jit_compile=jit_compile,
    )
    return model, kwargs


def _layer_loss_spec(value):
    return value if isinstance(value, str) else list(value)


def check_size_fits(config, device):
    """check_fits' memory bound, before any frame is loaded, for a run whose frames are resized to --size: the
    frames at an absurd size alone can take the machine's memory while they load (a lower bound: one channel
    where the stack sizes do not say how many)."""
    if config.size is None or not device.startswith("cpu"):
        return
    channels = config.stack_sizes[0] if config.stack_sizes is not None else 1
    frame_shape = (*config.size, channels)
    problem = memory_problem(frame_shape, config.prednet_kwargs(channels), config.nt, config.batch_size)
    if problem:
        raise ValueError(problem)


def check_fits(config, frame_shape, sequences, device):
    """Refuses, before the model is built, a batch larger than the training data or one that cannot fit in
    this machine's memory (a CPU run; on a GPU the framework reports its own out-of-memory error)."""
    if config.batch_size > sequences:
        raise ValueError(f"--batch-size {config.batch_size} is larger than the training data: "
                         f"{config.data or 'the embedded video'} holds {sequences} sequences of {config.nt} frames. "
                         "Use a smaller --batch-size or --nt, or more data.")
    if device.startswith("cpu"):
        problem = memory_problem(frame_shape, config.prednet_kwargs(frame_shape[2]), config.nt, config.batch_size)
        if problem:
            raise ValueError(problem)


def check_best_model(folder, state):
    """Refuses to resume a run whose model.keras is not the best epoch's model that state.json records:
    training on would write a manifest vouching for a file it did not make."""
    from prednet_keras.formats.keras_files import load_model
    from prednet_keras.models.starting_point import weights_checksum

    expected = state.get("model_weights_checksum")
    if not expected:
        return
    where = f"{folder.state_path} (epoch {state['best_epoch']}, the best)"
    if not folder.model_path.is_file():
        raise ValueError(f"{folder.model_path} is missing: it held the best epoch's model that {where} records; "
                         "restore it, or start again with --overwrite.")
    actual = weights_checksum(load_model(folder.model_path, compile=False))
    if actual != expected:
        raise ValueError(f"{folder.model_path} does not hold the weights {where} records ({expected[:12]}..., "
                         f"the file holds {actual[:12]}...): it was replaced or changed; restore it, or start "
                         "again with --overwrite.")


def run_training(run, runtime_record=None, quiet=False, resume=None, session_callbacks=()):
    """Trains the run the session `run` opened from its last completed epoch (or from the start).

    The manifest must hold "options" (a TrainConfig dict) and "runtime"
    ("requested"); this function fills in everything else.

    Nothing in the folder is written until the data is loaded, the model is
    built and, when continuing, the checkpoint is loaded and matches the
    weights checksum recorded with it: a resume that fails before then leaves
    the folder as it was.

    Args:
        run: the bookkeeping.RunSession of the run folder (as prednet-train creates it).
        runtime_record: dict with "effective" settings and "fingerprint" of
            this process (from runtime.configure / runtime.fingerprint).
        quiet: one line per epoch instead of a progress bar.
        resume: for `prednet-train --resume`, a dict with "command", "time"
            and "epochs" (the new total, or None to keep the recorded one);
            recorded in the manifest once the run is verified.
        session_callbacks: the session's Keras callbacks (StopOnRequest), called
            last at every step.

    Returns:
        The manifest's "result" dict.
    """
    from prednet_keras.models import starting_point

    folder, manifest = run.folder, run.manifest
    options = dict(manifest["options"])
    recorded_epochs = options["epochs"]
    if resume and resume.get("epochs") is not None:
        options["epochs"] = int(resume["epochs"])
    config = TrainConfig.from_dict(options).resolved()
    runtime_record = runtime_record or {}
    state = folder.read_state()
    first_epoch = int(state["epoch"]) if state else 0

    check_size_fits(config, str(run.recorded.requested.device))
    started = time.perf_counter()
    print(f"Loading data ({'embedded real video' if config.data is None else config.data}) ...", flush=True)
    train_data, val_data, data_info = load_training_data(config)
    recorded = run.recorded
    if recorded.data and first_epoch > 0:
        check_same_data(recorded.data, data_info)
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

    requested = recorded.requested.to_dict()
    devices = int(recorded.requested.devices or 1)
    # The validation sequences there are, which may be fewer than asked for.
    uneven = batch_problem(config.batch_size, validation.N_sequences if validation is not None else 0, devices)
    if uneven:
        raise ValueError(uneven)
    check_fits(config, train_data.frame_shape, len(sequences), str(recorded.requested.device))
    jit = jit_compile_for(requested, runtime_record.get("effective") or {})
    keras.utils.set_random_seed(config.seed)
    model, prednet_kwargs = build_model(config, train_data.frame_shape, jit)
    export_model = keras.Model(model.inputs, model.outputs, name="prednet_training")

    initial = recorded.initial_weights.to_dict() if recorded.initial_weights else {}
    if first_epoch > 0:
        started = time.perf_counter()
        print(f"Loading the checkpoint of epoch {first_epoch} ({folder.path / state['checkpoint']}) ...", flush=True)
        run.restore_checkpoint(model, state)
        if state.get("best_epoch") != first_epoch:  # else model.keras is written again from this checkpoint
            check_best_model(folder, state)
        print(f"  loaded and verified in {time.perf_counter() - started:.1f} s", flush=True)

    # -- from here on the run folder is written ---------------------------
    session = _begin_session(run, config, runtime_record, first_epoch, resume, recorded_epochs)

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
    run.write()

    if first_epoch >= config.epochs:
        print(f"Nothing to do: {first_epoch} of {plural(config.epochs, 'epoch')} already completed.", flush=True)
        return _finish(run, state, starting_point.weights_checksum(model))

    batches = EpochBatches(
        sequences, config.batch_size, config.steps_per_epoch, first_epoch, config.epochs, config.seed,
        augment=config.augment,
    )
    trajectory = Trajectory(folder.path / TRAJECTORY_FILE, config.epochs * config.steps_per_epoch,
                            (recorded.study.trajectory_points if recorded.study else None) or 0)
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
    early = None
    if config.patience:
        # After the recorder: the epoch that stops training is recorded in full first.
        early = ResumableEarlyStopping(config.patience, config.epochs, best, first_epoch)
        callbacks.insert(callbacks.index(recorder) + 1, early)
    # Last: a stop asked for while an epoch ends takes effect once the epoch is recorded (interrupts.py).
    callbacks.extend(session_callbacks)
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
    with run.timed():
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
    return _finish(run, folder.read_state(), starting_point.weights_checksum(model))


def _begin_session(run, config, runtime_record, first_epoch, resume, recorded_epochs):
    """Records this process in the manifest (the first write of a training process); returns its session."""
    manifest = run.manifest
    session = {"backend": keras.backend.backend()}
    # Each process that worked on the run (the first, then every resume) is
    # listed; its runtime is spelled out only where it differs from the first's.
    runtime = manifest.setdefault("runtime", {})
    if not runtime.get("effective") and runtime_record.get("effective"):
        runtime["effective"] = runtime_record["effective"]
        manifest["fingerprint"] = runtime_record.get("fingerprint")
    for key, first in (("effective", runtime.get("effective")), ("fingerprint", manifest.get("fingerprint"))):
        value = runtime_record.get(key)
        session[key] = "same as the run's" if value is not None and comparable_runtime(value) == comparable_runtime(first) else value
    session["start_epoch"] = first_epoch
    if resume:
        manifest.setdefault("resumes", []).append(resume_entry(resume, after_epoch=first_epoch))
        if config.epochs != recorded_epochs:
            manifest["options"]["epochs"] = config.epochs
            manifest.setdefault("epochs_changed", []).append(
                {"from": recorded_epochs, "to": config.epochs, "at_epoch": first_epoch}
            )
    return run.begin(**session)


def _drop_rule(manifest, config):
    rule = (Manifest.coerce(manifest).schedule or {}).get("lr_drop_epoch_rule")
    return rule or f"dropped after epoch {config.lr_drop_epoch}"


def _finish(run, state, weights_checksum=None):
    """Records the outcome in the manifest, redraws loss.png, prints a summary.

    The result is merged into the recorded one: a field this process cannot
    recompute is kept, never dropped.
    """
    folder, manifest = run.folder, run.manifest
    history = folder.read_history()
    epochs = [r for r in history if r["kind"] == "epoch"]
    last = epochs[-1] if epochs else {}
    result = {
        "epochs_completed": int(state["epoch"]) if state else 0,
        "best_epoch": state.get("best_epoch") if state else None,
        "best_" + (state.get("monitor", "val_loss") if state else "val_loss"): state.get("best_value") if state else None,
        "final_loss": last.get("loss"),
        "final_val_loss": last.get("val_loss"),
        "train_seconds": round(sum(s.seconds or 0.0 for s in run.recorded.sessions or []), 3),
    }
    if weights_checksum:
        result["weights_checksum"] = weights_checksum
    if state and state.get("model_weights_checksum"):
        result["model_weights_checksum"] = state["model_weights_checksum"]
    manifest["result"] = dict(manifest.get("result") or {}, **result)
    run.complete(end_epoch=result["epochs_completed"])
    run.draw_loss(history)
    best = result.get("best_epoch")
    stopped = manifest["result"].get("stopped_early")
    print(
        f"Done: {plural(result['epochs_completed'], 'epoch')} completed in {folder.path}"
        + (f"; best epoch {best} ({state['monitor']} {state['best_value']:.6g}) in {folder.model_path}" if best else "")
        + (f"; stopped early at epoch {stopped['epoch']}: {stopped['reason']}" if stopped else ""),
        flush=True,
    )
    return result


def comparable_runtime(record):
    """A runtime record without what differs between any two processes (to tell a resumed process's apart)."""
    if not isinstance(record, dict):
        return record
    volatile = ("pid", "hostname", "cpu_ids")
    return {k: comparable_runtime(v) for k, v in record.items() if k not in volatile}


def check_same_data(recorded, current):
    """Refuses to continue a run whose data (`current`, the manifest's `data` record just made) is not the
    recorded one (`recorded`: its split's checksums), e.g. a file replaced since the run started."""
    if not recorded:
        return
    for split, info in current.items():
        before = (recorded.get(split) or {}).get("checksum")
        if before and before != info["checksum"]:
            raise ValueError(
                f"The {split} data changed since this run started (checksum {before[:19]}... is now "
                f"{info['checksum'][:19]}...); resume with the same data, or start a new run."
            )
