"""What every command shares: turning user errors into one clear line and a non-zero exit."""

import functools
import os

import click

# Exceptions that describe a problem with the user's input, not a bug. Set
# PREDNET_DEBUG=1 to see the traceback anyway.
USER_ERRORS = (ValueError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


def fail_on_user_errors(command):
    """Decorator for a Click callback: user errors exit 1 with `Error: <message>`."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except click.ClickException:
            raise
        except USER_ERRORS as error:
            if os.environ.get("PREDNET_DEBUG"):
                raise
            raise click.ClickException(_one_line(error)) from None

    return wrapper


def _one_line(error):
    text = str(error) or type(error).__name__
    if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError)) and error.filename:
        text = f"{error.strerror or text}: {error.filename}"
    return " ".join(text.split())
