"""Training a model kind by its own protocol, counted in updates (issue 9; the kinds: issue 27; one session:
issue 38).

`prednet-train --model prednet-chainer` (the Chainer-lineage PredNet, trained
as the authors' main.py), `prednet-train --model autoencoder` (the MNIST
control) and `prednet-train --model module:function` (a user's own Keras
model, `model_kinds/user.py`) state `protocol.UpdateProtocol`; the one training
session (`session.training`) runs it here, in the training process, after
`runtime.configure`, so every runtime option applies as for Lotter's PredNet.
What differs between the kinds (data, model, protocol, records) the kind says.
Every update is reported through Keras callbacks (`callbacks.UpdateRows`,
`.TrajectorySnapshots`, `.UpdateProgressLines`): the kind's loop calls their
`on_train_begin` and `on_train_batch_end`, as fit would.
The run folder gets:

- manifest.json: options (`model_kinds.study_config.StudyConfig`), runtime, data, initial weights,
  `metric` (the protocol's number the study compares) and `result` (the
  protocol's summary);
- history.csv: one row per update (update, loss, then the protocol's record);
- initial_weights.h5 (the seed's numpy weights, or a copy of --init-weights);
- model.keras (written atomically at the end) and loss.png;
- while it trains, state.json and checkpoints/ (`UpdateCheckpoint`): removed once the run is complete,
  which needs none, so a finished run folder holds what it always held.

Checkpoints and --resume (a protocol whose kind states `can_resume`): a checkpoint is written every
`CHECKPOINT_SECONDS` of training and at the update a stop was asked at (Ctrl-C, SIGTERM: the update in
progress completes and is recorded, then the run stops; `interrupts`). `prednet-train --resume` continues
from it through the session's one path (the same option, lock and checks as Lotter's recipe: the options
as recorded, the data and its order by checksum, the checkpoint file by sha256 and its weights by checksum,
history.csv by the sha256 it had), and the continuation is bit-identical to an uninterrupted run: the
checkpoint holds what the protocol's compiled model holds (weights, the optimizer's variables and
iteration count, the Chainer window's carried state), the updates made so far are history.csv's rows, the
orders are functions of the seed, and the random numbers a model draws while it trains (a user's model's
Dropout) come from its layers' Keras random generators, whose states state.json records beside the
checkpoint ("random_generators": `save_weights` leaves them out) and the continuation restores. Where a
backend's random layers draw from its global generator instead (torch; `backends.Backend
.random_layers_draw_globally`), a model with random layers keeps no checkpoints (`UpdateCheckpoint.enabled`).
"""

import contextlib
import csv
import hashlib
import shutil
import time

from prednet_keras import backends
from prednet_keras.files.diskwrite import atomic_write, file_sha256, write_through_temporary
from prednet_keras.session import interrupts
from prednet_keras.session.bookkeeping import resume_entry
from prednet_keras.session.display import UpdateProgress
from prednet_keras.session.history import update_rows
from prednet_keras.session.records import Manifest
from prednet_keras.session.trajectory import FILE as TRAJECTORY_FILE
from prednet_keras.session.trajectory import Trajectory

__all__ = ["CHECKPOINT_SECONDS", "HELDOUT_PREDICTIONS", "UpdateCheckpoint", "run_protocol"]

HELDOUT_PREDICTIONS = "heldout_predictions.npz"
# A checkpoint after the update that ends this many seconds of training since the last one (and at a stop).
# Time, not a count of updates, because an update's cost spans four orders of magnitude (the autoencoder's
# about a millisecond, the paper's Chainer window 46 ms on an H200 and seconds on 2 CPU cores): every 5
# minutes bounds the work a kill loses whatever the run, and writing the weights with Adam's two moments
# (three times the model) that rarely costs nothing a run notices. The study's GPU runs, shorter than
# that, write none.
CHECKPOINT_SECONDS = 300


