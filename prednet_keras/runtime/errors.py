"""Which errors are the user's (bad input, a missing file, a full disk) and how each is told: one line.

Every command (cli/) and every process a command starts (the training worker) reports these as
`Error: <one line>` with exit status 1; anything else is a bug and keeps its traceback. PREDNET_DEBUG=1
shows the traceback of user errors too.
"""

__all__ = ["USER_ERRORS", "one_line"]

# ValueError covers the package's own refusals (DataError, RunFolderError, SpecError, ModelFileError,
# NoRoomError, MissingDependencyError, ...): each subclasses it.
USER_ERRORS = (ValueError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


def one_line(error):
    """The error's message on one line; a file error names its file."""
    text = str(error) or type(error).__name__
    if isinstance(error, NotADirectoryError) and error.filename:
        text = f"{_file_in_the_way(error.filename)} is a file, not a folder (needed for {error.filename})"
    elif isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError)) and error.filename:
        text = f"{error.strerror or text}: {error.filename}"
    return " ".join(text.split())


def _file_in_the_way(path):
    """The first part of `path` that is there and is not a folder (the path itself where none is)."""
    from pathlib import Path

    path = Path(path)
    for part in reversed(path.parents):
        if part.exists() and not part.is_dir():
            return part
    return path
