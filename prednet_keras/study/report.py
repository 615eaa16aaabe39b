"""`prednet-study report`: run folders from one or many machines -> one report.

    report = make_report(["results-cpu-box", "results-gpu-box"], "report/")

Runs are found under every folder given (at any depth; a run folder is a
folder with manifest.json) or in every tar archive given (a packed study's
runs.tar.xz, archive.py), merged, and grouped twice:

- by protocol: what was trained and how (model, schedule, data checksums, and
  the study's `protocol` record). Runs of different protocols are never
  compared; each protocol gets its own section.
- by configuration: the runtime asked for (backend, device kind, threads,
  interop threads, deterministic, cuDNN, TF32, oneDNN, XLA), any extra arm
  factors the study declares (manifest study.settings), and the machine it
  ran on (CPU model, GPU model for GPU runs, backend/Keras/CUDA/cuDNN
  versions). So the same settings on a CPU box and a GPU box are two
  configurations, and two identical boxes are one.

What is read from each run folder (see docs/study-statistics.md, "What the
report reads"): manifest.json (status, runtime.requested/effective,
fingerprint, seeds, initial_weights.checksum, model, schedule, data, result,
metric, metrics, protocol, study) and history.csv; optionally the final checkpoint
(for a weights checksum the manifest lacks) and trajectory.npz (divergence).

Writes report.md, report.json, loss_curves.png, final_metric.png and, when runs
store trajectories, divergence.png (prefixed P1-, P2-, ... with several protocols).
"""

import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import time
from pathlib import Path

import numpy as np

from prednet_keras import runs as run_folders
from prednet_keras.study import archive, stats

__all__ = [
    "ReportOptions",
    "Run",
    "build_report",
    "curve_checksum",
    "find_run_folders",
    "load_run",
    "make_report",
    "render_markdown",
    "weights_file_checksum",
]

REPORT_MD = "report.md"
REPORT_JSON = "report.json"
TRAJECTORY = "trajectory.npz"
# "last_steps:N": the mean of the last N per-step losses in history.csv (the
# paper's metric was the mean loss of the last 50 updates).
_LAST_STEPS = re.compile(r"^last_steps:(\d+)$")
# The runtime fields that make a configuration (RuntimeConfig's, less `strict`,
# which only decides whether a missing switch is an error).
SETTINGS = ("backend", "device", "threads", "interop_threads", "deterministic", "cudnn", "tf32", "onednn", "xla")
PLOT_BINS = 100


@dataclasses.dataclass
class ReportOptions:
    """How the report computes its statistics.

    Args:
        metric: the per-run number compared: the name of the manifests'
            `metric` record, a key of `metrics` (or `result`), or
            "last_steps:N". None: `protocol.metric`, else `metric.name`, else
            the only key of `metrics`, else result.final_loss.
        alpha: level of every test (family-wise across pairs, and across
            checkpoints within a pair for curves).
        power: the power the seeds-needed estimates aim for.
        margin: a fixed equivalence margin in the metric's units; None:
            margin_sd x the pooled seed SD.
        margin_sd: see margin.
        checkpoints: checkpoints the loss curves are tested at (equal bins of
            the per-step losses, each the mean over its bin).
        curve_test: "maxt" (max-t permutation) or "holm".
        permutations: permutations for the max-t curve test.
        seed: seed of the permutations (a report repeats exactly).
        plots: write the PNG plots.
    """

    metric: str = None
    alpha: float = stats.ALPHA
    power: float = stats.POWER
    margin: float = None
    margin_sd: float = stats.MARGIN_SD
    checkpoints: int = 10
    curve_test: str = "maxt"
    permutations: int = stats.PERMUTATIONS
    seed: int = 0
    plots: bool = True

    def validate(self):
        """Raises ValueError naming the first bad option."""
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {self.alpha}.")
        if not 0 < self.power < 1:
            raise ValueError(f"power must be in (0, 1), got {self.power}.")
        if self.margin is not None and not self.margin > 0:
            raise ValueError(f"The margin must be > 0, got {self.margin}.")
        if not self.margin_sd > 0:
            raise ValueError(f"margin_sd must be > 0, got {self.margin_sd}.")
        if self.curve_test not in ("maxt", "holm"):
            raise ValueError(f"curve_test must be 'maxt' or 'holm', got {self.curve_test!r}.")
        if self.checkpoints < 1 or self.permutations < 1:
            raise ValueError("checkpoints and permutations must be >= 1.")
        if self.metric is not None and not self.metric.strip():
            raise ValueError("The metric name is empty.")


# ------------------------------------------------------------------ run folders


def find_run_folders(directory):
    """Every run folder at or under `directory` (a run folder is not searched inside).

    Args:
        directory: a run folder, a folder of run folders, or a tree of them.

    Returns:
        sorted list of Paths.
    """
    directory = Path(directory)
    if run_folders.is_run_folder(directory):
        return [directory]
    found = []
    for root, dirs, _files in os.walk(directory):
        root = Path(root)
        if run_folders.is_run_folder(root):
            found.append(root)
            dirs[:] = []
        else:
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    return sorted(found)


def curve_checksum(history):
    """sha256 of a run's loss curve: every history row's numbers except the
    wall-clock seconds, so two runs with bit-identical losses hash alike.

    Args:
        history: rows as from RunFolder.read_history.
    """
    digest = hashlib.sha256()
    for row in history:
        values = tuple((key, row[key]) for key in sorted(row) if key != "seconds")
        digest.update(repr(values).encode("utf-8") + b"\n")
    return digest.hexdigest()


def weights_file_checksum(path):
    """sha256 over the arrays of an HDF5 weights file (names, dtypes, shapes,
    bytes, in name order), not over the file bytes, which HDF5 may lay out
    differently for the same arrays.

    Args:
        path: a .weights.h5 checkpoint.

    Returns:
        hex digest, or None when the file cannot be read.
    """
    try:
        import h5py
    except ImportError:
        return None
    digest = hashlib.sha256()
    try:
        with h5py.File(path, "r") as handle:
            names = []
            handle.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
            for name in sorted(names):
                array = np.asarray(handle[name][()])
                array = np.ascontiguousarray(array)
                if array.dtype.byteorder not in ("=", "|", "<"):
                    array = array.astype(array.dtype.newbyteorder("<"))
                digest.update(name.encode("utf-8") + b"\0" + f"{array.dtype.str}{array.shape}".encode() + b"\0")
                digest.update(array.tobytes())
    except (OSError, ValueError, KeyError):
        return None
    return digest.hexdigest()


