"""The run folder: the unit of record of one training run.

    weights/<name>/
      manifest.json        every option, the runtime asked for and obtained, the
                           environment fingerprint, the code (commit), seeds,
                           checksums, the outcome
      history.csv          one row per training step and one per epoch (with validation)
      model.keras          the best model so far (lowest validation loss), no optimizer
      initial_weights.h5   the starting point (starting_point's format), so another
                           machine or backend can start alike
      state.json           the last completed epoch (or, for a protocol counted in updates, the
                           last checkpointed update) and where its checkpoint is
      checkpoints/         epoch-NNNN.weights.h5 (update-NNNNNNN.weights.h5): weights + optimizer
                           state then (a protocol counted in updates removes both once complete)
      loss.png             the loss curves

Every file that matters is written to a temporary name in the same folder and
moved into place with `os.replace`, so an interruption leaves either the old
file or the new one, never a truncated one. `state.json` is written only after
the checkpoint it names is complete, so it always points at a usable file.

A command that is refused, or fails before it has anything to show, leaves a
run folder as it found it: the checks here (`check_new`, `check_resumable`,
`check_continuable`) read and never write, shipped runs (`shipped_reason`) are
never written, and `Replacement` keeps an old run aside until its replacement
has completed an epoch.

This module imports no framework: the CLI process uses it before the training
process starts.
"""

import csv
import json
import os
import shutil
from pathlib import Path

from prednet_keras.files.diskwrite import TEMP_PREFIX, atomic_write, atomic_write_json
from prednet_keras.session.history import HistoryWriter, csv_text, parse_row
from prednet_keras.session.records import RUN_FORMAT, Manifest, Result
from prednet_keras.session.records import SCHEMA_VERSION as RUN_FORMAT_VERSION

__all__ = [
    "Replacement",
    "RunFolder",
    "RunFolderError",
    "find_runs",
    "is_run_folder",
    "new_manifest",
    "plural",
    "shipped_reason",
]

MANIFEST = "manifest.json"
HISTORY = "history.csv"
MODEL = "model.keras"
STATE = "state.json"
CHECKPOINTS = "checkpoints"
LOSS_PLOT = "loss.png"
INITIAL_WEIGHTS = "initial_weights.h5"

# A file of this name in a run folder marks it as shipped: a published result
# that no command writes into (see shipped_reason).
SHIPPED_MARKER = "SHIPPED"


class RunFolderError(ValueError):
    """A run folder is missing, incomplete, or would be overwritten."""


def new_manifest(name, options, runtime_requested, command, **extra):
    """The first manifest of a run, written before its training process starts.

    Args:
        name: the run's name (its folder's name).
        options: the training options (a TrainConfig's or StudyConfig's to_dict()).
        runtime_requested: the RuntimeConfig's to_dict().
        command: the command line that made the run (list of str).
        **extra: further top-level records (e.g. `study`).
    """
    import time

    from prednet_keras import __version__
    from prednet_keras.runtime.code_provenance import code_provenance

    manifest = {
        "format": RUN_FORMAT,
        "format_version": RUN_FORMAT_VERSION,
        "name": name,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": list(command),
        "cwd": os.getcwd(),
        "prednet_keras_version": __version__,
        "code": code_provenance(),
        "status": "created",
        "options": options,
        "runtime": {"requested": runtime_requested, "effective": None},
    }
    manifest.update(extra)
    return manifest


def is_run_folder(path):
    """True when `path` is a folder with a run manifest."""
    return (Path(path) / MANIFEST).is_file()


def find_runs(path):
    """The run folders at `path`: itself if it is one, else its sub-folders that are.

    Hidden sub-folders are skipped: they are work in progress (an old run kept
    aside by --overwrite, a study's partial runs), not results.

    Args:
        path: a run folder or a folder of run folders.

    Returns:
        A sorted list of Paths (empty when there are none).
    """
    path = Path(path)
    if is_run_folder(path) or (path / MODEL).is_file():
        return [path]
    if not path.is_dir():
        return []
    return sorted(
        p for p in path.iterdir()
        if p.is_dir() and not p.name.startswith(".") and (is_run_folder(p) or (p / MODEL).is_file())
    )


