"""Training the study's own models into a run folder (issue 9).

`prednet-train --model prednet-chainer` (the Chainer-lineage PredNet, trained
as the authors' main.py) and `prednet-train --model autoencoder` (the MNIST
control) run one of `prednet_keras.protocols`' protocols in the training
process (`prednet_keras.worker`), after `runtime.configure`, so every runtime
option applies as for Lotter's PredNet. The run folder gets:

- manifest.json: options (`StudyConfig`), runtime, data, initial weights,
  `metric` (the protocol's number the study compares) and `result` (the
  protocol's summary);
- history.csv: one row per update (update, loss, then the protocol's record);
- initial_weights.h5 (the seed's numpy weights, or a copy of --init-weights);
- model.keras (written atomically at the end) and loss.png.

The protocols have no checkpoints, so these runs cannot be resumed.
"""

import csv
import dataclasses
import os
import shutil
import time

from prednet_keras._options import OptionsRecord
from prednet_keras import runs
from prednet_keras.trajectory import FILE as TRAJECTORY_FILE
from prednet_keras.trajectory import Trajectory

__all__ = ["STUDY_MODELS", "StudyConfig", "run_study_training"]

STUDY_MODELS = ("prednet-chainer", "autoencoder")
PROTOCOLS = ("paper", "quick")
TBPTT_MODES = ("chainer", "clean")
AUTOENCODERS = ("conv", "dense")
CHAINER_DEFAULT_SIZE = (120, 160)

HISTORY_COLUMNS = {
    "prednet-chainer": ("update", "loss", "window_loss", "sequence", "frame", "frames_seen", "steps", "seconds"),
    "autoencoder": ("update", "loss", "image", "seconds"),
}