@dataclasses.dataclass
class Run:
    """What the report uses of one run folder.

    Args:
        path: the run folder.
        manifest: its manifest.
        history: its history rows.
        source: the folder or archive (given on the command line) it was found under.
        where: how the report names the run: its path, or ARCHIVE:MEMBER for a
            run read from an archive (`path` is then in a temporary folder).
    """

    path: Path
    manifest: dict
    history: list
    source: str = ""
    where: str = ""

    def __post_init__(self):
        self.where = self.where or str(self.path)
        m = self.manifest
        runtime = m.get("runtime") or {}
        self.requested = runtime.get("requested") or {}
        self.effective = runtime.get("effective") or {}
        self.status = m.get("status", "unknown")
        seeds = m.get("seeds") or {}
        self.seed = seeds.get("seed", (m.get("options") or {}).get("seed"))
        study = m.get("study") or {}
        self.replicate = study.get("replicate")
        self.perturbation = study.get("perturbation")
        self.name_hint = study.get("configuration")
        self.settings = configuration_settings(self.requested, self.effective)
        # Factors of an arm that are not runtime settings (e.g. a training-code
        # switch such as emulate_cpu_aliasing): configuration, not protocol.
        for key, value in sorted((study.get("settings") or {}).items()):
            self.settings.setdefault(str(key), value)
        self.machine = machine_identity(m, self.settings)
        self.protocol = protocol_identity(m)
        self.config_key = _canonical({"settings": self.settings, "machine": self.machine})
        self.protocol_key = _canonical(self.protocol)
        self.claims_determinism = bool(self.settings.get("deterministic"))
        steps = [r for r in self.history if r.get("kind") == "step" and r.get("global_step") is not None]
        if not steps and self.history and "update" in self.history[0]:
            # The study models' history: one row per update, no kind column.
            steps = [dict(r, global_step=int(r["update"])) for r in self.history if r.get("update") is not None]
        steps.sort(key=lambda r: r["global_step"])
        self.steps = np.array([r["global_step"] for r in steps], dtype=np.int64)
        self.losses = np.array([r["loss"] if r["loss"] is not None else math.nan for r in steps], dtype=float)
        self.curve_checksum = curve_checksum(self.history) if self.history else None
        self.initial_checksum = (m.get("initial_weights") or {}).get("checksum")
        self._weights_checksum = None

    @property
    def weights_checksum_source(self):
        """Where weights_checksum came from: "manifest" or "checkpoint"."""
        self.weights_checksum  # noqa: B018 (computes it)
        return self._weights_checksum[0]

    @property
    def weights_checksum(self):
        """Checksum of the final weights: the manifest's result.weights_checksum,
        else computed from the last checkpoint named by state.json."""
        if self._weights_checksum is None:
            recorded = (self.manifest.get("result") or {}).get("weights_checksum")
            if recorded:
                self._weights_checksum = ("manifest", str(recorded))
            else:
                self._weights_checksum = ("checkpoint", self._checkpoint_checksum())
        return self._weights_checksum[1]

    def _checkpoint_checksum(self):
        folder = run_folders.RunFolder(self.path)
        try:
            state = folder.read_state()
        except (run_folders.RunFolderError, KeyError):
            return None
        if not state:
            return None
        return weights_file_checksum(self.path / state["checkpoint"])

    def metric(self, name):
        """The run's value of metric `name` (see ReportOptions.metric), or None."""
        match = _LAST_STEPS.match(name)
        if match:
            count = int(match.group(1))
            if count < 1 or self.losses.size < count:
                return None
            value = float(np.mean(self.losses[-count:]))
            return value if math.isfinite(value) else None
        record = self.manifest.get("metric")
        if isinstance(record, dict) and record.get("name") == name:
            value = record.get("value")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                return float(value)
        for section in ("metrics", "result"):
            value = (self.manifest.get(section) or {}).get(name)
            if isinstance(value, dict):
                value = value.get("value")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                return float(value)
        return None

    @property
    def trajectory_path(self):
        """The run's trajectory file (manifest trajectory.file, else trajectory.npz), or None."""
        record = self.manifest.get("trajectory") or {}
        path = self.path / (record.get("file") or TRAJECTORY)
        return path if path.is_file() else None

    def trajectory(self):
        """(steps, values (K, D), as stored) from the run's trajectory file, or None."""
        path = self.trajectory_path
        if path is None:
            return None
        with np.load(path) as data:
            steps = np.asarray(data["steps"]).astype(np.int64).ravel()
            values = np.asarray(data["values"]).reshape(len(steps), -1)
        return steps, values


def load_run(path, source="", where=""):
    """Reads one run folder.

    Args:
        path: the run folder.
        source: the folder or archive it was found under (recorded in the report).
        where: the name the report gives the run (default: its path).
    """
    folder = run_folders.RunFolder(path)
    return Run(Path(path), folder.read_manifest(), folder.read_history(), str(source), str(where))


def _canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def configuration_settings(requested, effective):
    """The runtime settings that define a configuration.

    The requested values are used: they are what the study varies, and the
    worker refuses to train when one did not take effect. A setting left to
    the backend's default (None) stays None; its effective value is shown in
    the report and is a function of the machine and software, which are part
    of the configuration too.

    Args:
        requested: manifest runtime.requested.
        effective: manifest runtime.effective (used only without a request).
    """
    source = requested or {}
    out = {}
    for key in SETTINGS:
        value = source.get(key)
        if not source and key in ("backend", "device", "deterministic"):
            value = effective.get(key)
        out[key] = value
    # Left out at float32 (and in manifests from before the option), so that earlier
    # configurations keep their identity and labels; named when it differs.
    if source.get("precision") not in (None, "float32"):
        out["precision"] = source["precision"]
    # gpu:0 and gpu:1 of one machine are the same kind of device; which model
    # it is goes into the machine identity.
    if isinstance(out["device"], str):
        out["device"] = "gpu" if out["device"].split(":")[0] in ("gpu", "cuda") else out["device"].split(":")[0]
    return out


def _gpu_names(manifest, effective):
    smi = ((manifest.get("fingerprint") or {}).get("gpu") or {}).get("nvidia_smi") or {}
    gpus = smi.get("gpus") or []
    visible = effective.get("cuda_visible_devices")
    if visible not in (None, ""):
        chosen = [g for g in gpus if str(g.get("index")) in str(visible).split(",") or g.get("uuid") in str(visible)]
        gpus = chosen or gpus
    names = sorted({g.get("name") for g in gpus if g.get("name")})
    if names:
        return names
    framework = ((manifest.get("fingerprint") or {}).get("gpu") or {})
    for info in framework.values():
        if isinstance(info, dict):
            for device in info.get("devices") or []:
                if isinstance(device, dict) and (device.get("device_name") or device.get("name")):
                    names.append(device.get("device_name") or device.get("name"))
    return sorted(set(names))


def machine_identity(manifest, settings):
    """The hardware and software a run's configuration includes.

    Args:
        manifest: the run's manifest.
        settings: its configuration_settings.

    Returns:
        dict: cpu (model), gpu (models used, GPU runs only), backend_version,
        keras_version, and cuda/cudnn for GPU runs.
    """
    fingerprint = manifest.get("fingerprint") or {}
    effective = (manifest.get("runtime") or {}).get("effective") or {}
    out = {
        "cpu": (fingerprint.get("cpu") or {}).get("model"),
        "backend_version": effective.get("backend_version"),
        "keras_version": effective.get("keras_version"),
    }
    if settings.get("device") == "gpu":
        out["gpu"] = _gpu_names(manifest, effective)
        backend_info = (fingerprint.get("gpu") or {}).get(settings.get("backend") or "") or {}
        out["cuda"] = backend_info.get("cuda")
        out["cudnn"] = backend_info.get("cudnn")
    return out


# Manifest parts that define what was trained; everything run-specific (seed,
# paths, times, jit_compile, which follows the runtime) is left out.
_MODEL_KEYS = ("name", "layer", "kwargs", "frame_shape", "nt", "layer_loss_weights", "time_loss_weights")
_SCHEDULE_KEYS = ("epochs", "steps_per_epoch", "batch_size", "optimizer", "lr", "lr_drop_epoch", "lr_after_drop",
                  "loss", "monitor")
_OPTION_KEYS = ("model", "stack_sizes", "r_stack_sizes", "filter_size", "nt", "batch_size", "epochs",
                "steps_per_epoch", "lr", "lr_drop_epoch", "lr_drop_factor", "layer_loss", "val_sequences",
                "val_fraction", "size")


