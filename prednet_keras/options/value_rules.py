"""Rules for values read from files a user writes (a study spec, a model kind's options): each rule
says its type and range in words, and a value that breaks it raises RuleError with the rule and the
value as written, e.g. `must be a number > 0, got "0.001" (a string)`.

The study spec's tables of rules (study/spec/rules.py) and each model kind's rules for its training
options (model_kinds/) are built from these. This module imports no framework.
"""

import dataclasses
import datetime
import math
import re

__all__ = ["NAME", "NAME_RULE", "PATH", "Boolean", "Choice", "Either", "ListOf", "Number", "RuleError", "Text",
           "Whole", "describe", "shown"]


class RuleError(ValueError):
    """A value that breaks its rule. str(): `must be <rule>, got <value> (<its type>)`."""

    def __init__(self, rule, value, wrong_type=False):
        self.rule, self.value, self.wrong_type = rule, value, wrong_type
        got = shown(value)
        if wrong_type and not isinstance(value, dict):
            got += f" ({describe(value)})"
        super().__init__(f"must be {rule}, got {got}")


def describe(value):
    """The TOML type of `value`, in words: "a string", "a float", ..."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, (datetime.date, datetime.time)):
        return "a date or time"
    return type(value).__name__


def shown(value, depth=0):
    """`value` as a spec would write it, short: strings quoted with escapes (a newline shows as \\n)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:60]
        quoted = '"' + text.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
        return quoted if len(value) <= 60 else quoted[:-1] + f'..." ({len(value):,} characters)'
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        if depth >= 2:
            return "[...]"
        items = [shown(item, depth + 1) for item in value[:5]]
        more = f", ... ({len(value):,} items)" if len(value) > 5 else ""
        return "[" + ", ".join(items) + more + "]"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return repr(value)[:60]


def _whole(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _reason(why):
    return f" ({why})" if why else ""


@dataclasses.dataclass(frozen=True)
class Whole:
    """A whole number from low to high (a TOML float such as 1e8 is not one)."""

    low: int
    high: int
    why: str = ""

    @property
    def text(self):
        return f"a whole number from {self.low:,} to {self.high:,}{_reason(self.why)}"

    def check(self, value):
        if not _whole(value):
            raise RuleError(self.text, value, wrong_type=True)
        if not self.low <= value <= self.high:
            raise RuleError(self.text, value)
        return value


@dataclasses.dataclass(frozen=True)
class Number:
    """A finite number (whole or float) above `low` (or at it, when low_open is False), below `high`."""

    low: float
    high: float = None
    low_open: bool = True
    high_open: bool = True
    why: str = ""

    @property
    def text(self):
        if self.high is None:
            bound = f"{'>' if self.low_open else '>='} {self.low:g}"
        else:
            bound = (f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}"
                     f"{')' if self.high_open else ']'}")
        return f"a number {bound}{_reason(self.why)}"

    def check(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RuleError(self.text, value, wrong_type=True)
        if not math.isfinite(value):
            raise RuleError(self.text, value)
        above = value > self.low if self.low_open else value >= self.low
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        if not (above and below):
            raise RuleError(self.text, value)
        return value


@dataclasses.dataclass(frozen=True)
class Boolean:
    text = "true or false"

    def check(self, value):
        if not isinstance(value, bool):
            raise RuleError(self.text, value, wrong_type=True)
        return value


@dataclasses.dataclass(frozen=True)
class Choice:
    options: tuple

    @property
    def text(self):
        quoted = [f'"{option}"' for option in self.options]
        return "one of " + ", ".join(quoted) if len(quoted) > 2 else " or ".join(quoted)

    def check(self, value):
        if not isinstance(value, str):
            raise RuleError(self.text, value, wrong_type=True)
        if value not in self.options:
            raise RuleError(self.text, value)
        return value


@dataclasses.dataclass(frozen=True)
class Text:
    """A string matching `pattern` (whole), described to the user as `what`."""

    pattern: str
    what: str

    @property
    def text(self):
        return self.what

    def check(self, value):
        if not isinstance(value, str):
            raise RuleError(self.text, value, wrong_type=True)
        # fullmatch: `$` would also accept a trailing newline.
        if not re.fullmatch(self.pattern, value):
            raise RuleError(self.text, value)
        return value


# Names become folder names (the configuration's runs/<name>/) and appear in
# every record and report: one rule for all of them, safe on every file system.
NAME_RULE = ("1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit "
             "(no spaces, no newline, no '/': it names a folder)")


NAME = Text(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", NAME_RULE)
# Any file name the user has, but no control character: a newline or NUL in a path is a typo.
PATH = Text(r"[^\x00-\x1f\x7f]{1,4096}", "a path (1 to 4,096 characters, no control characters)")


@dataclasses.dataclass(frozen=True)
class ListOf:
    """A list of `low` to `high` items, each following `item`."""

    item: object
    low: int
    high: int
    why: str = ""

    @property
    def text(self):
        count = f"{self.low:,}" if self.low == self.high else f"{self.low:,} to {self.high:,}"
        return f"a list of {count} items, each {self.item.text}{_reason(self.why)}"

    def check(self, value):
        if not isinstance(value, list):
            raise RuleError(self.text, value, wrong_type=True)
        if not self.low <= len(value) <= self.high:
            raise RuleError(self.text, value)
        for item in value:
            try:
                self.item.check(item)
            except RuleError:
                raise RuleError(self.text, value) from None
        return value


@dataclasses.dataclass(frozen=True)
class Either:
    """Follows one of `rules`; `what` says them together, when their own words would be long."""

    rules: tuple
    what: str = None

    @property
    def text(self):
        return self.what or " or ".join(rule.text for rule in self.rules)

    def check(self, value):
        errors = []
        for rule in self.rules:
            try:
                return rule.check(value)
            except RuleError as error:
                errors.append(error)
        raise RuleError(self.text, value, wrong_type=all(error.wrong_type for error in errors))