def run_protocol(run, kind, runtime_record=None, quiet=False, session_callbacks=(), resume=None, should_stop=None):
    """Trains the run that the session `run` opened by `kind`'s protocol, from the start or, with `resume`,
    from its checkpoint.

    A continued run is checked before the session writes anything: its checkpoint file (sha256) and
    history.csv (the sha256 it had when the checkpoint was written), then, the data loaded, the data and
    its order (checksums) against the run's record.

    Args:
        run: the bookkeeping.RunSession of the run folder (its manifest written by prednet-train).
        kind: the run's model kind.
        runtime_record: {"effective", "fingerprint"} from runtime.configure.
        quiet: fewer progress lines.
        session_callbacks: the session's Keras callbacks (StopOnRequest), called after each update's own.
        resume: for `prednet-train --resume`: {"command", "time"}; recorded once the run is verified.
        should_stop: the session's stop request (a function), checkpointed at before StopOnRequest stops.

    Returns:
        The manifest's `result` (the protocol's summary).
    """
    import keras

    from prednet_keras.models import starting_point
    from prednet_keras.session.callbacks import TrajectorySnapshots, UpdateCheckpoints, UpdateProgressLines, UpdateRows
    from prednet_keras.session.recipe_training import check_same_data, jit_compile_for

    folder, manifest = run.folder, run.manifest
    config = kind.config_class().from_dict(manifest["options"])
    runtime_record = runtime_record or {}
    checkpoints = kind.session_protocol.can_resume
    # A resumed run without a checkpoint (stopped before its first) starts from the beginning.
    state = folder.read_state() if checkpoints and resume is not None else None
    if state is not None:
        UpdateCheckpoint.check_files(run, state)
        # Its data is read first: nothing is written unless it is the run's.
        data, data_record = kind.load_data(config)
        check_same_data(Manifest.coerce(manifest).data, data_record)
        _check_same_order(manifest, kind.plan(config, data, kind.training_protocol(config, data))[1])
    session = run.begin(**(_resumed_session(manifest, runtime_record, _done(state)) if resume is not None else {}))
    # The manifest is written as a dict here (its new parts in the order they are made); read typed.
    recorded_runtime = Manifest.coerce(manifest).runtime
    requested = recorded_runtime.requested.to_dict() if recorded_runtime and recorded_runtime.requested else {}
    jit = jit_compile_for(requested, runtime_record.get("effective") or {})
    keras.utils.set_random_seed(config.seed)
    initial_path = folder.initial_weights_path

    if state is None:
        data, manifest["data"] = kind.load_data(config)
        initial, initial_weights = _starting_point(
            config, initial_path, lambda: kind.build(config, data), chainer_npz_ok=kind.accepts_chainer_npz
        )
    else:
        manifest["data"] = data_record
        initial, initial_weights = _recorded_starting_point(folder, manifest)
    preset = kind.training_protocol(config, data)
    total, data_order = kind.plan(config, data, preset)
    label = kind.label(config)

    manifest["initial_weights"] = initial
    manifest["seeds"] = {
        "seed": config.seed,
        "initial_weights": initial.get("seed", config.seed),
        "data_order": config.seed,
        "data_order_checksum": data_order,
    }
    # What every run of this protocol shares (the report compares only runs
    # that agree on it); the arm factors below are not part of it.
    manifest["protocol"] = kind.protocol_record(config, preset)
    study = manifest.setdefault("study", {})
    settings = kind.study_settings(config)
    if settings:
        study.setdefault("settings", {}).update(settings)
    trajectory = Trajectory(folder.path / TRAJECTORY_FILE, total, study.get("trajectory_points") or 0)
    session["jit_compile"] = jit
    if resume is not None:
        manifest.setdefault("resumes", []).append(resume_entry(resume, after_update=_done(state)))
    run.write()

    checkpoint = UpdateCheckpoint(run, kind, trajectory, state) if checkpoints else None
    done = len(checkpoint.records) if checkpoint is not None else 0
    # A continued run keeps the rows of the updates its checkpoint holds; a new one starts history.csv anew.
    history = run.open_history(kind.history_columns, fresh=not done)
    progress = UpdateProgress(label, total, every=max(1, total // (5 if quiet else 20)), done=done,
                              compiles=backends.named(keras.backend.backend()).steps_compile(jit))

    print(f"Training {label}: {total:,} updates; backend {keras.backend.backend()}.", flush=True)
    if done:
        print(f"Resuming after update {done} of {total:,}.", flush=True)
    # In the order the hooks ran before they were callbacks: the row, the trajectory, the progress line; then
    # the checkpoint, once the update is recorded; then the session's (a stop asked for is honoured once the
    # update is recorded and checkpointed).
    callbacks = [UpdateRows(history), TrajectorySnapshots(trajectory), UpdateProgressLines(progress)]
    if checkpoint is not None:
        callbacks.append(UpdateCheckpoints(checkpoint, should_stop))
    on_start, on_update = _callback_hooks([*callbacks, *session_callbacks])

    # A run that checkpoints takes a stop request at the end of the update in progress (which is then
    # recorded and checkpointed), not in its middle, where the work since the last checkpoint would be lost;
    # a second request stops at once (an update can take minutes: the first one compiles).
    stops_between_updates = (interrupts.deferred(second_stops=True) if checkpoint is not None
                             else contextlib.nullcontext())
    with run.timed(), history, stops_between_updates:
        extra = {"checkpoint": checkpoint} if checkpoint is not None else {}
        result = kind.train(config, data, preset, initial_weights=initial_weights, on_update=on_update,
                            jit_compile=jit, on_start=on_start, **extra)

    write_through_temporary(folder.model_path, result.model.save)
    manifest["metric"] = result.metric
    manifest["result"] = dict(result.summary, weights_checksum=starting_point.weights_checksum(result.model))
    heldout = kind.evaluate_heldout(config, result.model)
    if heldout is not None:
        record, predictions = heldout
        manifest["result"].update(record)
        write_through_temporary(folder.path / HELDOUT_PREDICTIONS,
                                     lambda path: _save_arrays(path, predictions))
        print(f"Held-out error (next-frame MSE, {len(predictions)} sequences no update trained on): "
              f"{record['heldout_error']:.6g}", flush=True)
    if trajectory.save():
        manifest["trajectory"] = trajectory.record()
    manifest["model"] = kind.model_record(config, result)
    run.complete()
    # A complete run needs no checkpoint: its folder holds what a run always held.
    folder.remove_checkpoints()
    run.draw_loss(update_rows(result.records))
    metric = result.metric
    print(
        f"Done: {len(result.records)} updates in {folder.path}; {metric['name']} = {metric['value']:.6g}",
        flush=True,
    )
    return result.summary


class UpdateCheckpoint:
    """The checkpoints of a run counted in updates: what its protocol continues from, and what it writes.

    state.json (as the recipe's, "update" where the recipe has "epoch") names the last checkpoint,
    checkpoints/update-NNNNNNN.weights.h5 (the compiled model's `save_weights`: the weights, the optimizer's
    variables, its iteration count among them, and the model's other state, such as the Chainer window's
    carried state), with the file's sha256, its weights' checksum and the sha256 of history.csv as it stood
    (one row per update made). Written in this order, each atomically: trajectory.npz (the snapshots so far),
    the checkpoint, state.json; older checkpoints are then removed. A kill at any moment leaves a state.json
    naming a complete checkpoint; the rows written after it are dropped when the run continues.

    Args:
        run: the bookkeeping.RunSession.
        kind: the run's model kind (its history.csv columns).
        trajectory: the run's trajectory.Trajectory (saved with each checkpoint; resumed from it).
        state: state.json of the checkpoint to continue from (checked by `check_files`), or None.

    Attributes:
        records: the records of the updates the checkpoint holds (history.csv's rows), in order.
        enabled: whether checkpoints are written: not for a model with random layers on a backend where they
            draw from its global generator (`attach` says so).
    """

    def __init__(self, run, kind, trajectory, state=None):
        self.run = run
        self.folder = run.folder
        self.trajectory = trajectory
        self.state = state
        self.model = None
        self.records = []
        if state is not None:
            self.records = _history_records(self.folder, _done(state), kind.history_columns)
            # The rows after the checkpoint's update belong to work it does not hold: they are made again.
            atomic_write(self.folder.history_path, _history_text(self.folder, _done(state)))
            if trajectory.enabled:
                trajectory.resume(_done(state))
        self.written = time.perf_counter()
        self.every = CHECKPOINT_SECONDS
        self.enabled = True

    @staticmethod
    def check_files(run, state):
        """Fails, reading only, unless `state`'s checkpoint and history.csv are the ones written with it."""
        from prednet_keras.session.bookkeeping import check_checkpoint_file
        from prednet_keras.session.folder import RunFolderError

        check_checkpoint_file(run.folder.path / state["checkpoint"], state)
        expected = state.get("history_sha256")
        if expected is not None and _sha256(_history_text(run.folder, _done(state))) != expected:
            raise RunFolderError(
                f"{run.folder.history_path} does not begin with the {_done(state)} rows it held when the "
                f"checkpoint of update {_done(state)} was written: it was changed since, so this run cannot be "
                "continued."
            )

    def attach(self, model, build=None):
        """Loads the checkpoint (if any) into `model`, the protocol's compiled model, and keeps it to checkpoint.
        `build`: builds a model whose first update would build it (called only when there is a checkpoint)."""
        import keras

        backend = backends.named(keras.backend.backend())
        if self.state is not None:
            if build is not None and not model.built:
                build()
            if _random_generators(model) and backend.random_layers_draw_globally:
                from prednet_keras.session.folder import RunFolderError

                # A checkpoint this package does not write (see below); refused as its continuation would be.
                raise RunFolderError(f"{self.folder.path} cannot be continued: {_not_checkpointed(backend)}")
            self.run.restore_checkpoint(model, self.state)
            _restore_random_generators(model, self.state, self.folder)
        elif _random_generators(model) and backend.random_layers_draw_globally:
            # Its continuation could not be the uninterrupted run: none is offered.
            self.enabled = False
            print(f"(No checkpoints, so --resume cannot continue this run: {_not_checkpointed(backend)})", flush=True)
        self.model = model

    def due(self):
        """Whether `every` seconds have passed since the last checkpoint (or the start)."""
        return self.enabled and time.perf_counter() - self.written >= self.every

    def save(self, update):
        """Checkpoints the model after `update` (its row already in history.csv); nothing when not `enabled`."""
        if not self.enabled:
            return
        from prednet_keras.models.starting_point import weights_checksum
        from prednet_keras.session.callbacks import variables_bytes

        if hasattr(self.model, "jax_state_sync"):
            # JAX's fit keeps the state outside the variables between syncs.
            self.model.jax_state_sync()
        if self.trajectory.enabled:
            # Before the checkpoint: a continued run drops the snapshots after its checkpoint's update.
            self.trajectory.save()
        path = self.folder.update_checkpoint_path(update)
        write_through_temporary(path, self.model.save_weights, needed=variables_bytes(self.model))
        state = {
            "update": int(update),
            "checkpoint": str(path.relative_to(self.folder.path)),
            "weights_checksum": weights_checksum(self.model),
            "checkpoint_sha256": file_sha256(path),
            "history_sha256": file_sha256(self.folder.history_path),
        }
        generators = _random_generator_states(self.model)
        if generators:
            state["random_generators"] = generators
        self.folder.write_state(state)
        self.folder.remove_checkpoints_except(path)
        self.written = time.perf_counter()


def _not_checkpointed(backend):
    """Why a run keeps no checkpoints: its model has random layers, which on `backend` draw from its global
    generator (backends.Backend.random_layers_draw_globally)."""
    others = " or ".join(b.name for b in backends.BACKENDS if not b.random_layers_draw_globally)
    return (f"on {backend.display_name}, Keras' random "
            f"layers (a Dropout made without a seed) draw from {backend.display_name}'s global generator, which "
            "Keras' fit also draws from as each epoch starts and ends, so no checkpoint holds where a continued "
            f"run's random numbers would be. Train it with --backend {others} to have checkpoints.")


def _random_generators(model):
    """The state variables of the model's Keras random generators (keras.random.SeedGenerator: Dropout's,
    GaussianNoise's, the random augmentation layers'), in the model's order. `model.variables` is
    `model.weights` plus these (Keras' documented difference), and `save_weights` writes only the weights
    and the optimizer's variables, so a checkpoint holds them only through `_random_generator_states`."""
    weights = {id(variable) for variable in model.weights}
    return [variable for variable in model.variables if id(variable) not in weights]


def _random_generator_states(model):
    """[{"path", "state"}] of the model's random generators (state: the generator's seed and counter, two
    integers), for state.json; empty for a model that draws no random numbers."""
    import keras

    return [{"path": variable.path, "state": [int(v) for v in keras.ops.convert_to_numpy(variable.value)]}
            for variable in _random_generators(model)]


def _restore_random_generators(model, state, folder):
    """Sets the model's random generators to the states `state` (state.json) recorded with its checkpoint,
    matched by position (a generator's path carries a name Keras numbers per process)."""
    import numpy as np

    recorded = state.get("random_generators") or []
    generators = _random_generators(model)
    if len(recorded) != len(generators):
        from prednet_keras.session.folder import RunFolderError

        raise RunFolderError(f"{folder.state_path} records the state of {len(recorded)} random generators and the "
                             f"model has {len(generators)}: this checkpoint is not of this model, so the run "
                             "cannot be continued.")
    for variable, record in zip(generators, recorded):
        variable.assign(np.asarray(record["state"], dtype=variable.dtype))


def _resumed_session(manifest, runtime_record, done):
    """A resumed process's session fields: its runtime (where it differs from the run's) and its first update."""
    from prednet_keras.session.recipe_training import comparable_runtime

    fields = {}
    runtime = manifest.get("runtime") or {}
    for key, first in (("effective", runtime.get("effective")), ("fingerprint", manifest.get("fingerprint"))):
        value = runtime_record.get(key)
        same = value is not None and comparable_runtime(value) == comparable_runtime(first)
        fields[key] = "same as the run's" if same else value
    fields["start_update"] = done
    return fields


def _done(state):
    return int(state["update"]) if state else 0


def _history_text(folder, updates):
    """history.csv's header and its first `updates` rows, as written."""
    with open(folder.history_path, encoding="utf-8", newline="") as handle:
        lines = handle.readlines()
    if len(lines) < updates + 1:
        from prednet_keras.session.folder import RunFolderError

        raise RunFolderError(f"{folder.history_path} holds {max(len(lines) - 1, 0)} rows, fewer than the {updates} "
                             "updates its checkpoint records: this run cannot be continued.")
    return "".join(lines[: updates + 1])


def _sha256(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _history_records(folder, updates, columns):
    """The records of the first `updates` updates, from history.csv (numbers as written: repr of a float)."""
    with open(folder.history_path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))[:updates]
    return [{name: _number(row.get(name)) for name in columns} for row in rows]


def _number(text):
    if text in ("", None):
        return None
    try:
        return int(text)
    except ValueError:
        return float(text)


def _check_same_order(manifest, data_order):
    recorded = (manifest.get("seeds") or {}).get("data_order_checksum")
    if recorded and recorded != data_order:
        from prednet_keras.session.folder import RunFolderError

        raise RunFolderError(f"The order of the updates changed since this run started (checksum {recorded[:19]}... "
                             f"is now {data_order[:19]}...); resume with the same data and options, or start a new run.")


def _recorded_starting_point(folder, manifest):
    """A continued run's starting point as recorded (the record, the path the protocol loads): the file is
    not written again."""
    initial = dict(manifest.get("initial_weights") or {})
    if initial.get("format") == "chainer npz":
        return initial, initial["from"]
    return initial, str(folder.path / initial.get("file", folder.initial_weights_path.name))


def _callback_hooks(callbacks):
    """The kind's `on_start(model)` and `on_update(record)`, calling the Keras callbacks `callbacks` as fit
    would: set_model and on_train_begin once, on_train_batch_end(update index, record) after each update."""

    def on_start(model):
        for callback in callbacks:
            callback.set_model(model)
            callback.on_train_begin()

    def on_update(record):
        for callback in callbacks:
            callback.on_train_batch_end(record["update"] - 1, record)

    return on_start, on_update


def _save_arrays(path, arrays):
    import numpy as np

    # Written to an open handle: np.savez given a name would add ".npz" to the temporary's.
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def _starting_point(config, path, build, chainer_npz_ok=False):
    """Writes the run's initial weights (the seed's, or a copy of --init-weights).

    Returns:
        (record for the manifest, the path the protocol starts from).
    """
    from prednet_keras.models import starting_point

    if config.init_weights:
        source = str(config.init_weights)
        if source.endswith((".npz", ".model")):
            if not chainer_npz_ok:
                raise ValueError(f"{source}: a Chainer model file can only start --model prednet-chainer.")
            # The protocol loads it (and says when it does not fit); no .h5 copy.
            return {"from": source, "format": "chainer npz"}, source
        shutil.copyfile(source, path)
        target = build()
        loaded = starting_point.load_initial_weights(target, path)
        return {
            "file": path.name,
            "from": source,
            "seed": loaded.get("seed") if isinstance(loaded, dict) else None,
            "checksum": starting_point.weights_checksum(target),
        }, str(path)
    target = build()
    starting_point.save_initial_weights(target, path, config.seed, overwrite=True)
    starting_point.load_initial_weights(target, path)
    return {
        "file": path.name,
        "from": "seed",
        "seed": config.seed,
        "checksum": starting_point.weights_checksum(target),
    }, str(path)