def protocol_identity(manifest):
    """What was trained and how: runs compared with each other must agree on it.

    Args:
        manifest: the run's manifest.

    Returns:
        dict: protocol (the study's record, if any), model, schedule (from the
        manifest, or from options for a run that never started) and data
        (checksum per split).
    """
    model = manifest.get("model") or {}
    schedule = manifest.get("schedule") or {}
    options = manifest.get("options") or {}
    out = {"protocol": manifest.get("protocol")}
    if model or schedule:
        out["model"] = {k: model.get(k) for k in _MODEL_KEYS}
        if isinstance(out["model"]["kwargs"], dict):
            # Unrolling changes how the time loop is computed, not what is trained
            # (like --xla), and runs recorded before the option have no such key.
            out["model"]["kwargs"] = {k: v for k, v in out["model"]["kwargs"].items() if k != "unroll"}
        out["schedule"] = {k: schedule.get(k) for k in _SCHEDULE_KEYS}
    else:
        out["options"] = {k: options.get(k) for k in _OPTION_KEYS}
    # Augmented data is another protocol; runs without augmentation (and those
    # recorded before the option existed) carry no key, so they stay one protocol.
    augment = schedule.get("augment") if (model or schedule) else options.get("augment")
    if augment:
        out["augment"] = list(augment)
    out["data"] = {split: (info or {}).get("checksum") for split, info in sorted((manifest.get("data") or {}).items())}
    return out


# -------------------------------------------------------------- configurations


def _on_off(value):
    return "on" if value else "off"


_BACKEND_NAMES = {"jax": "JAX", "torch": "PyTorch", "tensorflow": "TensorFlow"}


def _machine_name(settings, machine):
    """The device a configuration ran on: its GPU models, else its CPU model."""
    return ", ".join(machine.get("gpu") or []) if settings.get("device") == "gpu" else machine.get("cpu")


def describe_precision(settings, effective):
    """What float32 convolutions and matrix products ran in, from the effective settings.

    A device, a library and a precision change together when a CPU run is
    compared with a GPU run: JAX and PyTorch use TF32 on NVIDIA GPUs by
    default, which no CPU has, so the label says it.

    Args:
        settings: configuration_settings (the requested tf32 is None for the default).
        effective: manifest runtime.effective (tf32, tf32_applies).
    """
    if settings.get("precision") == "mixed_bfloat16":
        return "bfloat16 convolutions (mixed_bfloat16)"
    if settings.get("device") != "gpu" or effective.get("tf32_applies") is False:
        return "float32"
    tf32 = effective.get("tf32", settings.get("tf32"))
    default = " (default)" if settings.get("tf32") is None else ""
    if tf32 is True:
        return "TF32 on" + default
    if tf32 is False:
        return "TF32 off" + default
    if isinstance(tf32, str) and "conv True" in tf32 and "matmul False" in tf32:
        return "TF32 convolutions" + default
    return f"TF32 {tf32 if tf32 is not None else 'unknown'}" + default


def describe_settings(settings, machine, effective=None):
    """A one-line human label of a configuration: library, device, switches, precision, machine.

    Args:
        settings: configuration_settings.
        machine: machine_identity.
        effective: manifest runtime.effective of one of its runs (for the precision).
    """
    backend = settings.get("backend")
    library = _BACKEND_NAMES.get(backend, str(backend or "?"))
    if machine.get("backend_version"):
        library += f" {machine['backend_version']}"
    where = _machine_name(settings, machine)
    parts = [library, f"{str(settings.get('device') or '?').upper()} ({where or 'unknown machine'})"]
    threads = settings.get("threads")
    if threads is not None:
        parts.append(f"{threads} thread{'s' if threads != 1 else ''}")
    if settings.get("interop_threads") is not None:
        parts.append(f"interop {settings['interop_threads']}")
    if settings.get("deterministic"):
        parts.append("deterministic")
    if settings.get("cudnn") is False:
        parts.append("cuDNN off")
    parts.append(describe_precision(settings, effective or {}))
    for key, name in (("onednn", "oneDNN"), ("xla", "XLA")):
        if settings.get(key) is not None:
            parts.append(f"{name} {_on_off(settings[key])}")
    parts += [f"{key}={value}" for key, value in settings.items() if key not in SETTINGS + ("precision",)]
    return ", ".join(parts)


def _slug(text):
    return re.sub(r"[^a-z0-9.]+", "-", str(text).lower()).strip("-")


def _generated_name(settings, varying):
    """A configuration name from its settings, for runs that carry none (or several): the
    backend and device, and the settings in which the unnamed configurations differ."""
    parts = [str(settings.get("backend") or "unknown"), str(settings.get("device") or "unknown")]
    threads = settings.get("threads")
    if threads is not None and "threads" in varying:
        parts.append(f"{threads}-thread{'s' if threads != 1 else ''}")
    if settings.get("interop_threads") is not None and "interop_threads" in varying:
        parts.append(f"interop-{settings['interop_threads']}")
    if settings.get("deterministic") and "deterministic" in varying:
        parts.append("deterministic")
    if settings.get("cudnn") is False and "cudnn" in varying:
        parts.append("no-cudnn")
    for key in ("tf32", "onednn", "xla"):
        if settings.get(key) is not None and key in varying:
            parts.append(key if settings[key] else f"no-{key}")
    for key in sorted(k for k in settings if k not in SETTINGS and k in varying):
        value = settings[key]
        parts.append(_slug(key) if value is True else f"no-{_slug(key)}" if value is False else
                     f"{_slug(key)}-{_slug(value)}")
    return "-".join(parts)


def _name_configurations(records):
    """Gives every configuration record an id: the name its runs' spec gave it
    (study.configuration), else one made from its settings; the machine is
    added where that leaves two alike. Unique within the report."""
    counts = {}
    for record in records:
        for name in record["names"]:
            counts[name] = counts.get(name, 0) + 1
    for record in records:
        # Runs merged from two studies may carry two names for one configuration:
        # one that no other configuration uses names it. A name that several
        # configurations share (one spec run on two machines) gets the machine below.
        own = [name for name in record["names"] if counts[name] == 1]
        record["id"] = own[0] if own else (record["names"][0] if record["names"] else None)
    unnamed = [r for r in records if r["id"] is None]
    varying = {key for key in {k for r in unnamed for k in r["settings"]}
               if len({_canonical(r["settings"].get(key)) for r in unnamed}) > 1}
    for record in unnamed:
        record["id"] = _generated_name(record["settings"], varying)
    taken = {}
    for record in records:
        taken.setdefault(record["id"], []).append(record)
    for name, same in taken.items():
        if len(same) > 1:
            # Same settings on other hardware or software: the machine tells them apart.
            for record in same:
                where = _machine_name(record["settings"], record["machine"])
                record["id"] = f"{name}@{_slug(where or 'unknown')[:24]}"
    final = {}
    for record in sorted(records, key=lambda r: (r["id"], r["label"], r["key"])):
        if record["id"] in final:
            # Nothing else differs in a name: number them in a fixed order.
            number = 2
            while f"{record['id']}-{number}" in final:
                number += 1
            record["id"] = f"{record['id']}-{number}"
        final[record["id"]] = record


def _configurations(runs):
    """Configuration records (id, label, names, key, settings, machine, runs), sorted by id."""
    groups = {}
    for run in runs:
        groups.setdefault(run.config_key, []).append(run)
    records = []
    for key, members in groups.items():
        first = members[0]
        names = sorted({r.name_hint for r in members if r.name_hint})
        records.append({
            "key": key,
            "label": describe_settings(first.settings, first.machine, first.effective),
            "names": names,
            "name": names[0] if len(names) == 1 else None,
            "settings": first.settings,
            "machine": first.machine,
            "effective": {k: first.effective.get(k) for k in ("threads", "interop_threads", "deterministic",
                                                                "cudnn", "tf32", "tf32_applies", "onednn",
                                                                "jit_compile")},
            "runs": members,
        })
    labels = {}
    for record in records:
        labels.setdefault(record["label"], []).append(record)
    for label, same in labels.items():
        if len(same) > 1:
            # Same settings, library version and hardware: the rest of the software tells them apart.
            for record in same:
                m = record["machine"]
                extra = [f"keras {m.get('keras_version')}"] + [f"{k} {m[k]}" for k in ("cuda", "cudnn") if m.get(k)]
                record["label"] = f"{label} ({', '.join(extra)})"
    if len({r["label"] for r in records}) != len(records):
        for record in records:
            record["label"] += f" #{hashlib.sha256(record['key'].encode()).hexdigest()[:6]}"
    _name_configurations(records)
    records.sort(key=lambda r: r["id"])
    return records


