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
from pathlib import Path

from prednet_keras.data.errors import DataError
from prednet_keras.files.diskwrite import (  # noqa: F401  (the data layer's writers use them from here)
    SPACE_ERRORS,
    TEMP_PREFIX,
    room_for,
    space_message,
    sweep_stale_temps,
    temp_path_for,
)


def space_error(error, output, needed=None, at_least=False):
    """space_message as the data layer's DataError."""
    return DataError(space_message(error, output, needed=needed, at_least=at_least))


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


def write_bytes_whole(output, data, overwrite=False):
    """Writes the bytes `data` to `output` whole or not at all (check_output, a temporary file beside it,
    commit): a file that is there is replaced only with `overwrite`, and never by a half-written one."""
    check_output(output, overwrite)
    temp = temp_path_for(output)
    try:
        temp.write_bytes(data)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    commit(temp, output, overwrite)


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
