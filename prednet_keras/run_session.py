"""One training process's work on one run folder (issue 27): what both training drivers share.

`train.run_training` (Lotter's recipe, Keras fit with checkpoints) and `study_train.run_study_training`
(a model kind's protocol, no checkpoints) each open a `RunSession`: it reads the run's manifest, records
this process in its `sessions` (started, pid, the fields the driver gives), marks the run running, times
the training, opens history.csv and marks the run complete at the end. `mark_stopped` records a process
that ended early (interrupted, failed), for either driver. No framework at import.
"""

import contextlib
import os
import time

from prednet_keras import runs
from prednet_keras.run_history import HISTORY_FIELDS, HistoryWriter

__all__ = ["RunSession", "mark_stopped", "now"]


def now():
    """The time a session record holds (local, with its UTC offset)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


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
        self.folder = runs.RunFolder(run_dir)
        self.manifest = self.folder.read_manifest()
        self.record = None

    def begin(self, **fields):
        """Records this process ({"started", "pid", **fields}) in the manifest, marks the run running,
        removes temporaries left by an earlier process and writes the manifest.

        Returns:
            The session record (the driver may add to it; `write` records it).
        """
        self.record = {"started": now(), "pid": os.getpid(), **fields}
        self.manifest.setdefault("sessions", []).append(self.record)
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

    def complete(self, **fields):
        """Ends the session ("ended", then `fields`), marks the run complete and writes the manifest."""
        self.record["ended"] = now()
        self.record.update(fields)
        self.manifest["status"] = "complete"
        self.write()


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
    folder = runs.RunFolder(run_dir)
    try:
        manifest = folder.read_manifest()
    except runs.RunFolderError:
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
        sessions[-1]["status"] = status
        if error:
            sessions[-1]["error"] = error
    try:
        folder.write_manifest(manifest)
    except (OSError, runs.RunFolderError):
        # A full disk: the manifest is replaced atomically or not at all, so the last record stands.
        return False
    return True
