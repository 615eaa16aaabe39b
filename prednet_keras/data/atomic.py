"""Writing an output file whole or not at all, and saying so when the disk is full.

An output is written to a temporary file in the same folder, named
`.prednet-tmp-<host>-<pid>-<output name>`, and moved into place only when
complete. On any failure the temporary file is removed; one left by a
process that was killed is removed when the next write into that folder
starts (its process is gone: same host, pid no longer running).

A full disk (or quota, or a file size limit) is reported as one line with
how much space the output needs. The HDF5 library is never shown the failed
write: GuardedFile records it and lets the library finish without data.
HDF5 handles its own write errors poorly (a failed flush at close left h5py
objects half-closed, and the interpreter then crashed at exit with signal
11, which looked like a killed process worth resuming).
"""

import errno
import io
import os
import re
import shutil
import socket
from pathlib import Path

try:
    import resource  # POSIX only: file size limits
except ImportError:
    resource = None

from prednet_keras.data.errors import DataError
from prednet_keras.data.guards import format_bytes

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


def check_output(output, overwrite):
    """Fails early, before any work, when `output` cannot be written.

    Args:
        output: the destination path.
        overwrite: whether an existing file may be replaced.
    """
    output = Path(output)
    if output.exists() and not overwrite:
        raise DataError(f"{output}: already exists; not overwritten (pass overwrite=True / --overwrite)")
    if output.is_dir():
        raise DataError(f"{output}: is a folder, not a file name")
    if not output.parent.is_dir():
        raise DataError(f"{output.parent}: output folder does not exist")


def commit(temp, output, overwrite):
    """Moves a finished temp file into place atomically.

    Without overwrite, a hard link makes "create only if absent" atomic, so a
    file that appeared while we worked is still not replaced.
    """
    temp, output = Path(temp), Path(output)
    if overwrite:
        os.replace(temp, output)
        return
    try:
        os.link(temp, output)
    except FileExistsError:
        temp.unlink()
        raise DataError(f"{output}: already exists; not overwritten") from None
    except OSError:
        # No hard links on this file system: the check and the move are two steps.
        if output.exists():
            temp.unlink()
            raise DataError(f"{output}: already exists; not overwritten") from None
        os.replace(temp, output)
    else:
        temp.unlink()


def space_error(error, output, needed=None, at_least=False):
    """The one-line DataError for a write that failed for lack of space.

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
    return DataError(f"{reason} writing {output}{detail}; {kept}")


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


class GuardedFile(io.RawIOBase):
    """A read-write file that records its first write error instead of raising it.

    Given to h5py as a file object: after a failed write the HDF5 library
    carries on as if it had written (later writes are dropped), so it stays
    consistent and closes cleanly; the writer checks `error` and reports it,
    with `extent`, the size the file was growing to.

    Args:
        path: the file to create (truncated if it exists).
    """

    def __init__(self, path):
        super().__init__()
        self._file = open(path, "w+b", buffering=0)
        self.error = None
        self.extent = 0  # bytes the file would hold had no write failed

    def readable(self):
        return True

    def writable(self):
        return True

    def seekable(self):
        return True

    def fileno(self):
        return self._file.fileno()

    def seek(self, offset, whence=io.SEEK_SET):
        return self._file.seek(offset, whence)

    def tell(self):
        return self._file.tell()

    def readinto(self, buffer):
        return self._file.readinto(buffer)

    def write(self, data):
        view = memoryview(data).cast("B")
        # The library seeks before each write, so offsets stay right when a
        # write is dropped.
        self.extent = max(self.extent, self._file.tell() + len(view))
        if self.error is None:
            try:
                # A write that reaches the limit can return short without an
                # error; only the next one fails. Loop so none is lost silently.
                done = 0
                while done < len(view):
                    written = self._file.write(view[done:])
                    if not written:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    done += written
            except OSError as exc:
                self.error = exc
        return len(view)

    def truncate(self, size=None):
        if self.error is None:
            try:
                return self._file.truncate(size)
            except OSError as exc:
                self.error = exc
        return size

    def flush(self):
        pass

    def sync(self):
        """Forces the data to disk; a late out-of-space error (NFS, quotas) shows here."""
        if self.error is None:
            try:
                os.fsync(self._file.fileno())
            except OSError as exc:
                self.error = exc

    def close(self):
        if not self._file.closed:
            self._file.close()
        super().close()
