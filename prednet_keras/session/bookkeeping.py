"""One training process's work on one run folder (issue 27): what every protocol shares.

The one training session (`training.train`) opens a `RunSession` and hands it to the run's protocol
(`recipe_training.run_training`: Lotter's recipe, Keras fit, a checkpoint every epoch; `protocol_training.run_protocol`:
a model kind's protocol counted in updates, checkpointed every few minutes): it reads the run's manifest (typed
for reading: `recorded`), restores a checkpoint after checking it is the one recorded, records this
process in its `sessions` (started, pid, the fields the driver gives; an earlier process that never
said how it ended is marked killed), marks the run running, times the training, opens history.csv,
draws loss.png and marks the run complete at the end. `mark_stopped` records a process that ended
early (interrupted, failed), for any protocol. What the run prints while it trains: `display`.

Why not Keras' `BackupAndRestore` and `CSVLogger`: BackupAndRestore writes its weights in place and its
epoch in a second file after them, so a kill during or between the two leaves a backup that is
corrupt or names the wrong epoch, and it deletes the backup when training ends, where a run keeps
its last checkpoint to be continued with more epochs; it also keeps no hash to refuse a file changed
since. CSVLogger writes one row per epoch, where history.csv also holds every step's loss (the
study compares per-step curves), and has no way to cut the rows of an epoch a resume runs again.
No framework at import.
"""

import contextlib
import os
import time

from prednet_keras.files.diskwrite import file_sha256
from prednet_keras.session import folder as run_folders
from prednet_keras.session.history import HISTORY_FIELDS, HistoryWriter, draw_loss
from prednet_keras.session.records import Manifest

__all__ = ["RunSession", "check_checkpoint_file", "mark_stopped", "now", "resume_entry"]


def now():
    """The time a session record holds (local, with its UTC offset)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def resume_entry(resume, **where):
    """The manifest's record of one --resume (records.Resume, as a dict): its command and time, where it
    continued (`where`: after_epoch or after_update) and the code it ran (with code_changed where it went on
    across a change of code: start.code_to_resume_with), from the resume record prednet-train passed."""
    entry = {"command": resume.get("command"), "time": resume.get("time") or now(), **where}
    for key in ("code", "code_changed"):
        if resume.get(key) is not None:
            entry[key] = resume[key]
    return entry


class RunSession:
    """This process's work on one run folder: its manifest, its session record, its history.

    Args:
        run_dir: the run folder (its manifest written by prednet-train).

    Attributes:
        folder: the RunFolder.
        manifest: the manifest as read, a dict the driver adds to; `write` replaces the file.
        record: this process's entry in manifest["sessions"] once `begin` has run.
    """

    def __init__(self, run_dir):
        self.folder = run_folders.RunFolder(run_dir)
        self.manifest = self.folder.read_manifest()
        self.record = None

    @property
    def recorded(self):
        """The manifest as it stands, typed (`records.Manifest`) for reading; written through `manifest`."""
        return Manifest.coerce(self.manifest)

    def restore_checkpoint(self, model, state):
        """Loads the checkpoint `state` (state.json) names into `model`, weights and optimizer state.

        The file's sha256 is checked before Keras reads it and its weights after, each against what was
        recorded when it was written; the folder is not written.

        Raises:
            run_folders.RunFolderError: the file or its weights are not the ones recorded.
        """
        from prednet_keras.models import starting_point

        checkpoint = self.folder.path / state["checkpoint"]
        check_checkpoint_file(checkpoint, state)
        # Optimizer variables must exist before load_weights can restore them.
        model.optimizer.build(model.trainable_variables)
        model.load_weights(checkpoint)
        _verify_checkpoint(self.folder, self.manifest, state, starting_point.weights_checksum(model))

    def begin(self, **fields):
        """Records this process ({"started", "pid", **fields}) in the manifest, marks the run running,
        removes temporaries left by an earlier process and writes the manifest.

        An earlier process that never recorded its end was killed (SIGKILL, a power cut); an error
        recorded by one that failed is moved to that session (and `earlier_errors`), as it is not the
        error of the run going on now.

        Returns:
            The session record (the driver may add to it; `write` records it).
        """
        manifest = self.manifest
        for earlier in manifest.setdefault("sessions", []):
            if "ended" not in earlier:
                earlier.setdefault("status", "killed")
        if "error" in manifest:
            failed = [s for s in manifest["sessions"] if s.get("status") == "failed"]
            if failed:
                failed[-1].setdefault("error", manifest["error"])
            manifest.setdefault("earlier_errors", []).append(manifest.pop("error"))
        self.record = {"started": now(), "pid": os.getpid(), **fields}
        self.manifest["sessions"].append(self.record)
        self.manifest["status"] = "running"
        self.folder.remove_temporaries()
        self.write()
        return self.record

    def write(self):
        """Replaces manifest.json with the manifest as it stands (atomically)."""
        self.folder.write_manifest(self.manifest)

    @contextlib.contextmanager
    def timed(self):
        """Records the seconds the block took in the session ("seconds"), however it ends."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.record["seconds"] = round(time.perf_counter() - started, 3)

    def open_history(self, columns=HISTORY_FIELDS, fresh=False):
        """history.csv's writer: `columns` (Lotter's recipe's by default); `fresh` starts the file anew
        (a run that cannot resume), else rows are appended."""
        return HistoryWriter(self.folder.history_path, columns=columns, fresh=fresh)

    def draw_loss(self, rows=None):
        """Draws loss.png from history rows (None: history.csv's); a failure is a warning, never the run's."""
        rows = self.folder.read_history() if rows is None else rows
        if rows:
            draw_loss(rows, self.folder.loss_plot_path, title=self.folder.path.name)

    def complete(self, **fields):
        """Ends the session ("ended", then `fields`), marks the run complete and writes the manifest."""
        self.record["ended"] = now()
        self.record.update(fields)
        self.manifest["status"] = "complete"
        self.write()


