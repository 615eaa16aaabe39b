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
import re

from prednet_keras import model_kinds
from prednet_keras.runtime.options import RUNTIME_OPTIONS
from prednet_keras.study.factors import STUDY_FACTORS, arm_factors
from prednet_keras.options.value_rules import (  # noqa: F401 (the rules are this module's API too)
    NAME,
    NAME_RULE,
    PATH,
    Boolean,
    Choice,
    Either,
    ListOf,
    Number,
    RuleError,
    Text,
    Whole,
    describe,
    shown,
)

__all__ = [
    "MAX_CONFIGURATIONS",
    "MAX_RUNS",
    "MAX_SEED",
    "MAX_SEEDS",
    "MAX_SPEC_BYTES",
    "MODELS",
    "ModelName",
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
    "runtime_rules",
    "shown",
    "train_rules",
]

# The registered model kinds; a spec's `model` may also name a user's model (MODULE:FUNCTION, FILE.py:FUNCTION).
MODELS = model_kinds.names()

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


# ---------------------------------------------------------------- the tables

@dataclasses.dataclass(frozen=True)
class ModelName:
    """A registered model kind's name, or a user's model: "MODULE:FUNCTION" or "FILE.py:FUNCTION"."""

    names: tuple
    USER = re.compile(r"[^\x00-\x1f\x7f:]{1,4000}\.py:[A-Za-z_][A-Za-z0-9_]{0,99}|"
                      r"[A-Za-z_][A-Za-z0-9_]{0,99}(\.[A-Za-z_][A-Za-z0-9_]{0,99}){0,20}:[A-Za-z_][A-Za-z0-9_]{0,99}")
    HINT = "; or a user's model, \"MODULE:FUNCTION\" or \"FILE.py:FUNCTION\""

    @property
    def text(self):
        return Choice(self.names).text

    def check(self, value):
        if isinstance(value, str) and self.USER.fullmatch(value):
            return value
        try:
            return Choice(self.names).check(value)
        except RuleError as error:
            error.args = (str(error) + self.HINT,)
            raise


SEED = Whole(0, MAX_SEED)
SEEDS = Either((Whole(1, MAX_SEEDS), ListOf(SEED, 1, MAX_SEEDS)),
               f"a count from 1 to {MAX_SEEDS:,} (seeds 0 to N-1) or a list of 1 to {MAX_SEEDS:,} seeds from 0 "
               f"to {MAX_SEED:,} (each seed is a run per configuration, the published studies use 8 to 30; "
               "every backend's random generator takes a 32-bit seed)")

TOP_RULES = {
    "name": NAME,
    "model": ModelName(MODELS),
    "seeds": SEEDS,
    "replicates": Whole(1, 100, "re-runs of one seed measure run-to-run variation; 100 is far more than that "
                                "needs"),
    "replicate_seeds": Either((Whole(1, MAX_SEEDS), ListOf(SEED, 1, MAX_SEEDS)),
                              "a count (the first N seeds, N >= 1) or a non-empty list of seeds of `seeds`"),
    "ulp_baseline": Boolean(),
    "trajectory_points": Whole(0, 1000, "each snapshot keeps 4,096 weights (32 KiB) per run"),
    "workers": Whole(1, 256, "runs at once on this machine, each a training process"),
}



def runtime_rules(options=RUNTIME_OPTIONS):
    """{key: rule} of a spec's runtime keys, top level and per configuration: each runtime option's (its `rule`,
    runtime/options.py), in the table's order, which the error for an unknown key lists."""
    return {option.name: option.rule for option in options}


RUNTIME_RULES = runtime_rules()

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

# [train] and the configurations' arm factors: each model kind says its own (model_kinds/); the study's table of
# factors (factors.py) says which training options are arm factors.


def train_rules(model):
    """{option: rule} of [train] for `model` (every field of its config class but the runner's)."""
    return model_kinds.get(model).train_rules()


def factor_rules(model, factors=STUDY_FACTORS):
    """{factor: rule} of the arm factors a configuration of `model` may set (factors.arm_factors: the kind's, and
    any comparable factor of the study's `factors` that is one of its training options, by its [train] rule)."""
    arms = arm_factors(model_kinds.get(model), factors)
    rules = train_rules(model) if any(f.values is None for f in arms.values()) else {}
    return {name: f.values if f.values is not None else rules[name] for name, f in arms.items()}
