"""Regression net for the statistics: fixed inputs, the numbers the code gave when they were pinned.

stats_pins.json holds what every public statistic returned for the inputs below (TOST, Holm, power and
seeds needed, Welch, paired, Mann-Whitney, Levene, Hedges' g, curve tests, the whole comparison with its
verdicts) before the statistics were split into modules and moved onto scipy.stats. A change to how a
number is computed must leave it equal to 1e-12 (relative), or say here why it moved.

Regenerate (only for an intended change, explained in the commit):
    python -m tests.study.test_stats_regression > /tmp/pins.json && mv /tmp/pins.json tests/study/stats_pins.json
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from prednet_keras.study import stats
from prednet_keras.study.stats import comparisons, curve_tests, power

from .close import assert_close

PINS = Path(__file__).with_name("stats_pins.json")
A = [0.0123, 0.0131, 0.0118, 0.0142, 0.0127, 0.0135, 0.0121, 0.0139]
B = [0.0119, 0.0126, 0.0121, 0.0133, 0.0122, 0.0129, 0.0117, 0.0131]
C = [0.0150, 0.0161, 0.0144, 0.0172, 0.0158]
FLAT = [0.5, 0.5, 0.5, 0.5]
# Nearly identical arms (what the study often compares): SciPy warns of precision loss on such data.
X = 0.0123456789
NA = [X, X * (1 + 1e-15), X * (1 - 1e-15), X * (1 + 3e-15)]
NB = [X * (1 + 2e-15), X, X * (1 - 2e-15), X * (1 + 1e-15)]
P = [0.01, 0.04, 0.03, 0.005, math.nan, 0.2, 0.04]


def compute():
    """Every pinned result, by name."""
    cases = {
        "describe": stats.describe(A),
        "welch": stats.welch_test(A, C),
        "welch_flat": stats.welch_test(FLAT, [0.6] * 4),
        "paired": stats.paired_test(A, B),
        "tost_welch": stats.tost_welch(A, B, 0.001),
        "tost_welch_c": stats.tost_welch(A, C, 0.001),
        "tost_paired": stats.tost_paired(A, B, 0.001),
        "tost_paired_flat": stats.tost_paired(FLAT, FLAT, 0.001),
        "nearly_identical_welch": stats.welch_test(NA, NB),
        "nearly_identical_paired": stats.paired_test(NA, NB),
        "nearly_identical_tost_welch": stats.tost_welch(NA, NB, 1e-15),
        "nearly_identical_tost_paired": stats.tost_paired(NA, NB, 1e-15),
        "holm": stats.holm(P),
        "mann_whitney": stats.mann_whitney(A, C),
        "levene": stats.levene_test(A, C),
        "hedges_g": stats.hedges_g(A, C),
        "power_difference": [power.power_difference(n, 1.0, 0.5) for n in (2, 5, 17, 64)],
        "power_difference_paired": [power.power_difference(n, 0.3, 0.2, paired=True) for n in (3, 10, 30)],
        "power_equivalence": [power.power_equivalence(n, 1.0, 0.5) for n in (2, 10, 70, 100)],
        "power_equivalence_shift": [power.power_equivalence(n, 1.0, 0.5, paired=True, true_difference=0.1)
                                    for n in (10, 60)],
        "power_far_tail": [power.power_difference(5000, 1.0, 1.0), power.power_equivalence(100000, 1.0, 0.5)],
        "seeds_needed_difference": [power.seeds_needed_difference(1.0, d) for d in (0.2, 0.5, 1.0)]
        + [power.seeds_needed_difference(1.0, 0.5, paired=True),
           power.seeds_needed_difference(1.0, 0.5, alpha=0.01, power=0.9)],
        "seeds_needed_equivalence": [power.seeds_needed_equivalence(1.0, m) for m in (0.2, 0.5, 1.0)]
        + [power.seeds_needed_equivalence(1.0, 0.5, paired=True),
           power.seeds_needed_equivalence(1.0, 0.5, true_difference=0.2)],
    }
    rng = np.random.default_rng(7)
    ca = rng.normal(size=(6, 4))
    cb = ca + rng.normal(0.3, 0.5, size=(6, 4))
    cases["curves_paired"] = curve_tests.compare_curves(ca, cb, paired=True)
    cases["curves_independent"] = curve_tests.compare_curves(ca, cb[:5] + 0.5)
    cases["curves_independent_random"] = curve_tests.compare_curves(
        rng.normal(size=(9, 3)), rng.normal(size=(8, 3)), permutations=200, rng=np.random.default_rng(3))
    cases["compare_configurations"] = comparisons.compare_configurations(
        {"x": A, "y": B, "z": C}, seeds={"x": list(range(8)), "y": list(range(8)), "z": list(range(5))})
    return _plain(cases)


def _plain(obj):
    """JSON-ready: numpy scalars as Python numbers, non-finite floats as their repr."""
    if isinstance(obj, dict):
        return {key: _plain(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(value) for value in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else repr(float(obj))
    return obj


@pytest.fixture(scope="module")
def computed():
    return compute()


def test_every_case_is_pinned(computed):
    assert sorted(computed) == sorted(json.loads(PINS.read_text()))


@pytest.mark.parametrize("name", sorted(json.loads(PINS.read_text())) if PINS.exists() else [])
def test_statistics_equal_the_pinned_numbers(name, computed):
    assert_close(computed[name], json.loads(PINS.read_text())[name], name)


if __name__ == "__main__":
    print(json.dumps(compute(), indent=1, sort_keys=True))
