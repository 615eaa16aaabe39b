"""One writer per run folder: the lock a command holds while it writes one.

Two commands writing one run folder (a --resume while the run still trains, an
--overwrite of a run in progress) would interleave their writes. prednet-train
takes this lock before it writes anything and holds it until it ends; a
command that cannot take it changes nothing and names the holder.

The lock file is `<parent>/.prednet-locks/<name>.lock`, beside the folder, not
in it: a refused command must leave the folder byte for byte as it was, and
--overwrite moves the folder aside and back under the lock of its name. It is
a filelock.FileLock (flock on POSIX), which the kernel releases when its holder
dies, however it dies, so a killed command never leaves a stale lock. The
training process inherits the lock's descriptor (childproc.start's pass_fds),
so the lock lasts until the command and its training process are both gone.

Who holds it is in `<name>.owner` (pid, command, since), written by the holder
once it has the lock and removed before it lets go; a separate file, because
some filelock versions truncate the lock file when they try it.

`FolderLock` is the same lock with its files named by the caller: the study
folder's lock is inside the study folder (study/runner.py).
"""

import json
import os
import socket
import sys
import time
from pathlib import Path

from prednet_keras.files.diskwrite import atomic_write_json
from prednet_keras.session.folder import RunFolderError

__all__ = ["LOCKS", "FolderLock", "RunFolderLocked", "RunLock"]

LOCKS = ".prednet-locks"


class RunFolderLocked(RunFolderError):
    """Another command is writing this run folder."""


class FolderLock:
    """An exclusive lock (filelock.FileLock) with a record of its holder beside it.

    Args:
        folder: the folder it guards (named in messages).
        lock_path: the lock file.
        owner_path: the holder's record (pid, host, command, since).
    """

    def __init__(self, folder, lock_path, owner_path):
        self.folder = Path(os.path.abspath(folder))
        self.lock_path = Path(lock_path)
        self.owner_path = Path(owner_path)
        self._lock = None

    def __repr__(self):
        return f"{type(self).__name__}({str(self.folder)!r}, held={self.held})"

    @property
    def held(self):
        """Whether this object holds the lock."""
        return self._lock is not None

    def acquire(self):
        """Takes the lock, or raises RunFolderLocked naming the holder. Returns self."""
        import filelock

        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(str(self.lock_path), timeout=0)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise RunFolderLocked(self._held_elsewhere()) from None
        self._lock = lock
        atomic_write_json(self.owner_path, {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        })
        return self

    def release(self):
        """Lets go of the lock (a no-op when not held)."""
        if self._lock is None:
            return
        try:
            self.owner_path.unlink(missing_ok=True)
        finally:
            self._lock.release()
            self._lock = None

    def fds(self):
        """The lock's descriptor, for a child to inherit (empty where the filelock in use hides it)."""
        context = getattr(self._lock, "_context", None)
        fd = getattr(context, "lock_file_fd", None)
        return (fd,) if isinstance(fd, int) else ()

    def owner(self):
        """The holder's record (pid, host, command, since), or None when unknown."""
        try:
            with open(self.owner_path, encoding="utf-8") as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def holder(self):
        """Who holds the lock, in words ("pid 42: prednet-study run ..., since ...")."""
        owner = None
        # The holder writes its record just after taking the lock.
        for _ in range(10):
            owner = self.owner()
            if owner:
                break
            time.sleep(0.1)
        if owner:
            who = f"pid {owner.get('pid')}"
            if owner.get("host") and owner["host"] != socket.gethostname():
                who += f" on {owner['host']}"
            who += f": {owner.get('command')}, since {owner.get('since')}"
        else:
            who = f"its holder left no record in {self.owner_path}"
        return who

    def _held_elsewhere(self):
        return (f"{self.folder} is being written by another command ({self.holder()}); nothing was changed. "
                "Wait for it to end, or stop it.")

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False


class RunLock(FolderLock):
    """The lock on one run folder's name, beside the folder (see the module's docstring).

    Args:
        folder: the run folder (need not exist).
    """

    def __init__(self, folder):
        folder = Path(os.path.abspath(folder))
        directory = folder.parent / LOCKS
        super().__init__(folder, directory / f"{folder.name}.lock", directory / f"{folder.name}.owner")
