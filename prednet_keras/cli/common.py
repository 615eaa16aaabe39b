"""What every command shares: turning user errors into one clear line and a non-zero exit."""

import functools
import os

import click

from prednet_keras.runtime.errors import USER_ERRORS, one_line


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
            raise click.ClickException(one_line(error)) from None

    return wrapper


class IntList(click.ParamType):
    """Comma-separated positive integers; `example` is the one a malformed value's message gives."""

    name = "N,N,..."

    def __init__(self, example="3,48,96,192"):
        self.example = example

    def get_metavar(self, param, ctx=None):
        return self.name

    def convert(self, value, param, ctx):
        if isinstance(value, (tuple, list)):
            return tuple(value)
        try:
            numbers = tuple(int(v) for v in str(value).split(","))
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of integers (e.g. {self.example}).", param, ctx)
        if any(n < 1 for n in numbers):
            self.fail(f"{value!r}: every entry must be >= 1.", param, ctx)
        return numbers


class SeedRanges(click.ParamType):
    """Seeds as a comma-separated list of seeds and inclusive ranges, e.g. 100-103,110."""

    name = "N[-M],..."
    # A range is expanded into a list: one this long is a typo, not a portion of a study.
    MOST = 100_000

    def get_metavar(self, param, ctx=None):
        return self.name

    def convert(self, value, param, ctx):
        if isinstance(value, (tuple, list)):
            return tuple(value)
        seeds = []
        for part in str(value).split(","):
            first, _, last = part.strip().partition("-")
            try:
                low, high = int(first), int(last or first)
            except ValueError:
                self.fail(f"{value!r}: {part.strip()!r} is not a seed or a range of seeds (e.g. 100-103,110).",
                          param, ctx)
            if low < 0 or high < low or high - low >= self.MOST:
                self.fail(f"{value!r}: {part.strip()!r} must be a seed >= 0 or a range N-M with N <= M "
                          f"(at most {self.MOST:,} seeds).", param, ctx)
            seeds.extend(range(low, high + 1))
        return tuple(dict.fromkeys(seeds))


class FrameSize(click.ParamType):
    """HxW, e.g. 128x160."""

    name = "HxW"

    def get_metavar(self, param, ctx=None):
        return self.name

    def convert(self, value, param, ctx):
        if isinstance(value, (tuple, list)):
            return tuple(value)
        parts = str(value).lower().replace("×", "x").split("x")
        try:
            height, width = (int(p) for p in parts)
        except ValueError:
            self.fail(f"{value!r} is not a frame size HxW (e.g. 128x160).", param, ctx)
        if height < 1 or width < 1:
            self.fail(f"{value!r}: height and width must be positive.", param, ctx)
        return height, width


class ModelKindName(click.ParamType):
    """A registered model kind (model_kinds), or a user's model: MODULE:FUNCTION or FILE.py:FUNCTION."""

    name = "model"

    def __init__(self, bench=False):
        from prednet_keras import model_kinds

        self.bench = bench
        self.names = model_kinds.names(bench=bench)

    def get_metavar(self, param, ctx=None):
        return "[" + "|".join(self.names) + ("]" if self.bench else "|MODULE:FUNCTION]")

    def shell_complete(self, ctx, param, incomplete):
        from click.shell_completion import CompletionItem

        return [CompletionItem(name) for name in self.names if name.startswith(incomplete)]

    def convert(self, value, param, ctx):
        from prednet_keras import model_kinds

        if value in self.names:
            return value
        if not self.bench and model_kinds.is_reference(value):
            # A file path is made absolute: the run records (and a training process reads) that file.
            return model_kinds.get(value).canonical()
        quoted = ", ".join(repr(name) for name in self.names)
        extra = "" if self.bench else ", or a user's model MODULE:FUNCTION or FILE.py:FUNCTION"
        self.fail(f"{value!r} is not one of {quoted}{extra}.", param, ctx)
