"""A small TOML file the user names (a study's spec, a confirmatory plan), its text read whole or the file refused
unread: a device, a FIFO, a folder, a file larger than any such file, text that is not UTF-8."""

import os
import stat


class SmallTextError(ValueError):
    """A file that is not the small text file asked for; the message names the file and the rule."""


def read_small_text(path, what, max_bytes):
    """The UTF-8 text of the `what` file at `path` (e.g. what="spec"), at most `max_bytes` long.

    Raises:
        SmallTextError: missing, unreadable, not a regular file, larger than `max_bytes`, not UTF-8.
    """
    try:
        # O_NONBLOCK: opening a FIFO would otherwise wait for a writer.
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise SmallTextError(f"{path}: no such {what} file.") from None
    except OSError as error:
        raise SmallTextError(f"{path}: cannot read the {what} ({error.strerror or error}).") from None
    try:
        mode = os.fstat(handle).st_mode
        if stat.S_ISDIR(mode):
            raise SmallTextError(f"{path}: a folder, not a {what} file.")
        if not stat.S_ISREG(mode):
            raise SmallTextError(f"{path}: not a regular file; a {what} is a TOML file.")
        chunks, size = [], 0
        while size <= max_bytes and (chunk := os.read(handle, 1 << 16)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise SmallTextError(f"{path}: cannot read the {what} ({error.strerror or error}).") from None
    finally:
        os.close(handle)
    if size > max_bytes:
        raise SmallTextError(f"{path}: larger than {max_bytes // 1024:,} KiB; a {what} is a few KB of "
                             "TOML, so this is not one.")
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as error:
        raise SmallTextError(f"{path}: cannot read the {what} (not UTF-8 text: {error}).") from None