def _run_sort_key(run):
    return (str(type(run.seed)), run.seed if run.seed is not None else -1,
            run.replicate if isinstance(run.replicate, (int, float)) else math.inf, run.where)


# ------------------------------------------------------------------- curves


def _binned(run, edges):
    """Mean per-step loss in each bin (edges[i], edges[i+1]] of global steps."""
    values = np.full(len(edges) - 1, math.nan)
    for i in range(len(edges) - 1):
        inside = (run.steps > edges[i]) & (run.steps <= edges[i + 1])
        if inside.any():
            values[i] = float(np.mean(run.losses[inside]))
    return values


def _bin_edges(last_step, bins):
    bins = max(1, min(bins, last_step))
    return np.unique(np.round(np.linspace(0, last_step, bins + 1)).astype(np.int64))


def _per_seed_curves(config_runs, edges):
    """{seed: curve}, replicates averaged; runs without a full curve are skipped."""
    by_seed = {}
    for run in config_runs:
        curve = _binned(run, edges)
        if np.all(np.isfinite(curve)):
            by_seed.setdefault(run.seed, []).append(curve)
    return {seed: np.mean(curves, axis=0) for seed, curves in by_seed.items()}


# --------------------------------------------------------------- divergence


def _rms_distance(first, second):
    """RMS difference of two trajectories at their common steps -> (steps, distances)."""
    (steps_a, values_a), (steps_b, values_b) = first, second
    common, index_a, index_b = np.intersect1d(steps_a, steps_b, return_indices=True)
    if common.size == 0 or values_a.shape[1] != values_b.shape[1]:
        return None
    diff = values_a[index_a].astype(np.float64) - values_b[index_b].astype(np.float64)
    return common, np.sqrt(np.mean(diff**2, axis=1))


def _summarize_curves(curves):
    """Summary over (steps, distances) curves, on the steps they all share."""
    curves = [c for c in curves if c is not None]
    if not curves:
        return None
    steps = curves[0][0]
    for s, _ in curves[1:]:
        steps = np.intersect1d(steps, s)
    if steps.size == 0:
        return None
    rows = [d[np.searchsorted(s, steps)] for s, d in curves]
    return stats.summarize_divergence(steps.tolist(), np.vstack(rows))


def _divergence(configs, perturbed, pairs):
    """Divergence summaries: between configurations (same seed), the 1-ulp
    baseline per configuration, and replicates within a configuration."""
    # Trajectories can be large (weights at every checkpoint): a few are kept
    # in memory and the rest read again when a later pair needs them.
    @functools.lru_cache(maxsize=8)
    def load(path):
        return by_path[path].trajectory()

    def trajectory(run):
        return load(run.path) if run.trajectory_path is not None else None

    by_path = {r.path: r for c in configs for r in c["runs"]}
    by_path.update({r.path: r for r in perturbed})

    def first_per_seed(config):
        chosen = {}
        for run in sorted(config["runs"], key=_run_sort_key):
            if run.seed not in chosen and run.trajectory_path is not None:
                chosen[run.seed] = run
        return chosen

    firsts = {c["id"]: first_per_seed(c) for c in configs}
    if not any(firsts.values()):
        return None
    out = {"between": [], "baseline": [], "replicates": []}
    for a, b in pairs:
        shared = sorted(set(firsts[a]) & set(firsts[b]), key=lambda s: (str(type(s)), s))
        summary = _summarize_curves([_rms_distance(trajectory(firsts[a][s]), trajectory(firsts[b][s])) for s in shared])
        if summary:
            out["between"].append({"a": a, "b": b, **summary})
    for config in configs:
        cid = config["id"]
        nudged = [r for r in perturbed if r.config_key == config["key"] and r.seed in firsts[cid]]
        summary = _summarize_curves(
            [_rms_distance(trajectory(firsts[cid][r.seed]), trajectory(r)) for r in nudged if r.trajectory_path is not None]
        )
        if summary:
            out["baseline"].append({"configuration": cid, "perturbation": nudged[0].perturbation, **summary})
        repeats = []
        for seed, first in firsts[cid].items():
            for run in config["runs"]:
                if run.seed == seed and run.path != first.path and run.trajectory_path is not None:
                    repeats.append(_rms_distance(trajectory(first), trajectory(run)))
        summary = _summarize_curves(repeats)
        if summary:
            out["replicates"].append({"configuration": cid, **summary})
    return out if any(out.values()) else None


# ------------------------------------------------------------------- report


def _default_metric(runs):
    names = {(r.manifest.get("protocol") or {}).get("metric") for r in runs}
    if len(names) == 1 and isinstance(next(iter(names)), str):
        return names.pop(), "protocol.metric in the manifests"
    names = {(r.manifest.get("metric") or {}).get("name") if isinstance(r.manifest.get("metric"), dict) else None
             for r in runs}
    if len(names) == 1 and isinstance(next(iter(names)), str):
        return names.pop(), "metric.name in the manifests"
    keys = set()
    for run in runs:
        metrics = run.manifest.get("metrics") or {}
        keys.add(tuple(sorted(k for k in metrics if run.metric(k) is not None)))
    if len(keys) == 1:
        only = keys.pop()
        if len(only) == 1:
            return only[0], "the only entry of the manifests' metrics"
    return "final_loss", "result.final_loss (the last epoch's mean training loss; choose another with --metric)"


def _protocol_differences(protocols):
    """Top-level protocol fields whose values differ between protocols."""
    if len(protocols) < 2:
        return []
    fields = set()
    for p in protocols:
        fields.update(p)
    differing = []
    for field in sorted(fields):
        values = {_canonical(p.get(field)) for p in protocols}
        if len(values) > 1:
            sub = set()
            for p in protocols:
                if isinstance(p.get(field), dict):
                    sub.update(p[field])
            detail = [k for k in sorted(sub) if len({_canonical((p.get(field) or {}).get(k)) for p in protocols}) > 1]
            differing.append(field + (f" ({', '.join(detail)})" if detail else ""))
    return differing


def build_report(dirs, options=None):
    """Reads the run folders under `dirs` and computes the whole report.

    Args:
        dirs: folders (from one or several machines) holding run folders, or
            tar archives of them (a packed study's runs.tar.xz), read in a
            temporary folder that is removed before this returns.
        options: ReportOptions (defaults if None).

    Returns:
        (report, context): report is the JSON-ready dict written to
        report.json; context holds what the plots need (not JSON).
    """
    options = options or ReportOptions()
    options.validate()
    with contextlib.ExitStack() as stack:
        return _build_report(dirs, options, stack)


def _input_folders(source, stack, warnings):
    """[(run folder, where it is shown)] of one input: a folder, or an archive opened on `stack`."""
    source = Path(source)
    if source.is_dir():
        found = [(path, str(path)) for path in find_run_folders(source)]
        if not found:
            packed = source / archive.ARCHIVE
            hint = (f" (it holds {archive.ARCHIVE}: pass {packed}, or unpack it with prednet-study unpack "
                    f"{source})") if packed.is_file() else ""
            warnings.append(f"{source}: no run folders found{hint}.")
        return found
    if archive.is_archive(source):
        root = stack.enter_context(archive.opened(source))
        found = [(path, f"{source}:{path.relative_to(root).as_posix()}") for path in find_run_folders(root)]
        if not found:
            warnings.append(f"{source}: no run folders in the archive.")
        return found
    if source.exists():
        raise ValueError(f"{source}: neither a folder of runs nor a tar archive of them (.tar, .tar.gz, .tar.xz).")
    raise FileNotFoundError(f"No such folder or archive: {source}")


