"""Every file the package writes: one temporary name, swept when its writer is gone, and one line
when the disk is full; atomic_write, atomic_write_json and write_through_temporary write one whole.

A file is written to `.prednet-tmp-<host>-<pid>-<name>` beside it and moved into place when complete
(dataset files, run-folder files, models). A temporary file left by a process that was killed is removed
when the next write into that folder starts: same host, pid no longer running. A write that fails for
lack of space (a full disk, a quota, a file size limit) is reported as one line with what was needed and
what is free, never as a traceback or an advice to resume.
"""

import errno
import hashlib
import json
import math
import os
import re
import shutil
import socket
from pathlib import Path

try:
    import resource  # POSIX only: file size limits
except ImportError:
    resource = None

__all__ = ["NoRoomError", "SPACE_ERRORS", "TEMP_PREFIX", "atomic_write", "atomic_write_json", "format_bytes",
           "is_space_error", "json_safe", "require_room", "room_for", "space_message", "sweep_stale_temps", "temp_path_for",
           "write_through_temporary"]

TEMP_PREFIX = ".prednet-tmp-"
_TEMP_NAME = re.compile(r"^\.prednet-tmp-(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)-(?P<name>.+)$")
SPACE_ERRORS = {
    errno.ENOSPC: "no space left on device",
    getattr(errno, "EDQUOT", errno.ENOSPC): "disk quota exceeded",
    errno.EFBIG: "file size limit reached",
}


def _host():
    return re.sub(r"[^A-Za-z0-9]", "_", socket.gethostname()) or "host"


def temp_path_for(output):
    """The temporary file an output is written to before it is moved into place."""
    output = Path(output)
    return output.with_name(f"{TEMP_PREFIX}{_host()}-{os.getpid()}-{output.name}")


def _running(pid):
    if pid == os.getpid() or os.name != "posix":
        return True  # elsewhere os.kill(pid, 0) would end the process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def sweep_stale_temps(output):
    """Removes temporary files in `output`'s folder whose writers are gone.

    A writer is gone when its temp name carries this host and a pid that is
    no longer running. The older name (.<output name>.<pid>.tmp, no host)
    is removed only for this output, where it cannot be someone else's.

    Returns:
        The paths removed.
    """
    output = Path(output)
    old_name = re.compile(rf"^\.{re.escape(output.name)}\.(?P<pid>\d+)\.tmp$")
    host = _host()
    removed = []
    try:
        entries = list(output.parent.iterdir())
    except OSError:
        return removed
    for path in entries:
        match = _TEMP_NAME.match(path.name)
        if match is None or match.group("host") != host:
            match = old_name.match(path.name)
        if match is None or _running(int(match.group("pid"))) or not path.is_file():
            continue
        try:
            path.unlink()
            removed.append(path)
        except FileNotFoundError:
            pass
    return removed




def space_message(error, output, needed=None, at_least=False):
    """The one line that says a write failed for lack of space, and how much it needed.

    Args:
        error: the OSError (ENOSPC, EDQUOT or EFBIG; any other is named as it is).
        output: the output the user asked for.
        needed: estimated bytes the output needs, if known.
        at_least: `needed` is a lower bound (bytes written so far).
    """
    output = Path(output)
    reason = SPACE_ERRORS.get(error.errno) or f"write failed ({error.strerror or error})"
    parts = []
    if needed is not None:
        parts.append(f"{'at least' if at_least else 'about'} {format_bytes(needed)} needed")
    if error.errno == errno.EFBIG:
        limit = _file_size_limit()
        if limit is not None:
            parts.append(f"files may hold {format_bytes(limit)} (ulimit -f)")
    else:
        try:
            parts.append(f"{format_bytes(shutil.disk_usage(output.parent).free)} free")
        except OSError:
            pass
    kept = f"the existing {output.name} is unchanged" if output.exists() else "no file was written"
    detail = f": {', '.join(parts)}" if parts else ""
    return f"{reason} writing {output}{detail}; {kept}"


def _file_size_limit():
    if resource is None:
        return None
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if limit == resource.RLIM_INFINITY else limit


def room_for(path, needed):
    """The OSError that writing `needed` bytes at `path` would meet, or None."""
    limit = _file_size_limit()
    if limit is not None and needed > limit:
        return OSError(errno.EFBIG, os.strerror(errno.EFBIG))
    try:
        free = shutil.disk_usage(Path(path).parent).free
    except OSError:
        return None
    if needed > free:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return None


