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
- model.keras (written atomically at the end) and loss.png.

The protocol states that it keeps no checkpoints (`can_resume` False), so these runs start anew.
"""

import shutil

from prednet_keras.files.diskwrite import write_through_temporary
from prednet_keras.session.display import UpdateProgress
from prednet_keras.session.history import update_rows
from prednet_keras.session.records import Manifest
from prednet_keras.session.trajectory import FILE as TRAJECTORY_FILE
from prednet_keras.session.trajectory import Trajectory

__all__ = ["HELDOUT_PREDICTIONS", "run_protocol"]

HELDOUT_PREDICTIONS = "heldout_predictions.npz"


def run_protocol(run, kind, runtime_record=None, quiet=False, session_callbacks=()):
    """Trains the run that the session `run` opened by `kind`'s protocol, from the start.

    Args:
        run: the bookkeeping.RunSession of the run folder (its manifest written by prednet-train).
        kind: the run's model kind.
        runtime_record: {"effective", "fingerprint"} from runtime.configure.
        quiet: fewer progress lines.
        session_callbacks: the session's Keras callbacks (StopOnRequest), called after each update's own.

    Returns:
        The manifest's `result` (the protocol's summary).
    """
    import keras

    from prednet_keras.models import starting_point
    from prednet_keras.session.callbacks import TrajectorySnapshots, UpdateProgressLines, UpdateRows
    from prednet_keras.session.recipe_training import jit_compile_for

    folder, manifest = run.folder, run.manifest
    config = kind.config_class().from_dict(manifest["options"])
    runtime_record = runtime_record or {}
    session = run.begin()
    # The manifest is written as a dict here (its new parts in the order they are made); read typed.
    recorded_runtime = Manifest.coerce(manifest).runtime
    requested = recorded_runtime.requested.to_dict() if recorded_runtime and recorded_runtime.requested else {}
    jit = jit_compile_for(requested, runtime_record.get("effective") or {})
    keras.utils.set_random_seed(config.seed)
    initial_path = folder.initial_weights_path

    data, manifest["data"] = kind.load_data(config)
    initial, initial_weights = _starting_point(
        config, initial_path, lambda: kind.build(config, data), chainer_npz_ok=kind.accepts_chainer_npz
    )
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
    run.write()

    # A run of a protocol cannot resume: its history starts anew.
    history = run.open_history(kind.history_columns, fresh=True)
    progress = UpdateProgress(label, total, every=max(1, total // (5 if quiet else 20)))

    print(f"Training {label}: {total:,} updates; backend {keras.backend.backend()}.", flush=True)
    # In the order the hooks ran before they were callbacks: the row, the trajectory, the progress line; then
    # the session's (a stop asked for is honoured once the update is recorded).
    on_start, on_update = _callback_hooks([UpdateRows(history), TrajectorySnapshots(trajectory),
                                           UpdateProgressLines(progress), *session_callbacks])

    with run.timed(), history:
        result = kind.train(config, data, preset, initial_weights=initial_weights, on_update=on_update,
                            jit_compile=jit, on_start=on_start)

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
    run.draw_loss(update_rows(result.records))
    metric = result.metric
    print(
        f"Done: {len(result.records)} updates in {folder.path}; {metric['name']} = {metric['value']:.6g}",
        flush=True,
    )
    return result.summary


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