def _build_report(dirs, options, stack):
    warnings = []
    excluded = []
    loaded = []
    seen = {}
    folders = []
    for directory in dirs:
        folders.extend((path, str(directory), where) for path, where in _input_folders(directory, stack, warnings))
    for path, source, where in folders:
        try:
            digest = hashlib.sha256((path / run_folders.MANIFEST).read_bytes()).hexdigest()
        except OSError as error:
            excluded.append({"path": where, "reason": f"unreadable manifest ({error})"})
            continue
        if digest in seen:
            # A run copied into two result folders is one run, not two seeds.
            excluded.append({"path": where, "reason": f"duplicate of {seen[digest]}"})
            continue
        seen[digest] = where
        try:
            run = load_run(path, source, where)
        except (run_folders.RunFolderError, ValueError, KeyError) as error:
            excluded.append({"path": where, "reason": f"unreadable ({error})"})
            continue
        loaded.append(run)
    usable, perturbed = [], []
    for run in loaded:
        if run.status != "complete":
            excluded.append({"path": run.where, "reason": f"status {run.status!r}" +
                             (f": {run.manifest.get('error')}" if run.manifest.get("error") else "")})
        elif run.seed is None:
            excluded.append({"path": run.where, "reason": "no seed in the manifest"})
        elif run.perturbation:
            perturbed.append(run)
        else:
            usable.append(run)

    if not usable:
        warnings.append("No usable runs: nothing to compare (see the runs left out).")
    protocols = {}
    for run in usable:
        protocols.setdefault(run.protocol_key, []).append(run)
    protocol_list = sorted(protocols.items(), key=lambda item: (-len(item[1]), item[0]))
    if len(protocol_list) > 1:
        differing = _protocol_differences([json.loads(key) for key, _ in protocol_list])
        warnings.append(
            f"{len(protocol_list)} different protocols (runs that trained something different); each is "
            f"reported on its own, never compared with another. They differ in: {', '.join(differing)}."
        )

    configs_all = _configurations(usable)
    config_of = {}
    for config in configs_all:
        for run in config["runs"]:
            config_of[run.path] = config

    report = {
        "format": "prednet-study-report",
        "format_version": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "inputs": [str(d) for d in dirs],
        "options": dataclasses.asdict(options),
        "runs_found": len(folders),
        "runs_used": len(usable),
        "perturbed_runs": len(perturbed),
        "excluded": excluded,
        "warnings": warnings,
        "protocols": [],
    }
    context = {"protocols": []}
    for number, (key, members) in enumerate(protocol_list, 1):
        pid = f"P{number}"
        configs = []
        for config in configs_all:
            inside = [r for r in config["runs"] if r.protocol_key == key]
            if inside:
                configs.append({**config, "runs": sorted(inside, key=_run_sort_key)})
        section, ctx = _protocol_section(pid, json.loads(key), configs,
                                         [r for r in perturbed if r.protocol_key == key], options, warnings)
        report["protocols"].append(section)
        context["protocols"].append(ctx)
    orphans = [r for r in perturbed if r.protocol_key not in protocols]
    for run in orphans:
        warnings.append(f"{run.where}: a perturbed run without unperturbed runs of its protocol; not used.")
    report["runs"] = [_run_record(r, config_of.get(r.path)) for r in usable]
    return report, context


def _run_record(run, config):
    return {
        "path": run.where,
        "source": run.source,
        "configuration": config["id"] if config else None,
        "seed": run.seed,
        "replicate": run.replicate,
        "status": run.status,
        "initial_weights_checksum": run.initial_checksum,
        "weights_checksum": run.weights_checksum,
        "weights_checksum_from": run.weights_checksum_source,
        "curve_checksum": run.curve_checksum,
        "hostname": ((run.manifest.get("fingerprint") or {}).get("os") or {}).get("hostname"),
    }


def _protocol_section(pid, protocol, configs, perturbed, options, warnings):
    runs = [r for c in configs for r in c["runs"]]
    metric = options.metric
    metric_source = "--metric"
    if metric is None:
        metric, metric_source = _default_metric(runs)

    # One value per seed: replicates of a seed share its starting point, so
    # they are averaged rather than counted as extra seeds.
    values, seeds_of, config_rows, audits = {}, {}, [], {}
    for config in configs:
        by_seed, run_values = {}, []
        for run in config["runs"]:
            value = run.metric(metric)
            run_values.append(value)
            if value is None:
                warnings.append(f"{pid} {config['id']}: {run.where} has no value for metric {metric!r}; left out.")
                continue
            by_seed.setdefault(run.seed, []).append(value)
        ordered = sorted(by_seed, key=lambda s: (str(type(s)), s))
        values[config["id"]] = np.array([np.mean(by_seed[s]) for s in ordered])
        seeds_of[config["id"]] = ordered
        audit = stats.determinism_audit(
            [{"seed": r.seed, "weights_checksum": r.weights_checksum, "curve_checksum": r.curve_checksum,
              "metric": value} for r, value in zip(config["runs"], run_values)],
            config["settings"].get("deterministic"),
        )
        audits[config["id"]] = audit
        if audit["status"] == "defect":
            warnings.append(
                f"{pid} {config['id']} ({config['label']}) claims determinism but only "
                f"{audit['identical']} of {audit['audited']} repeats are bit-identical (seeds "
                f"{', '.join(map(str, audit['differing_seeds']))}): a defect to report, not data."
            )
        config_rows.append({
            "id": config["id"],
            "label": config["label"],
            "name": config["name"],
            "names": config["names"],
            "settings": config["settings"],
            "effective": config["effective"],
            "machine": config["machine"],
            "hosts": sorted({((r.manifest.get("fingerprint") or {}).get("os") or {}).get("hostname") or "?"
                             for r in config["runs"]}),
            "sources": sorted({r.source for r in config["runs"]}),
            "runs": len(config["runs"]),
            "seeds": ordered,
            "values": values[config["id"]].tolist(),
            "summary": stats.describe(values[config["id"]], options.alpha),
            "determinism": audit,
        })

    starting_points = _starting_points(configs)
    for problem in starting_points["problems"]:
        warnings.append(f"{pid}: {problem}")

    ids = [c["id"] for c in configs]
    comparison = stats.compare_configurations(
        {cid: values[cid] for cid in ids}, seeds=seeds_of, margin=options.margin, margin_sd=options.margin_sd,
        alpha=options.alpha, power=options.power,
    )
    # A paired design needs the same starting point per seed; when a seed's
    # arms started apart, the pairing is kept (same seed, same data order) but flagged.
    for pair in comparison["pairs"]:
        if pair["design"] == "paired" and starting_points["differ"]:
            pair["notes"].append("some seeds started from different initial weights (see starting points)")

    curves, curve_ctx = _curve_section(configs, comparison["pairs"], options)
    divergence = _divergence(configs, perturbed, [(p["a"], p["b"]) for p in comparison["pairs"]])
    section = {
        "id": pid,
        "protocol": protocol,
        "metric": {"name": metric, "from": metric_source},
        "configurations": config_rows,
        "starting_points": starting_points,
        "comparisons": comparison,
        "curves": curves,
        "divergence": divergence,
    }
    ctx = {"id": pid, "configs": configs, "values": values, "curves": curve_ctx, "divergence": divergence,
           "metric": metric}
    return section, ctx