def format_bytes(count):
    """Bytes as a short human-readable size."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"


def is_space_error(error):
    """Whether `error` is a write that failed for lack of space; HDF5 reports it inside other errors'
    messages ("errno = 28"), so those count too."""
    if isinstance(error, OSError) and error.errno in SPACE_ERRORS:
        return True
    text = str(error)
    return "No space left on device" in text or "errno = 28," in text or "Disk quota exceeded" in text


class NoRoomError(ValueError):
    """A file could not be written, or was not started, for lack of space (disk, quota or file size limit).

    A ValueError: the commands report it as one line, as any problem of the user's machine.
    """


def require_room(path, needed):
    """Raises NoRoomError before a write of `needed` bytes at `path` that cannot fit.

    HDF5 meets a full disk badly (a traceback from every object's finalizer, printed past Python's hooks,
    and sometimes a crash at exit), so a file known not to fit is not started.
    """
    shortage = room_for(path, needed) if needed else None
    if shortage is not None:
        raise NoRoomError(space_message(shortage, path, needed=needed))


class NotWritableError(ValueError):
    """A folder that output cannot go to (one line for the user)."""


def nearest_existing(path):
    """`path`, or the nearest folder above it that exists: where it would be created."""
    existing = Path(path)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return existing


def require_writable_folder(folder):
    """Raises NotWritableError unless `folder` exists as a writable folder or can be created as one: asked before
    the work whose results it would hold starts, so that nothing is computed only to be lost."""
    folder = Path(folder)
    existing = nearest_existing(folder)
    if not existing.is_dir():
        raise NotWritableError(f"{folder} cannot be made: {existing} is a file, not a folder.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise NotWritableError(f"{folder} cannot be written: {existing} is read-only or not writable by this user.")


def atomic_write(path, data):
    """Writes bytes or text to `path` through a temporary file in the same folder.

    Args:
        path: destination.
        data: bytes, or str (written as UTF-8).
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    with _temporary_sibling(path) as temporary:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())


def atomic_write_json(path, obj, compact=False):
    """Writes `obj` as indented JSON, atomically (see atomic_write).

    Args:
        path: destination.
        obj: JSON-serialisable data; NaN and infinity are written as null.
        compact: no indentation or spaces (for large records read by programs).
    """
    layout = {"separators": (",", ":")} if compact else {"indent": 2}
    atomic_write(path, json.dumps(json_safe(obj), sort_keys=False, **layout) + "\n")


class _temporary_sibling:
    """Context manager yielding a temporary path next to `path` (keeping its
    suffix, which Keras and matplotlib use to pick a format); on success the
    file replaces `path`, on failure it is removed.

    The temporary file has the one name every writer of the project uses
    (diskwrite.temp_path_for: `.prednet-tmp-<host>-<pid>-<name>`), so one left
    by a killed process is recognised and removed (RunFolder.remove_temporaries). A write
    that fails for lack of space becomes one NoRoomError line.
    """

    def __init__(self, path, needed=None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        require_room(self.path, needed)
        self.temporary = temp_path_for(self.path)
        # Created here, as mkstemp would, with the permissions of any new file.
        self.temporary.touch(mode=0o666 & ~_umask())

    def __enter__(self):
        return self.temporary

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            os.replace(self.temporary, self.path)
            return False
        try:
            written = self.temporary.stat().st_size
        except OSError:
            written = None
        self.temporary.unlink(missing_ok=True)
        if is_space_error(exc):
            if not (isinstance(exc, OSError) and exc.errno in SPACE_ERRORS):
                exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # HDF5 wraps it in other errors
            raise NoRoomError(space_message(exc, self.path, needed=written or None, at_least=True)) from None
        return False


def _umask():
    current = os.umask(0)
    os.umask(current)
    return current


def write_through_temporary(path, writer, needed=None):
    """Calls `writer(temporary_path)` and moves the result to `path` atomically.

    Args:
        path: destination (its suffix is kept on the temporary name).
        writer: a function that writes a complete file at the path it is given.
        needed: the bytes the file will take, if known: when they do not fit,
            NoRoomError is raised before anything is written.
    """
    with _temporary_sibling(path, needed) as temporary:
        writer(str(temporary))


def json_safe(obj):
    """`obj` as JSON can hold it: NaN and infinities as null, tuples as lists, paths and keys as text, NumPy
    scalars as Python numbers."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return json_safe(obj.item())
    return obj


def file_sha256(path, chunk=1 << 20):
    """sha256 (hex) of a file's bytes, read in chunks: the checksum every record of a file holds."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()
