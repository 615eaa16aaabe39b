"""The rules a study spec's values follow: each key's type, its range and its cap, with the cap's reason.

spec.py applies them to every key of every table when a spec is read, before
anything is planned or trained; a value that breaks its rule is refused with
the place (table and key), the rule and the value as written, e.g.

    [report] margin: must be a number > 0, got "0.001" (a string)

Caps bound what one spec can ask for, so that a typo (`seeds = 100000000`)
is refused at once instead of planning, or training, for ever. Each cap says
why it is where it is.

This module imports no framework.
"""

import dataclasses
import datetime
import math
import re

from prednet_keras.runtime import PRECISIONS

__all__ = [
    "MAX_CONFIGURATIONS",
    "MAX_RUNS",
    "MAX_SEED",
    "MAX_SEEDS",
    "MAX_SPEC_BYTES",
    "MODELS",
    "NAME",
    "NAME_RULE",
    "PATH",
    "REPORT_RULES",
    "RUNTIME_RULES",
    "TOP_RULES",
    "Boolean",
    "Choice",
    "Either",
    "ListOf",
    "Number",
    "RuleError",
    "Text",
    "Whole",
    "describe",
    "factor_rules",
    "shown",
    "train_rules",
]

MODELS = ("prednet", "prednet-chainer", "autoencoder")

# A spec is a few KB of TOML; a file much larger than that is not a spec (and is not read whole).
MAX_SPEC_BYTES = 1 << 20
# Each seed is at least one training run per configuration; the published studies use 8 to 30.
MAX_SEEDS = 10_000
# Seeds go to every backend's random generator; a 32-bit signed integer is what all of them take.
MAX_SEED = 2**31 - 1
# Every configuration is compared with every other: the report's pairs grow with its square.
MAX_CONFIGURATIONS = 100
# Each planned run is a training process and a run folder; --dry-run lists them all at once.
MAX_RUNS = 100_000


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


# ---------------------------------------------------------------- the tables

SEED = Whole(0, MAX_SEED)
SEEDS = Either((Whole(1, MAX_SEEDS), ListOf(SEED, 1, MAX_SEEDS)),
               f"a count from 1 to {MAX_SEEDS:,} (seeds 0 to N-1) or a list of 1 to {MAX_SEEDS:,} seeds from 0 "
               f"to {MAX_SEED:,} (each seed is a run per configuration, the published studies use 8 to 30; "
               "every backend's random generator takes a 32-bit seed)")

TOP_RULES = {
    "name": NAME,
    "model": Choice(MODELS),
    "seeds": SEEDS,
    "replicates": Whole(1, 100, "re-runs of one seed measure run-to-run variation; 100 is far more than that "
                                "needs"),
    "replicate_seeds": Either((Whole(1, MAX_SEEDS), ListOf(SEED, 1, MAX_SEEDS)),
                              "a count (the first N seeds, N >= 1) or a non-empty list of seeds of `seeds`"),
    "ulp_baseline": Boolean(),
    "trajectory_points": Whole(0, 1000, "each snapshot keeps 4,096 weights (32 KiB) per run"),
    "workers": Whole(1, 256, "runs at once on this machine, each a training process"),
}

THREADS = Whole(1, 1024, "CPU threads; more than any machine's cores")
RUNTIME_RULES = {
    "backend": Choice(("tensorflow", "jax", "torch")),
    "device": Text(r"(cpu|gpu|cuda)(:[0-9]{1,3})?", '"cpu", "gpu" or "gpu:N"'),
    "threads": THREADS,
    "interop_threads": THREADS,
    "deterministic": Boolean(),
    "cudnn": Boolean(),
    "tf32": Boolean(),
    "onednn": Boolean(),
    "xla": Boolean(),
    "strict": Boolean(),
    "precision": Choice(PRECISIONS),
    # A study's runs each train on one device (prednet-train --devices trains data-parallel).
    "devices": Whole(1, 1, "each study run trains on one device"),
}

REPORT_RULES = {
    "metric": Either((Text(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}", "a metric name (1 to 100 letters, digits, "
                                                                  "'_', '.' or '-')"),
                      Text(r"last_steps:[1-9][0-9]{0,6}", "last_steps:N (N from 1 to 9,999,999)"))),
    "margin": Number(0),
    "margin_sd": Number(0),
    "alpha": Number(0, 0.5),
    "power": Number(0, 1),
    "checkpoints": Whole(1, 1000, "bins of the per-step loss curve; each needs steps to average"),
    "curve_test": Choice(("maxt", "holm")),
}

# [train]: the options of both config classes. Sizes bound what one run allocates.
CHANNELS = ListOf(Whole(1, 4096), 1, 8, "channels per layer, at most 8 layers (each halves the frame)")
SIZE = ListOf(Whole(1, 4096), 2, 2, "[H, W] in pixels")
FILTER_SIZE = Whole(1, 15, "a convolution kernel's size")
_SHARED_TRAIN = {"stack_sizes": CHANNELS, "r_stack_sizes": CHANNELS, "filter_size": FILTER_SIZE, "data": PATH,
                 "size": SIZE}


def train_rules(model):
    """{option: rule} of [train] for `model` (every field of its config class but the runner's)."""
    if model == "prednet":
        from prednet_keras.recipe import AUGMENTATIONS

        return {
            **_SHARED_TRAIN,
            "nt": Whole(2, 1000, "frames per training sequence"),
            "batch_size": Whole(1, 1024, "sequences per step"),
            "epochs": Whole(1, 100_000, "the recipe trains 150"),
            "steps_per_epoch": Whole(1, 1_000_000, "the recipe's: 125"),
            "lr": Number(0),
            "lr_drop_epoch": Whole(0, 100_000, "at most the epochs' cap"),
            "lr_drop_factor": Number(0),
            "layer_loss": Either((Choice(("L_0", "L_all")), ListOf(Number(0, low_open=False), 1, 8))),
            "val_sequences": Whole(0, 1_000_000, "validation sequences held in memory"),
            "val_data": PATH,
            "val_fraction": Number(0, 1),
            "unroll": Boolean(),
            "augment": ListOf(Choice(AUGMENTATIONS), 0, len(AUGMENTATIONS)),
            "patience": Whole(1, 100_000, "epochs without a lower validation loss before stopping"),
        }
    from prednet_keras.study_train import AUTOENCODERS, PROTOCOLS, TBPTT_MODES

    return {
        **_SHARED_TRAIN,
        "protocol": Choice(PROTOCOLS),
        "tbptt": Choice(TBPTT_MODES),
        "emulate_cpu_aliasing": Boolean(),
        "autoencoder": Choice(AUTOENCODERS),
        "period": Whole(1, 10_000_000, "frames stepped through by one run; the paper's protocol: 5,000"),
        "bprop": Whole(1, 1000, "frames per update, all held in one compiled window"),
        "images": Whole(1, 10_000_000, "updates of one run; the paper's protocol: 60,000"),
    }


def factor_rules(model):
    """{factor: rule} of the arm factors a configuration of `model` may set."""
    if model == "prednet-chainer":
        from prednet_keras.study_train import TBPTT_MODES

        return {"tbptt": Choice(TBPTT_MODES), "emulate_cpu_aliasing": Boolean()}
    return {}