def _starting_points(configs):
    """Do all arms of a seed start from the same initial weights?"""
    by_seed = {}
    for config in configs:
        for run in config["runs"]:
            by_seed.setdefault(run.seed, {}).setdefault(run.initial_checksum, set()).add(config["id"])
    problems, differ = [], []
    missing = sorted({c["id"] for c in configs for r in c["runs"] if r.initial_checksum is None})
    for seed, checksums in sorted(by_seed.items(), key=lambda item: (str(type(item[0])), item[0])):
        known = {k: v for k, v in checksums.items() if k is not None}
        if len(known) > 1:
            differ.append(seed)
            detail = "; ".join(f"{', '.join(sorted(v))}: {k[:12]}" for k, v in known.items())
            problems.append(f"seed {seed} started from different initial weights ({detail}).")
    if missing:
        problems.append(f"no initial-weights checksum in runs of {', '.join(missing)}: same start not verified.")
    return {"seeds": len(by_seed), "same_start": not differ and not missing, "differ": differ,
            "problems": problems}


def _curve_section(configs, pairs, options):
    runs = [r for c in configs for r in c["runs"] if r.steps.size]
    if not runs:
        return None, None
    last = int(min(r.steps.max() for r in runs))
    edges = _bin_edges(last, options.checkpoints)
    checkpoints = edges[1:].tolist()
    per_config = {c["id"]: _per_seed_curves(c["runs"], edges) for c in configs}
    tests = []
    for number, pair in enumerate(pairs):
        ca, cb = per_config[pair["a"]], per_config[pair["b"]]
        paired = pair["design"] == "paired"
        if paired:
            shared = [s for s in sorted(set(ca) & set(cb), key=lambda s: (str(type(s)), s))]
            a = np.array([ca[s] for s in shared]).reshape(len(shared), -1)
            b = np.array([cb[s] for s in shared]).reshape(len(shared), -1)
        else:
            a = np.array(list(ca.values())).reshape(len(ca), -1)
            b = np.array(list(cb.values())).reshape(len(cb), -1)
        result = stats.compare_curves(a, b, paired=paired, checkpoints=checkpoints, alpha=options.alpha,
                                      method=options.curve_test, permutations=options.permutations,
                                      rng=np.random.default_rng([options.seed, 1, number]))
        tests.append({"a": pair["a"], "b": pair["b"], **result})
    # Each pair's test already holds its checkpoints together; Holm on the
    # pairs' global p-values holds the family of pairs too.
    for test, adjusted in zip(tests, stats.holm([t["p_global"] for t in tests])):
        test["p_global_holm"] = adjusted
        test["differs"] = bool(math.isfinite(adjusted) and adjusted < options.alpha)
    notes = []
    # Few seeds give few distinct permutations: the smallest p they can give,
    # times the number of pairs (Holm's first step), may never reach alpha.
    capped = [f"{t['a']} vs {t['b']} (p >= {t['p_floor']:.3g})" for t in tests
              if math.isfinite(t.get("p_floor", math.nan)) and t["p_floor"] * len(tests) >= options.alpha]
    if capped:
        notes.append(
            f"With their seeds the max-t permutation test cannot go below a floor for {', '.join(capped)}; after "
            f"Holm over {len(tests)} pairs these cannot reach alpha = {options.alpha} whatever the curves. More "
            "seeds, or --curve-test holm, lift the floor."
        )
    plot_edges = _bin_edges(last, PLOT_BINS)
    plot_curves = {c["id"]: _per_seed_curves(c["runs"], plot_edges) for c in configs}
    section = {"checkpoints": checkpoints, "bin": "mean per-step loss over the steps since the previous checkpoint",
               "method": options.curve_test, "tests": tests, "notes": notes}
    return section, {"edges": plot_edges, "curves": plot_curves}


# ----------------------------------------------------------------- writing


def make_report(dirs, output, options=None, overwrite=False):
    """Builds the report for the run folders under `dirs` and writes it to `output`.

    Args:
        dirs: directories with run folders (one per machine, or any mix).
        output: the report folder (created if needed).
        options: ReportOptions.
        overwrite: replace an earlier report in `output`.

    Returns:
        the report dict (as in report.json), with "files" listing what was written.
    """
    options = options or ReportOptions()
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise ValueError(f"{output} exists and is not a folder.")
    for name in (REPORT_MD, REPORT_JSON):
        if (output / name).exists() and not overwrite:
            raise ValueError(f"{output / name} exists; pass --overwrite to replace it, or choose another -o.")
    report, context = build_report(dirs, options)
    output.mkdir(parents=True, exist_ok=True)
    files = []
    if options.plots:
        from prednet_keras.study import plots

        several = len(context["protocols"]) > 1
        for section, ctx in zip(report["protocols"], context["protocols"]):
            prefix = f"{ctx['id']}-" if several else ""
            section["plots"] = plots.draw_all(ctx, output, prefix)
            files.extend(section["plots"].values())
    report["files"] = [REPORT_MD, REPORT_JSON] + files
    # Compact: report.md is the human-readable form, and indentation made the
    # published report.json files nearly twice as large.
    run_folders.atomic_write_json(output / REPORT_JSON, report, compact=True)
    run_folders.atomic_write(output / REPORT_MD, render_markdown(report))
    return report


def _f(value, digits=4):
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return f"{value:.{digits}g}"
    return str(value)


def _p(value):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def _interval(ci, digits=4):
    return f"[{_f(ci[0], digits)}, {_f(ci[1], digits)}]"


def _signed(value):
    return _f(value) if not isinstance(value, float) or not math.isfinite(value) or value < 0 else "+" + _f(value)


def _pairs_text(pairs, differences=False):
    if differences:
        return ", ".join(f"{p['a']} vs {p['b']} by {_signed(p['primary']['difference'])}" for p in pairs)
    return ", ".join(f"{p['a']} vs {p['b']}" for p in pairs)


def answer(section):
    """One sentence: what the verdicts of a protocol's pairs say together.

    Args:
        section: one protocol of a report dict.
    """
    pairs = section["comparisons"]["pairs"]
    metric = section["metric"]["name"]
    configs = section["configurations"]
    if not pairs:
        return (f"Only one configuration ({configs[0]['id']}) ran this protocol: nothing to compare." if configs
                else "No usable runs: nothing to compare.")
    margin = _f(section["comparisons"]["margin"])
    kinds = {kind: [p for p in pairs if p["verdict_kind"] in kinds_of]
             for kind, kinds_of in (("differ", ("difference",)), ("same", ("identical", "equivalent")),
                                    ("open", ("inconclusive",)))}
    listed = 4  # pairs named in the sentence; more are counted
    if all(p["verdict_kind"] == "identical" for p in pairs):
        return (f"No configuration changed `{metric}`: {'the' if len(pairs) == 1 else 'all'} {len(pairs)} "
                f"pair{'s' if len(pairs) != 1 else ''} of configurations gave identical results for every seed.")
    if not kinds["differ"] and not kinds["open"]:
        largest = max(abs(p["primary"]["difference"]) for p in pairs)
        return (f"No configuration changed `{metric}` beyond the margin: {'the' if len(pairs) == 1 else 'all'} "
                f"{len(pairs)} pair{'s' if len(pairs) != 1 else ''} of configurations "
                f"{'is' if len(pairs) == 1 else 'are'} equivalent within +/- {margin} (the largest mean "
                f"difference is {_f(largest, 2)}).")
    if len(kinds["open"]) == len(pairs):
        return f"The seeds are too few to decide any of the {len(pairs)} pairs of configurations{_needed(pairs)}."
    parts = []
    if kinds["differ"]:
        shown = kinds["differ"]
        names = f" ({_pairs_text(shown, differences=True)})" if len(shown) <= listed else " (see Verdicts)"
        parts.append(f"{len(shown)} of {len(pairs)} pairs of configurations differ in `{metric}`{names}")
    else:
        parts.append(f"No difference in `{metric}` is detected in {len(pairs)} pairs of configurations")
    if kinds["same"]:
        shown = kinds["same"]
        names = f" ({_pairs_text(shown)})" if len(shown) <= listed else ""
        parts.append(f"{len(shown)} {'is' if len(shown) == 1 else 'are'} equivalent within +/- {margin}{names}")
    if kinds["open"]:
        parts.append(f"{len(kinds['open'])} {'is' if len(kinds['open']) == 1 else 'are'} inconclusive"
                     f"{_needed(kinds['open'])}")
    return parts[0] + ("; " + " and ".join(parts[1:]) if parts[1:] else "") + "."