def plural(count, noun):
    """"1 epoch", "2 epochs"."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def shipped_reason(path):
    """Why `path` is a shipped run folder that no command may write into, or None.

    Shipped: it lies inside the installed prednet_keras package (the models of
    prednet_keras.pretrained travel there), or it holds a SHIPPED marker file
    (a published run kept anywhere else).

    Args:
        path: a folder (need not exist).
    """
    path = Path(path)
    real = path.resolve()
    package = Path(__file__).resolve().parents[1]  # prednet_keras/, which holds session/
    if real == package or package in real.parents:
        return "it lies inside the installed prednet_keras package"
    if (path / SHIPPED_MARKER).is_file():
        return f"it holds a {SHIPPED_MARKER} marker file"
    return None


class RunFolder:
    """Paths and records of one run folder.

    Args:
        path: the folder (need not exist yet).
    """

    def __init__(self, path):
        self.path = Path(path)

    def __repr__(self):
        return f"RunFolder({str(self.path)!r})"

    manifest_path = property(lambda self: self.path / MANIFEST)
    history_path = property(lambda self: self.path / HISTORY)
    model_path = property(lambda self: self.path / MODEL)
    state_path = property(lambda self: self.path / STATE)
    checkpoints_path = property(lambda self: self.path / CHECKPOINTS)
    loss_plot_path = property(lambda self: self.path / LOSS_PLOT)
    initial_weights_path = property(lambda self: self.path / INITIAL_WEIGHTS)

    def exists(self):
        """True when the folder holds a run (a manifest)."""
        return is_run_folder(self.path)

    def check_not_shipped(self):
        """Fails when this folder is a shipped run (see shipped_reason). Changes nothing."""
        reason = shipped_reason(self.path)
        if reason:
            raise RunFolderError(
                f"{self.path} is a shipped model ({reason}): no command writes into it; "
                "train a new run with another --output."
            )

    def check_new(self, overwrite=False):
        """Fails unless a new run may be written here. Changes nothing.

        Args:
            overwrite: whether an existing run folder may be replaced.
        """
        if self.path.exists() and not self.path.is_dir():
            raise RunFolderError(f"{self.path} exists and is a file, not a run folder.")
        if not self.path.is_dir() or not any(self.path.iterdir()):
            return
        if not self.exists():
            raise RunFolderError(
                f"{self.path} exists, is not empty and is not a run folder (no {MANIFEST}); "
                "choose another --output (it is never deleted, even with --overwrite)."
            )
        self.check_not_shipped()
        if not overwrite:
            done = self.completed_epochs()
            raise RunFolderError(
                f"{self.path} already holds a run ({plural(done, 'epoch')} completed); "
                "pass --resume to continue it, --overwrite to replace it, or choose another --output."
            )

    def create(self):
        """Makes the (empty or missing) folder of a new run; see check_new and Replacement."""
        self.check_new()
        self.path.mkdir(parents=True, exist_ok=True)

    def check_resumable(self):
        """Fails unless this folder holds a run whose files match its record. Changes nothing.

        Refused: a missing folder, a folder that is not a prednet-keras run
        folder (no manifest, or another format), a shipped run, and a run whose
        manifest records completed epochs that its files cannot continue from
        (no state.json or checkpoint for them: a copied or damaged folder).

        Returns:
            (manifest, completed epochs; for a protocol counted in updates, its checkpointed updates).
        """
        if not self.path.is_dir():
            raise RunFolderError(f"Nothing to resume: {self.path} does not exist.")
        if not self.exists():
            raise RunFolderError(f"Nothing to resume: {self.path} is not a run folder (no {MANIFEST}).")
        manifest = self.read_manifest()
        record = Manifest.from_dict(manifest) if isinstance(manifest, dict) else None
        if record is None or record.format != RUN_FORMAT:
            found = record.format if record is not None else type(manifest).__name__
            raise RunFolderError(
                f"Nothing to resume: {self.manifest_path} is not a prednet-keras run manifest "
                f"(format {found!r}, expected {RUN_FORMAT!r})."
            )
        if int(record.format_version or 0) > RUN_FORMAT_VERSION:
            raise RunFolderError(
                f"{self.manifest_path} has format_version {record.format_version}; this prednet-keras "
                f"reads up to {RUN_FORMAT_VERSION}: resume it with the version that made it."
            )
        self.check_not_shipped()
        state = self.read_state()
        done = _progress(state)[0]
        recorded = record.epochs_completed
        if recorded is not None and int(recorded) != done:
            holds = f"the checkpoint of epoch {done}" if state else f"no checkpoint to continue from (no {STATE})"
            raise RunFolderError(
                f"{self.manifest_path} records {plural(int(recorded), 'completed epoch')} (result.epochs_completed) "
                f"but {self.path} holds {holds}: its files do not match its record, so it cannot be resumed."
            )
        return manifest, done

    def check_continuable(self, manifest, done, epochs=None):
        """Fails when a --resume would have nothing to train. Changes nothing.

        A run that has completed its epochs is continued only by raising
        --epochs above them, the documented way to train a finished run further.

        Args:
            manifest: the run's manifest (a records.Manifest or its dict).
            done: its completed epochs.
            epochs: the --epochs given with --resume, or None.
        """
        manifest = Manifest.coerce(manifest)
        total = manifest.epochs
        protocol = _protocol_of(manifest)
        if protocol is not None and protocol.progress_unit == "update":
            # A protocol counted in updates: its updates are fixed by its options, so a complete run is final.
            if manifest.complete:
                raise RunFolderError(f"{self.path} is complete: nothing to resume (a --model "
                                     f"{manifest.model_kind} run makes the updates its options set).")
            return
        if epochs is not None and epochs < done:
            raise RunFolderError(f"--epochs {epochs} is fewer than the {done} already completed in {self.path}.")
        finished = manifest.complete or (total and done >= total)
        if finished and (epochs is None or epochs <= done):
            raise RunFolderError(
                f"{self.path} is complete ({done} of {plural(total, 'epoch')}): nothing to resume. To train it "
                f"further, raise --epochs above {done} (e.g. prednet-train --resume --epochs {2 * max(done, 1)} "
                f"-o {self.path})."
            )

    def remove_temporaries(self):
        """Deletes temporary files a killed process left mid-write (never a
        finished file: those carry their final names). The folder is locked
        while a command writes it, so every temporary file here is a leftover."""
        for folder in (self.path, self.checkpoints_path):
            if folder.is_dir():
                # TEMP_PREFIX: every writer now; ".*.tmp*": the names earlier versions used.
                for path in [*folder.glob(f"{TEMP_PREFIX}*"), *folder.glob(".*.tmp*")]:
                    if path.is_file():
                        path.unlink(missing_ok=True)

    # -- manifest ---------------------------------------------------------

    def read_manifest(self):
        """The manifest as a dict."""
        try:
            with open(self.manifest_path, encoding="utf-8") as handle:
                return json.load(handle)
        except FileNotFoundError:
            raise RunFolderError(f"{self.path} is not a run folder (no {MANIFEST}).") from None
        except ValueError as error:
            raise RunFolderError(f"{self.manifest_path} is not valid JSON ({error}).") from None

    def read_record(self):
        """The manifest as a records.Manifest (typed; writes back byte-identical)."""
        try:
            return Manifest.from_dict(self.read_manifest())
        except ValueError as error:  # records.ManifestError: not a JSON object
            raise RunFolderError(f"{self.manifest_path} is not a run manifest ({error}).") from None

    def write_manifest(self, manifest):
        """Replaces the manifest (a dict or a records.Manifest) atomically."""
        manifest = manifest.to_dict() if isinstance(manifest, Manifest) else dict(manifest)
        manifest.setdefault("format", RUN_FORMAT)
        manifest.setdefault("format_version", RUN_FORMAT_VERSION)
        atomic_write_json(self.manifest_path, manifest)

    def update_manifest(self, **fields):
        """Sets top-level manifest fields and writes it back; returns the manifest."""
        manifest = self.read_manifest()
        manifest.update(fields)
        self.write_manifest(manifest)
        return manifest

    # -- state (resume point) ---------------------------------------------

    def read_state(self):
        """The last completed epoch's state, or None before the first epoch ends."""
        try:
            with open(self.state_path, encoding="utf-8") as handle:
                state = json.load(handle)
        except FileNotFoundError:
            return None
        except ValueError as error:
            raise RunFolderError(f"{self.state_path} is not valid JSON ({error}).") from None
        checkpoint = self.path / state["checkpoint"]
        if not checkpoint.is_file():
            raise RunFolderError(f"{self.state_path} names {checkpoint}, which is missing.")
        return state

    def write_state(self, state):
        """Records a completed epoch (after its checkpoint is complete)."""
        atomic_write_json(self.state_path, state)

    def completed_epochs(self):
        """Number of completed epochs (0 when none or unknown)."""
        count, unit = self.progress()
        return count if unit == "epoch" else 0

    def completed_updates(self):
        """Number of checkpointed updates of a protocol counted in updates (0 when none or unknown)."""
        count, unit = self.progress()
        return count if unit == "update" else 0

    def progress(self):
        """(count, "epoch" or "update"): what the last checkpoint holds ((0, "epoch") when none or unknown)."""
        try:
            return _progress(self.read_state())
        except (RunFolderError, KeyError, TypeError, ValueError):
            return 0, "epoch"

    def progress_text(self):
        """"3 epochs completed", "120 updates checkpointed": what a --resume continues from."""
        count, unit = self.progress()
        return f"{plural(count, unit)} {'completed' if unit == 'epoch' else 'checkpointed'}"

    def recorded_model_checksum(self):
        """The weights checksum model.keras must have, and where it is recorded; None when none is.

        A complete run records it as result.model_weights_checksum. Runs from
        before that field are checked against result.weights_checksum (the
        final weights) where model.keras holds them: the study models, which
        save their final model, and runs whose best epoch was the last. A run
        still training replaces model.keras as it goes: nothing to check yet.

        Returns:
            (checksum, "manifest.json result.<field>") or None.
        """
        manifest = self.read_record()
        result = manifest.result or Result()
        if not manifest.complete:
            return None
        if result.model_weights_checksum:
            return result.model_weights_checksum, f"{MANIFEST} result.model_weights_checksum"
        final = result.weights_checksum
        protocol = _protocol_of(manifest)
        final_model = protocol is not None and protocol.keeps_final_model
        if final and (final_model or (result.best_epoch and result.best_epoch == result.epochs_completed)):
            return final, f"{MANIFEST} result.weights_checksum"
        return None

    def has_results(self):
        """True once the run has something to show: a completed epoch or a checkpointed update (something
        to continue from), or a complete manifest (a protocol counted in updates removes its checkpoints
        once complete)."""
        if self.progress()[0] > 0:
            return True
        try:
            return self.read_record().complete
        except RunFolderError:
            return False

    def checkpoint_path(self, epoch):
        """Where the checkpoint of a completed epoch (from 1) is written."""
        return self.checkpoints_path / f"epoch-{epoch:04d}.weights.h5"

    def update_checkpoint_path(self, update):
        """Where the checkpoint after an update (from 1) of a protocol counted in updates is written."""
        return self.checkpoints_path / f"update-{update:07d}.weights.h5"

    def remove_checkpoints(self):
        """Deletes state.json and checkpoints/ (a complete run of a protocol counted in updates needs neither)."""
        self.state_path.unlink(missing_ok=True)
        if self.checkpoints_path.is_dir():
            shutil.rmtree(self.checkpoints_path)

    def remove_checkpoints_except(self, keep):
        """Deletes checkpoint files other than `keep` (leftovers of earlier epochs
        and temporary files of an interrupted write)."""
        if not self.checkpoints_path.is_dir():
            return
        keep = Path(keep).resolve()
        for path in self.checkpoints_path.iterdir():
            if path.resolve() != keep:
                path.unlink(missing_ok=True)

    # -- history ----------------------------------------------------------

    def read_history(self):
        """history.csv as a list of dicts with numbers parsed (missing values None)."""
        if not self.history_path.is_file():
            return []
        with open(self.history_path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        return [parse_row(row) for row in rows]

    def truncate_history(self, epochs):
        """Keeps only the rows of the first `epochs` epochs (drops the partial
        epoch an interruption left), atomically."""
        rows = [row for row in self.read_history() if row["epoch"] is not None and row["epoch"] <= epochs]
        atomic_write(self.history_path, csv_text(rows))
        return rows

    def open_history(self):
        """A HistoryWriter appending to history.csv (creating it with a header)."""
        return HistoryWriter(self.history_path)


class Replacement:
    """--overwrite without losing the old run to a new one that fails early.

    The old run folder is renamed aside (`.<name>.previous`, beside it, so
    the same file system and an atomic rename), the new run is made under the
    old name, and the old one is deleted only once the new one has completed
    an epoch (`commit`). If the new run ends before that, `rollback` removes
    it and renames the old one back, byte for byte as it was. If the command
    dies in between (kill -9), `recover` finishes the job on the next command
    that writes this folder.

    Args:
        folder: the RunFolder being replaced.
    """

    def __init__(self, folder):
        self.folder = folder
        self.aside = folder.path.parent / f".{folder.path.name}.previous"
        self.active = False

    def begin(self):
        """Moves the old run aside; the folder's name is then free for the new run."""
        if self.aside.exists():
            raise RunFolderError(f"{self.aside} exists (an old run kept aside); move it away first.")
        os.rename(self.folder.path, self.aside)
        self.active = True

    def commit(self):
        """Deletes the old run: the new one has something to replace it with."""
        shutil.rmtree(self.aside)
        self.active = False

    def rollback(self):
        """Removes the new run and puts the old one back under its name."""
        if self.folder.path.exists():
            shutil.rmtree(self.folder.path)
        os.rename(self.aside, self.folder.path)
        self.active = False

    def recover(self):
        """Settles what an --overwrite that was killed left behind; returns what it did, or None.

        Its new run completed an epoch: the old run was due to be deleted, and
        is. It did not: the old run is put back.
        """
        if not self.aside.is_dir():
            return None
        if self.folder.exists() and self.folder.has_results():
            self.commit()
            return (f"removed {self.aside}: the run that an interrupted --overwrite had kept aside "
                    f"(its replacement {self.folder.path} has completed {plural(self.folder.completed_epochs(), 'epoch')})")
        if self.folder.path.exists() and any(self.folder.path.iterdir()) and not self.folder.exists():
            raise RunFolderError(
                f"{self.aside} holds the run an interrupted --overwrite kept aside, and {self.folder.path} is not a "
                "run folder; move one of them away."
            )
        self.rollback()
        return (f"restored {self.folder.path} from {self.aside}: an earlier --overwrite was stopped before its "
                "new run completed an epoch")


def _progress(state):
    """(count, unit) of a state.json: its "epoch" (Lotter's recipe) or its "update" (a protocol counted in updates)."""
    if not state:
        return 0, "epoch"
    if "update" in state:
        return int(state["update"]), "update"
    return int(state["epoch"]), "epoch"


def _protocol_of(manifest):
    # The registry's base alone: the kinds' modules reach recipe_training.py, which uses this module.
    from prednet_keras.model_kinds.base import protocol_of

    return protocol_of(manifest)
