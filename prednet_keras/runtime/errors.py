"""Which errors are the user's (bad input, a missing file, a full disk) and how each is told: one line.

Every command (cli/) and every process a command starts (the training worker) reports these as
`Error: <one line>` with exit status 1; anything else is a bug and keeps its traceback. PREDNET_DEBUG=1
shows the traceback of user errors too.
"""

from prednet_keras.files.diskwrite import nearest_existing

__all__ = ["USER_ERRORS", "one_line"]

# ValueError covers the package's own refusals (DataError, RunFolderError, SpecError, ModelFileError,
# NoRoomError, MissingDependencyError, ...): each subclasses it.
USER_ERRORS = (ValueError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


def one_line(error):
    """The error's message on one line; a file error names its file."""
    text = str(error) or type(error).__name__
    if isinstance(error, NotADirectoryError) and error.filename:
        text = f"{nearest_existing(error.filename)} is a file, not a folder (needed for {error.filename})"
    elif isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError)) and error.filename:
        text = f"{error.strerror or text}: {error.filename}"
    return " ".join(text.split())