def _needed(pairs):
    """", up to about N seeds per configuration needed" for inconclusive pairs (or at least 2)."""
    if any(p["n_a"] < 2 or p["n_b"] < 2 for p in pairs):
        return " (at least 2 seeds per configuration needed)"
    needed = [p["power"]["seeds_needed"] for p in pairs if p["power"]["seeds_needed"] is not None]
    return f", up to about {max(needed)} seeds per configuration needed" if needed else ""


def render_markdown(report):
    """report.md from a report dict.

    Args:
        report: as returned by build_report (plus "plots" per protocol).
    """
    lines = ["# Study report", ""]
    several = len(report["protocols"]) > 1
    if several:
        lines += ["**Answer**, per protocol:", ""]
        lines += [f"- {section['id']}: {answer(section)}" for section in report["protocols"]]
    elif report["protocols"]:
        lines.append(f"**Answer:** {answer(report['protocols'][0])}")
    else:
        lines.append("**Answer:** no usable runs, nothing to compare.")
    lines.append("")
    lines.append(f"Made {report['created']} from {', '.join(f'`{d}`' for d in report['inputs'])}: "
                 f"{report['runs_found']} run folders found, {report['runs_used']} used"
                 + (f", {report['perturbed_runs']} perturbed (divergence baseline only)" if report["perturbed_runs"] else "")
                 + (f", {len(report['excluded'])} left out" if report["excluded"] else "") + ".")
    opts = report["options"]
    lines.append("")
    lines.append(f"Level alpha = {opts['alpha']} (family-wise over the pairs, Holm); power target {opts['power']}; "
                 f"curves tested at {opts['checkpoints']} checkpoints "
                 f"({'max-t permutation' if opts['curve_test'] == 'maxt' else 'Holm'}); random seed {opts['seed']}. "
                 "Methods: docs/study-statistics.md.")
    lines.append("")
    if report["warnings"]:
        lines += ["## Warnings", ""] + [f"- {w}" for w in report["warnings"]] + [""]
    for section in report["protocols"]:
        lines += _protocol_markdown(section, several)
    if report["excluded"]:
        lines += ["## Runs left out", "", "| run | reason |", "| --- | --- |"]
        lines += [f"| `{e['path']}` | {e['reason']} |" for e in report["excluded"]]
        lines.append("")
    lines += ["## Runs", "", "| run | configuration | seed | replicate | weights checksum | curve checksum |",
              "| --- | --- | --- | --- | --- | --- |"]
    for run in report["runs"]:
        lines.append(f"| `{run['path']}` | {run['configuration']} | {run['seed']} | {_f(run['replicate'])} | "
                     f"{(run['weights_checksum'] or 'n/a')[:12]} | {(run['curve_checksum'] or 'n/a')[:12]} |")
    lines.append("")
    return "\n".join(lines)


def _determinism_cell(audit):
    """The Configurations table's determinism column for one audit (stats.determinism_audit)."""
    details = [f"{audit['identical']}/{audit['audited']} repeats identical"] if audit["audited"] else []
    spread = audit.get("max_metric_difference")
    if spread is not None and (spread > 0 or audit["status"] != "deterministic"):
        # Repeats can end with other weights and still the same metric to every recorded digit.
        details.append(f"metric differs by up to {_f(spread, 2)}" if spread > 0 else "the metric itself equal")
    cell = audit["status"] + (f" ({'; '.join(details)})" if details else "")
    return f"**DEFECT**: {cell}" if audit["status"] == "defect" else cell


def _verdict_line(pair, comparison):
    primary = pair["primary"]
    text = (f"- **{pair['a']} vs {pair['b']}: {pair['verdict']}** ({pair['a']} - {pair['b']} = "
            f"{_f(primary['difference'])}, {int(100 * (1 - comparison['alpha']))}% CI {_interval(primary['ci'])}, "
            f"{primary['test']}" + (f" on {pair['shared_seeds']} seeds" if pair["design"] == "paired" else "")
            + f", Holm p {_p(pair['p_holm']['primary'])}")
    per_seed = pair.get("seed_differences")
    if per_seed and pair["verdict_kind"] != "identical":
        text += (f"; higher in {pair['a']} for {per_seed['a_higher']} of {per_seed['n']} seeds, in {pair['b']} "
                 f"for {per_seed['b_higher']}")
        if per_seed["beyond_margin"] is not None:
            text += f"; {per_seed['beyond_margin']} of {per_seed['n']} seeds differ by more than the margin"
        text += f"; largest difference of a seed {_f(per_seed['largest'], 2)}"
    return text + (f"; {'; '.join(pair['notes'])}" if pair["notes"] else "") + ")"