def check_checkpoint_file(checkpoint, state):
    """Fails before Keras reads a checkpoint whose bytes are not the ones written at its epoch (or update).

    Keras loads what it recognises and passes over the rest: an optimizer state of another
    size is dropped with a warning (the run would go on from a fresh Adam), unknown groups are
    ignored, a kernel of another shape fails with a message full of numbers. The file's own
    hash, recorded when it was written, catches all of them. Runs from before that record are
    checked after loading, by their weights (_verify_checkpoint).
    """
    expected = state.get("checkpoint_sha256")
    if expected is not None and file_sha256(checkpoint) != expected:
        raise run_folders.RunFolderError(
            f"{checkpoint}: not the checkpoint written at {_moment(state)} ({run_folders.STATE} records sha256 "
            f"{expected[:12]}..., the file's differs): it was changed or replaced since, so this run cannot be "
            "continued from it."
        )


def _moment(state):
    """"epoch 3" (Lotter's recipe) or "update 120" (a protocol counted in updates): what a state.json records."""
    return f"update {state['update']}" if "update" in state else f"epoch {state['epoch']}"


def _verify_checkpoint(folder, manifest, state, actual):
    """Fails when a loaded checkpoint's weights are not the ones recorded with it.

    state.json records the checksum of each checkpoint it names; runs from
    before that record are checked against result.weights_checksum (the final
    weights) when the checkpoint is the final epoch's.
    """
    expected, where = state.get("weights_checksum"), f"{run_folders.STATE} weights_checksum"
    result = Manifest.coerce(manifest).result
    if expected is None and result and result.weights_checksum and result.epochs_completed == state.get("epoch"):
        expected, where = result.weights_checksum, f"{run_folders.MANIFEST} result.weights_checksum"
    if expected is not None and expected != actual:
        raise run_folders.RunFolderError(
            f"{folder.path / state['checkpoint']} does not hold the weights recorded for it ({where} "
            f"{expected[:12]}..., the file holds {actual[:12]}...): it was changed after it was written, so "
            "this run cannot be continued."
        )


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
    folder = run_folders.RunFolder(run_dir)
    try:
        manifest = folder.read_manifest()
    except run_folders.RunFolderError:
        return False
    sessions = manifest.get("sessions") or []
    ours = bool(sessions) and sessions[-1].get("pid") == os.getpid() and "ended" not in sessions[-1]
    if not ours and manifest.get("status") != "created":
        return False
    manifest["status"] = status
    if error:
        manifest["error"] = error
    if ours:
        sessions[-1]["ended"] = now()
        sessions[-1]["end_epoch"] = folder.completed_epochs()
        if folder.completed_updates():
            sessions[-1]["end_update"] = folder.completed_updates()
        sessions[-1]["status"] = status
        if error:
            sessions[-1]["error"] = error
    try:
        folder.write_manifest(manifest)
    except (OSError, run_folders.RunFolderError):
        # A full disk: the manifest is replaced atomically or not at all, so the last record stands.
        return False
    return True
