"""Training a model kind without checkpoints into a run folder (issue 9; the kinds: issue 27).

`prednet-train --model prednet-chainer` (the Chainer-lineage PredNet, trained
as the authors' main.py), `prednet-train --model autoencoder` (the MNIST
control) and `prednet-train --model module:function` (a user's own Keras
model, `model_kinds/user.py`) run their kind's protocol (`model_kinds`) in the
training process (`prednet_keras.session.worker`), after `runtime.configure`, so every
runtime option applies as for Lotter's PredNet. This loop is the same for
every such kind; what differs (data, model, protocol, records) the kind says.
The run folder gets:

- manifest.json: options (`model_kinds.study_config.StudyConfig`), runtime, data, initial weights,
  `metric` (the protocol's number the study compares) and `result` (the
  protocol's summary);
- history.csv: one row per update (update, loss, then the protocol's record);
- initial_weights.h5 (the seed's numpy weights, or a copy of --init-weights);
- model.keras (written atomically at the end) and loss.png.

The protocols have no checkpoints, so these runs cannot be resumed.
"""

import shutil

from prednet_keras import model_kinds
from prednet_keras.diskwrite import write_through_temporary
from prednet_keras.session.bookkeeping import RunSession
from prednet_keras.session.display import UpdateProgress
from prednet_keras.session.history import update_rows
from prednet_keras.session.records import Manifest
from prednet_keras.session.trajectory import FILE as TRAJECTORY_FILE
from prednet_keras.session.trajectory import Trajectory

__all__ = ["HELDOUT_PREDICTIONS", "STUDY_MODELS", "run_study_training"]

HELDOUT_PREDICTIONS = "heldout_predictions.npz"

# The built-in kinds this loop trains (a user's model, named module:function, is trained here too).
STUDY_MODELS = tuple(kind.name for kind in model_kinds.kinds() if not kind.checkpoints)
HISTORY_COLUMNS = {kind.name: kind.history_columns for kind in model_kinds.kinds() if not kind.checkpoints}


def run_study_training(run_dir, runtime_record=None, quiet=False):
    """Trains the study-model run described by `run_dir`'s manifest, from the start.

    Args:
        run_dir: the run folder (its manifest written by prednet-train).
        runtime_record: {"effective", "fingerprint"} from runtime.configure.
        quiet: fewer progress lines.

    Returns:
        The manifest's `result` (the protocol's summary).
    """
    import keras

    from prednet_keras import starting_point
    from prednet_keras.session.recipe_training import jit_compile_for

    run = RunSession(run_dir)
    folder, manifest = run.folder, run.manifest
    kind = model_kinds.get(manifest["options"]["model"])
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

    def on_update(record):
        history.write(**record)
        trajectory.after_update(record["update"])
        progress(record)

    print(f"Training {label}: {total:,} updates; backend {keras.backend.backend()}.", flush=True)

    def on_start(model):
        trajectory.start(model)
        progress.start()

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
    from prednet_keras import starting_point

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