def _protocol_markdown(section, several):
    level = "###" if several else "##"
    lines = []
    if several:
        protocol = section["protocol"]
        model = (protocol.get("model") or {}).get("name") or (protocol.get("options") or {}).get("model")
        name = (protocol.get("protocol") or {}).get("name")
        lines += [f"## Protocol {section['id']}" + "".join(f": {v}" for v in (name or model,) if v), ""]
    metric = section["metric"]
    comparison = section["comparisons"]
    lines += [f"{level} Verdicts", ""]
    lines.append(f"Metric: `{metric['name']}` (from {metric['from']}), one value per seed (replicates averaged). "
                 f"Equivalence margin: +/- {_f(comparison['margin'])} ({comparison['margin_rule']}; pooled seed SD "
                 f"{_f(comparison['pooled_sd'])}).")
    lines.append("")
    if not comparison["pairs"]:
        lines += ["Only one configuration: nothing to compare.", ""]
    lines += [_verdict_line(pair, comparison) for pair in comparison["pairs"]]
    lines.append("")
    lines += [f"{level} Configurations", "",
              "| configuration | what it is | hosts | seeds | runs | mean | SD | 95% CI | determinism |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in section["configurations"]:
        s = c["summary"]
        others = [n for n in c.get("names") or [] if n != c["id"]]
        label = c["label"] + (f" (also named {', '.join(others)})" if others else "")
        lines.append(f"| {c['id']} | {label} | {', '.join(c['hosts'])} | {s['n']} | {c['runs']} | "
                     f"{_f(s['mean'])} | {_f(s['sd'])} | {_interval(s['ci'])} | {_determinism_cell(c['determinism'])} |")
    lines.append("")
    lines.append("CI: t-based, (1 - alpha). Determinism: share of repeats (re-runs of a seed) whose final weights "
                 "and loss curve are bit-identical to the seed's first run; a configuration that asks for "
                 "deterministic kernels and is below 100% is a defect. Where repeats differ, 'metric differs "
                 "by up to' is the largest absolute difference of the metric between a repeat and its seed's "
                 "first run: the size of the run-to-run variation, to set against the seed SD and the margin.")
    lines.append("")
    sp = section["starting_points"]
    start = ("every seed started from the same initial weights in every configuration" if sp["same_start"]
             else "NOT the same for every seed; see warnings")
    lines.append(f"Starting points: {start} ({sp['seeds']} seeds).")
    lines.append("")
    plots = section.get("plots") or {}
    if "final_metric" in plots:
        lines += [f"![final metric per configuration]({plots['final_metric']})", ""]

    paired = [p for p in comparison["pairs"] if p["design"] == "paired"]
    unpaired = [p for p in comparison["pairs"] if p["design"] != "paired"]
    width = int(100 * (1 - comparison["alpha"]))
    if paired:
        lines += [f"{level} Paired tests (the primary analysis: the arms share seeds)", "",
                  "Each seed ran in both configurations from the same initial weights and data order, so the "
                  "per-seed differences carry the comparison and the seed-to-seed spread cancels.", "",
                  f"| pair (A vs B) | seeds | mean difference A - B | {width}% CI | SD of the differences | higher in A / B / equal | "
                  "beyond the margin | largest | paired t p (Holm) | Wilcoxon p (Holm) | TOST p (Holm) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for pair in paired:
            h, t, d = pair["p_holm"], pair["paired"], pair["seed_differences"]
            beyond = "n/a" if d["beyond_margin"] is None else f"{d['beyond_margin']} of {d['n']}"
            lines.append(
                f"| {pair['a']} vs {pair['b']} | {t['n']} | {_f(t['difference'])} | {_interval(t['ci'])} | "
                f"{_f(t['sd'])} | {d['a_higher']} / {d['b_higher']} / {d['equal']} | {beyond} | "
                f"{_f(d['largest'], 2)} | {_p(t['p'])} ({_p(h['paired'])}) | "
                f"{_p(t['wilcoxon_p'])} ({_p(h['wilcoxon'])}) | "
                f"{_p(pair['tost']['p']) if pair['tost'] else 'n/a'} ({_p(h['tost'])}) |")
        lines.append("")
    if unpaired:
        lines += [f"{level} Unpaired tests (the primary analysis where the arms share too few seeds)", "",
                  f"| pair (A vs B) | n | difference A - B | {width}% CI | Welch p (Holm) | Mann-Whitney p (Holm) | TOST p (Holm) |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for pair in unpaired:
            h, w = pair["p_holm"], pair["welch"]
            lines.append(
                f"| {pair['a']} vs {pair['b']} | {pair['n_a']}/{pair['n_b']} | {_f(w['difference'])} | "
                f"{_interval(w['ci'])} | {_p(w['p'])} ({_p(h['welch'])}) | "
                f"{_p(pair['mann_whitney']['p'])} ({_p(h['mann_whitney'])}) | "
                f"{_p(pair['tost']['p']) if pair['tost'] else 'n/a'} ({_p(h['tost'])}) |")
        lines.append("")
    if comparison["pairs"]:
        lines += [f"{level} Spread and effect size", "",
                  ("Welch's and Mann-Whitney's tests of the paired pairs ignore the pairing (shown for reference; "
                   "the seed-to-seed spread swamps them). " if paired else "")
                  + "Levene: whether the spread over seeds differs. g: the mean difference in units of the pooled "
                  "seed SD (Hedges' g), on the seeds the verdict uses.", "",
                  "| pair (A vs B) | Welch p (Holm) | Mann-Whitney p (Holm) | Levene p (Holm) | SD ratio A / B | g |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for pair in comparison["pairs"]:
            h = pair["p_holm"]
            lines.append(f"| {pair['a']} vs {pair['b']} | {_p(pair['welch']['p'])} ({_p(h['welch'])}) | "
                         f"{_p(pair['mann_whitney']['p'])} ({_p(h['mann_whitney'])}) | "
                         f"{_p(pair['levene']['p'])} ({_p(h['levene'])}) | {_f(pair['levene']['sd_ratio'], 3)} | "
                         f"{_f(pair['hedges_g']['g'], 3)} |")
        lines.append("")
        lines += [f"{level} Power", "",
                  "| pair | SD used | power now (detect / equivalence) | seeds to detect the margin | "
                  "seeds to show equivalence | seeds needed |", "| --- | --- | --- | --- | --- | --- |"]
        for pair in comparison["pairs"]:
            pw = pair["power"]
            lines.append(f"| {pair['a']} vs {pair['b']} | {_f(pw['sd'])} ({pw['sd_kind']}) | "
                         f"{_f(pw['power_now_detect'], 2)} / {_f(pw['power_now_equivalence'], 2)} | "
                         f"{_f(pw['seeds_to_detect_margin'])} | {_f(pw['seeds_to_show_equivalence'])} | "
                         f"{_f(pw['seeds_needed'])} |")
        lines.append("")
        lines.append(f"Seeds per configuration for power {comparison['power']} at alpha {comparison['alpha']} "
                     "(no adjustment for the number of pairs): to detect a shift of the margin (two-sided t), and "
                     "to show equivalence (TOST) when there is no shift; 'seeds needed' is the larger.")
        lines.append("")

    curves = section.get("curves")
    if curves:
        lines += [f"{level} Loss curves", ""]
        if "loss_curves" in plots:
            lines += [f"![loss curves]({plots['loss_curves']})", ""]
        lines.append(f"Per-step training loss averaged in {len(curves['checkpoints'])} bins ending at steps "
                     f"{', '.join(map(str, curves['checkpoints']))}; each bin tested per pair, "
                     f"{'max-t permutation' if curves['method'] == 'maxt' else 'Holm'} across the bins, Holm across pairs.")
        lines.append("")
        lines += [f"{note}" for note in curves.get("notes", [])] + ([""] if curves.get("notes") else [])
        if curves["tests"]:
            lines += ["| pair | design | curves differ | Holm p (pairs) | first differing checkpoint | differing checkpoints |",
                      "| --- | --- | --- | --- | --- | --- |"]
            for test in curves["tests"]:
                where = [str(c) for c, s in zip(test["checkpoints"], test["significant"]) if s]
                lines.append(f"| {test['a']} vs {test['b']} | {test['design']} | {'yes' if test['differs'] else 'no'} | "
                             f"{_p(test['p_global_holm'])} | {_f(test['first_significant'])} | "
                             f"{', '.join(where) or 'none'} |")
            lines.append("")
    divergence = section.get("divergence")
    if divergence:
        lines += [f"{level} Divergence", ""]
        if "divergence" in plots:
            lines += [f"![divergence]({plots['divergence']})", ""]
        lines += ["RMS distance between trajectories (weights or probe predictions, as the runs stored them) of "
                  "runs with the same seed.", "", "| what | seeds | first step apart | final median distance |",
                  "| --- | --- | --- | --- |"]
        for item in divergence["between"]:
            lines.append(f"| {item['a']} vs {item['b']} | {item['n']} | {_f(item['first_separated'])} | {_f(item['final_median'])} |")
        for item in divergence["baseline"]:
            lines.append(f"| {item['configuration']} vs itself nudged ({item['perturbation']}) | {item['n']} | "
                         f"{_f(item['first_separated'])} | {_f(item['final_median'])} |")
        for item in divergence["replicates"]:
            lines.append(f"| {item['configuration']} replicates | {item['n']} | {_f(item['first_separated'])} | "
                         f"{_f(item['final_median'])} |")
        lines.append("")
    lines += [f"{level} Configuration details", ""]
    for c in section["configurations"]:
        lines.append(f"- **{c['id']}** {c['label']}: requested {json.dumps(c['settings'])}; effective "
                     f"{json.dumps(c['effective'])}; machine {json.dumps(c['machine'])}; from {', '.join(c['sources'])}.")
    lines.append("")
    return lines
