"""One run folder as the report sees it: found, read, its checksums and its metric.

Reads manifest.json and history.csv (docs/study-statistics.md, "What the report
reads from a run folder"), optionally the final checkpoint (for a weights
checksum the manifest lacks) and trajectory.npz.
"""

import dataclasses
import hashlib
import math
import os
import re
from pathlib import Path

import numpy as np

from prednet_keras.session import folder as run_folders
from prednet_keras.session.records import Manifest, Study
from prednet_keras.study.report.configurations import arm_settings, canonical, machine_identity, protocol_identity
from prednet_keras.study.factors import STUDY_FACTORS

__all__ = ["TRAJECTORY", "Run", "curve_checksum", "find_run_folders", "load_run", "weights_file_checksum"]

TRAJECTORY = "trajectory.npz"
# "last_steps:N": the mean of the last N per-step losses in history.csv (the
# paper's metric was the mean loss of the last 50 updates).
_LAST_STEPS = re.compile(r"^last_steps:(\d+)$")


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
        manifest: its manifest (the dict read from manifest.json; `record` is the same, typed).
        history: its history rows.
        source: the folder or archive (given on the command line) it was found under.
        where: how the report names the run: its path, or ARCHIVE:MEMBER for a
            run read from an archive (`path` is then in a temporary folder).
        factors: the study factors its configuration and protocol are made of (factors.STUDY_FACTORS).
    """

    path: Path
    manifest: dict
    history: list
    source: str = ""
    where: str = ""
    factors: tuple = dataclasses.field(default=STUDY_FACTORS, repr=False)

    def __post_init__(self):
        self.where = self.where or str(self.path)
        m = self.record = Manifest.coerce(self.manifest)
        runtime = m.runtime
        self.requested = runtime.requested.to_dict() if runtime and runtime.requested else {}
        self.effective = runtime.effective.to_dict() if runtime and runtime.effective else {}
        self.status = m.get("status", "unknown")
        options_seed = m.options.seed if m.options else None
        self.seed = m.seeds.get("seed", options_seed) if m.seeds else options_seed
        study = m.study or Study()
        self.replicate = study.replicate
        self.perturbation = study.perturbation
        self.name_hint = study.configuration
        # The runtime settings and the other factors under test (e.g. a training-code switch such as
        # emulate_cpu_aliasing): configuration, not protocol.
        self.settings = arm_settings(m, self.factors)
        self.machine = machine_identity(m, self.settings)
        self.protocol = protocol_identity(m, self.factors)
        self.hostname = ((m.fingerprint.os if m.fingerprint else None) or {}).get("hostname")
        self.config_key = canonical({"settings": self.settings, "machine": self.machine})
        self.protocol_key = canonical(self.protocol)
        self.claims_determinism = bool(self.settings.get("deterministic"))
        steps = [r for r in self.history if r.get("kind") == "step" and r.get("global_step") is not None]
        if not steps and self.history and "update" in self.history[0]:
            # The study models' history: one row per update, no kind column.
            steps = [dict(r, global_step=int(r["update"])) for r in self.history if r.get("update") is not None]
        steps.sort(key=lambda r: r["global_step"])
        self.steps = np.array([r["global_step"] for r in steps], dtype=np.int64)
        self.losses = np.array([r["loss"] if r["loss"] is not None else math.nan for r in steps], dtype=float)
        self.curve_checksum = curve_checksum(self.history) if self.history else None
        self.initial_checksum = m.initial_weights.checksum if m.initial_weights else None
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
            recorded = self.record.result.weights_checksum if self.record.result else None
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
        record = self.record.metric
        if isinstance(record, dict) and record.get("name") == name:
            value = record.get("value")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                return float(value)
        # metrics (an older layout's, a dict) or result (a records.Result): the value under `name` either way.
        for section in (self.record.get("metrics"), self.record.result):
            value = (section or {}).get(name)
            if isinstance(value, dict):
                value = value.get("value")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                return float(value)
        return None

    @property
    def trajectory_path(self):
        """The run's trajectory file (manifest trajectory.file, else trajectory.npz), or None."""
        record = self.record.get("trajectory") or {}
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


def load_run(path, source="", where="", factors=STUDY_FACTORS):
    """Reads one run folder.

    Args:
        path: the run folder.
        source: the folder or archive it was found under (recorded in the report).
        where: the name the report gives the run (default: its path).
        factors: the study factors (Run.factors).
    """
    folder = run_folders.RunFolder(path)
    return Run(Path(path), folder.read_manifest(), folder.read_history(), str(source), str(where), factors)