@dataclasses.dataclass
class StudyConfig(OptionsRecord):
    """Everything that defines a study-model run (the runtime aside).

    Args:
        model: "prednet-chainer" or "autoencoder".
        protocol: "paper" or "quick" (`protocols.PRESETS`).
        tbptt: "chainer" or "clean" (prednet-chainer only).
        emulate_cpu_aliasing: the original's CPU gradients (prednet-chainer only).
        autoencoder: "conv" or "dense" (autoencoder only).
        stack_sizes, r_stack_sizes, filter_size: ChainerPredNet's; None: the study's.
        data: frames (prednet-chainer; default the embedded video's train
            split) or an MNIST file/folder (autoencoder; default the embedded MNIST).
        size: (H, W) frames are resized to (prednet-chainer; default 120x160).
        seed: seed of the initial weights (and of the autoencoder's image order).
        init_weights: a starting_point .h5 (or, prednet-chainer, a Chainer .npz) to start from.
        period, bprop: prednet-chainer only: frames stepped through and frames
            per update, instead of the protocol's (a scaled-down protocol).
        images: autoencoder only: training images instead of the protocol's.
    """

    WHAT = "training options"

    model: str = "prednet-chainer"
    protocol: str = "paper"
    tbptt: str = None
    emulate_cpu_aliasing: bool = None
    autoencoder: str = None
    stack_sizes: tuple = None
    r_stack_sizes: tuple = None
    filter_size: int = None
    data: str = None
    size: tuple = None
    seed: int = 0
    init_weights: str = None
    period: int = None
    bprop: int = None
    images: int = None

    def resolved(self):
        """A copy with the model's defaults filled in, validated."""
        config = dataclasses.replace(self)
        if config.model == "prednet-chainer":
            if config.tbptt is None:
                config.tbptt = "chainer"
            if config.emulate_cpu_aliasing is None:
                config.emulate_cpu_aliasing = False
            if config.filter_size is None:
                config.filter_size = 3
            if config.size is None:
                config.size = CHAINER_DEFAULT_SIZE
        elif config.model == "autoencoder":
            if config.autoencoder is None:
                config.autoencoder = "conv"
        for name in ("stack_sizes", "r_stack_sizes", "size"):
            value = getattr(config, name)
            if value is not None:
                setattr(config, name, tuple(int(v) for v in value))
        config.validate()
        return config

    def validate(self):
        """Raises ValueError naming the first bad setting (no data is read)."""
        if self.model not in STUDY_MODELS:
            raise ValueError(f"--model must be one of {', '.join(STUDY_MODELS)}, got {self.model!r}.")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"--protocol must be one of {', '.join(PROTOCOLS)}, got {self.protocol!r}.")
        for name in ("period", "bprop", "images"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{_flag(name)} must be a whole number >= 1, got {value!r}.")
        if self.model == "autoencoder":
            if self.autoencoder not in AUTOENCODERS:
                raise ValueError(f"--autoencoder must be one of {', '.join(AUTOENCODERS)}, got {self.autoencoder!r}.")
            for name in ("tbptt", "emulate_cpu_aliasing", "stack_sizes", "r_stack_sizes", "filter_size", "size",
                         "period", "bprop"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{_flag(name)} applies to --model prednet-chainer, not to --model autoencoder.")
            return
        if self.autoencoder is not None:
            raise ValueError("--autoencoder applies to --model autoencoder, not to --model prednet-chainer.")
        if self.images is not None:
            raise ValueError("--images applies to --model autoencoder, not to --model prednet-chainer.")
        if self.tbptt not in TBPTT_MODES:
            raise ValueError(f"--tbptt must be one of {', '.join(TBPTT_MODES)}, got {self.tbptt!r}.")
        if self.filter_size < 1 or self.filter_size % 2 == 0:
            raise ValueError(f"--filter-size must be odd and >= 1, got {self.filter_size}.")
        if self.stack_sizes is not None and len(self.stack_sizes) < 1:
            raise ValueError("--stack-sizes must name at least one layer.")
        layers = len(self.stack_sizes) if self.stack_sizes is not None else 4
        if self.r_stack_sizes is not None and len(self.r_stack_sizes) != layers:
            raise ValueError(f"--r-stack-sizes has {len(self.r_stack_sizes)} values but the model has {layers} layers.")
        if len(self.size) != 2 or min(self.size) < 1:
            raise ValueError(f"--size must be HxW with positive numbers, got {self.size}.")
        from prednet_keras.frame_size import check_frame_size

        check_frame_size(self.size[0], self.size[1], layers)

    def training_protocol(self):
        """The protocols' protocol object: the preset with this config's overrides."""
        from prednet_keras import protocols

        if self.model == "prednet-chainer":
            return protocols.resolve_protocol(self.model, self.protocol, period=self.period, bprop=self.bprop)
        return protocols.resolve_protocol(self.model, self.protocol, images=self.images)

    def check_paths(self):
        """Raises FileNotFoundError for a data or weights path that does not exist."""
        for name in ("data", "init_weights"):
            value = getattr(self, name)
            if value is not None and not os.path.exists(value):
                raise FileNotFoundError(2, f"{_flag(name)}: no such file or folder", value)

    def model_config(self):
        """ChainerPredNet arguments (stack_sizes None: the study's, with the data's channels)."""
        config = {"stack_sizes": self.stack_sizes, "filter_size": self.filter_size}
        if self.r_stack_sizes is not None:
            config["R_stack_sizes"] = self.r_stack_sizes
        return config


def _flag(name):
    return "--" + name.replace("_", "-")


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class _History:
    """history.csv, one flushed row per update."""

    def __init__(self, path, columns):
        self.columns = columns
        self._handle = open(path, "w", newline="", encoding="utf-8")
        self._writer = csv.DictWriter(self._handle, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
        self._writer.writeheader()
        self._handle.flush()

    def write(self, record):
        self._writer.writerow({k: runs._format_value(record.get(k)) for k in self.columns})
        self._handle.flush()

    def close(self):
        self._handle.close()


class _Progress:
    def __init__(self, label, every, quiet):
        self.label = label
        self.every = max(1, every)
        self.quiet = quiet
        self.started = time.perf_counter()

    def __call__(self, record, total):
        number = record["update"]
        if number % self.every == 0 or number == total:
            elapsed = time.perf_counter() - self.started
            print(f"{self.label} update {number}/{total}: loss {record['loss']:.6g} ({elapsed:.1f} s)", flush=True)


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

    from prednet_keras import protocols, starting_point
    from prednet_keras.train import jit_compile_for

    folder = runs.RunFolder(run_dir)
    folder.remove_temporaries()
    manifest = folder.read_manifest()
    config = StudyConfig.from_dict(manifest["options"])
    runtime_record = runtime_record or {}
    session = {"started": _now(), "pid": os.getpid()}
    manifest.setdefault("sessions", []).append(session)
    manifest["status"] = "running"
    folder.write_manifest(manifest)
    requested = (manifest.get("runtime") or {}).get("requested") or {}
    jit = jit_compile_for(requested, runtime_record.get("effective") or {})
    keras.utils.set_random_seed(config.seed)
    initial_path = folder.initial_weights_path

    if config.model == "prednet-chainer":
        from prednet_keras import data as pdata
        from prednet_keras.train import _describe_data

        origin = config.data or "embedded:train"
        print(f"Loading frames ({'embedded real video' if config.data is None else config.data}) ...", flush=True)
        dataset = pdata.load_frames(config.data or pdata.embedded_dataset("train"), size=config.size)
        manifest["data"] = {"train": _describe_data(dataset, origin)}
        model_config = config.model_config()
        initial, initial_weights = _starting_point(
            config,
            initial_path,
            lambda: protocols.build_chainer_prednet(dataset.frame_shape, model_config),
            chainer_npz_ok=True,
        )
        preset = config.training_protocol()
        windows, _ = protocols.plan_windows(
            [len(s) for s in protocols.chainer_sequences(dataset)], preset.period, preset.bprop
        )
        total = len(windows)
        # main.py's order: the sequences in turn, cycled; the windows say it all.
        data_order = starting_point.order_checksum(
            [v for w in windows for v in (w.sequence, w.first_step, w.last_step)]
        )
        label = f"prednet-chainer ({config.protocol}, tbptt {config.tbptt})"
    else:
        from prednet_keras import autoencoder as ae
        from prednet_keras.data import embedded_mnist_path, load_mnist

        print(f"Loading MNIST ({'embedded copy' if config.data is None else config.data}) ...", flush=True)
        mnist = load_mnist(config.data)
        manifest["data"] = _describe_mnist(
            mnist, config.data or f"embedded:{os.path.basename(str(embedded_mnist_path()))}"
        )
        initial, initial_weights = _starting_point(config, initial_path, lambda: ae.build_autoencoder(config.autoencoder))
        preset = config.training_protocol()
        total = preset.images
        label = f"autoencoder {config.autoencoder} ({config.protocol})"
        order = protocols.autoencoder_order(len(mnist[0][0]), preset.images, config.seed)
        data_order = starting_point.order_checksum(order)

    manifest["initial_weights"] = initial
    manifest["seeds"] = {
        "seed": config.seed,
        "initial_weights": initial.get("seed", config.seed),
        "data_order": config.seed,
        "data_order_checksum": data_order,
    }
    # What every run of this protocol shares (the report compares only runs
    # that agree on it); the arm factors below are not part of it.
    manifest["protocol"] = _protocol_record(config, preset)
    study = manifest.setdefault("study", {})
    if config.model == "prednet-chainer":
        study.setdefault("settings", {}).update(
            tbptt=config.tbptt, emulate_cpu_aliasing=bool(config.emulate_cpu_aliasing)
        )
    trajectory = Trajectory(folder.path / TRAJECTORY_FILE, total, study.get("trajectory_points") or 0)
    session["jit_compile"] = jit
    folder.write_manifest(manifest)

    history = _History(folder.history_path, HISTORY_COLUMNS[config.model])
    progress = _Progress(label, every=max(1, total // (5 if quiet else 20)), quiet=quiet)

    def on_update(record):
        history.write(record)
        trajectory.after_update(record["update"])
        progress(record, total)

    print(f"Training {label}; backend {keras.backend.backend()}.", flush=True)
    started = time.perf_counter()
    try:
        if config.model == "prednet-chainer":
            result = protocols.train_chainer_prednet(
                dataset,
                model_config=model_config,
                protocol=preset,
                tbptt=config.tbptt,
                emulate_cpu_aliasing=config.emulate_cpu_aliasing,
                seed=config.seed,
                initial_weights=initial_weights,
                on_update=on_update,
                jit_compile=jit,
                on_start=trajectory.start,
            )
        else:
            result = protocols.train_autoencoder(
                config.autoencoder,
                protocol=preset,
                seed=config.seed,
                initial_weights=initial_weights,
                on_update=on_update,
                mnist=mnist,
                jit_compile=jit,
                on_start=trajectory.start,
            )
    finally:
        history.close()
        session["seconds"] = round(time.perf_counter() - started, 3)

    runs.write_through_temporary(folder.model_path, result.model.save)
    manifest["metric"] = result.metric
    manifest["result"] = dict(result.summary, weights_checksum=starting_point.weights_checksum(result.model))
    if trajectory.save():
        manifest["trajectory"] = trajectory.record()
    manifest["model"] = {
        "name": config.model,
        "parameters": int(result.summary.get("parameters", 0)),
        "config": result.summary.get("model_config") or {"autoencoder": config.autoencoder},
    }
    manifest["status"] = "complete"
    session["ended"] = _now()
    folder.write_manifest(manifest)
    try:
        rows = [
            {"kind": "step", "epoch": 1, "step": r["update"], "global_step": r["update"], "loss": r["loss"]}
            for r in result.records
        ]
        runs.plot_history(rows, folder.loss_plot_path, title=folder.path.name)
    except Exception as error:  # a plot is a convenience, never a reason to fail a finished run
        print(f"(loss.png not drawn: {error})", flush=True)
    metric = result.metric
    print(
        f"Done: {len(result.records)} updates in {folder.path}; {metric['name']} = {metric['value']:.6g}",
        flush=True,
    )
    return result.summary


def _protocol_record(config, preset):
    """The manifest's `protocol`: what every run of one study protocol shares
    (not the seed, not the arm factors tbptt and emulate_cpu_aliasing)."""
    record = {"model": config.model, "preset": dataclasses.asdict(preset)}
    if config.model == "prednet-chainer":
        record.update(model_config=config.model_config(), size=list(config.size))
    else:
        record["autoencoder"] = config.autoencoder
    return record


def _describe_mnist(mnist, origin):
    import hashlib

    import numpy as np

    (x_train, y_train), (x_test, y_test) = mnist
    digest = hashlib.sha256()
    for array in (x_train, y_train, x_test, y_test):
        digest.update(np.ascontiguousarray(array).tobytes())
    return {
        "train": {"source": origin, "images": int(len(x_train)), "checksum": digest.hexdigest()},
        "test": {"source": origin, "images": int(len(x_test))},
    }


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
