"""Power of the t-test and of TOST, and the seeds per configuration they need.

Noncentral t (SciPy's nct; Cohen 1988 for the t-test, the usual approximation
of Chow, Shao & Wang 2008 for TOST); docs/study-statistics.md, "Power".
Numbers in, numbers out.
"""

import math

from scipy import stats

from prednet_keras.study.stats import ALPHA, POWER

__all__ = [
    "MAX_SEEDS",
    "power_difference",
    "power_equivalence",
    "seeds_needed_difference",
    "seeds_needed_equivalence",
]

MAX_SEEDS = 100_000


def _design(n, sd, paired):
    """(se of the difference, degrees of freedom) for n seeds per configuration."""
    if paired:
        return sd / math.sqrt(n), n - 1
    return sd * math.sqrt(2.0 / n), 2 * n - 2


def _nct_cdf(x, df, ncp):
    """Noncentral t CDF; SciPy returns NaN far in a tail, where the mirrored
    survival function (or, last, the normal limit) still gives the number."""
    value = stats.nct.cdf(x, df, ncp)
    if not math.isfinite(value):
        value = stats.nct.sf(-x, df, -ncp)
    if not math.isfinite(value):
        value = stats.norm.cdf(x - ncp)
    return float(value)


def power_difference(n, sd, delta, alpha=ALPHA, paired=False):
    """Power of the two-sided t-test to detect a true difference `delta`.

    Noncentral t, equal n per arm; the unpaired case uses the pooled-variance
    t (what Welch's test approaches with equal n and equal SDs).

    Args:
        n: seeds per configuration (shared seeds when paired).
        sd: the seed SD (unpaired) or the SD of per-seed differences (paired).
        delta: the true difference.
        alpha: two-sided level.
        paired: paired design.
    """
    if n < 2:
        return math.nan
    if sd == 0:
        return 1.0 if delta != 0 else alpha
    se, df = _design(n, sd, paired)
    critical = stats.t.ppf(1 - alpha / 2, df)
    ncp = delta / se
    return min(1.0, 1.0 - _nct_cdf(critical, df, ncp) + _nct_cdf(-critical, df, ncp))


def power_equivalence(n, sd, margin, alpha=ALPHA, paired=False, true_difference=0.0):
    """Power of TOST to show equivalence within +/- margin.

    Uses the usual noncentral-t approximation (Chow, Shao & Wang 2008, sec. 3.2):
    P(T_upper < -t_crit) - P(T_lower <= t_crit), floored at 0.

    Args:
        n: seeds per configuration.
        sd: as in power_difference.
        margin: the equivalence margin.
        alpha: level of each one-sided test.
        paired: paired design.
        true_difference: the difference assumed true (0: no effect).
    """
    if n < 2 or not math.isfinite(margin) or margin <= 0:
        return math.nan
    if sd == 0:
        return 1.0 if abs(true_difference) < margin else 0.0
    se, df = _design(n, sd, paired)
    critical = stats.t.ppf(1 - alpha, df)
    power = _nct_cdf(-critical, df, (true_difference - margin) / se) - _nct_cdf(
        critical, df, (true_difference + margin) / se
    )
    return float(max(0.0, power))


def _smallest_n(power_at, target, n_max=MAX_SEEDS):
    """The smallest n >= 2 with power_at(n) >= target (power rises with n), or None."""
    if power_at(n_max) < target:
        return None
    low, high = 1, 2
    while power_at(high) < target:
        low, high = high, min(2 * high, n_max)
    while high - low > 1:
        middle = (low + high) // 2
        if power_at(middle) >= target:
            high = middle
        else:
            low = middle
    return int(high)


def seeds_needed_difference(sd, delta, alpha=ALPHA, power=POWER, paired=False):
    """Seeds per configuration for the t-test to detect a shift `delta` with `power`.

    Args:
        sd: seed SD (unpaired) or SD of per-seed differences (paired).
        delta: the shift to detect (e.g. the equivalence margin).
        alpha: two-sided level.
        power: the wanted power.
        paired: paired design.

    Returns:
        an int >= 2, or None when not computable or beyond 100,000.
    """
    if not (math.isfinite(sd) and math.isfinite(delta)) or delta == 0:
        return None
    return _smallest_n(lambda n: power_difference(n, sd, delta, alpha, paired), power)


def seeds_needed_equivalence(sd, margin, alpha=ALPHA, power=POWER, paired=False, true_difference=0.0):
    """Seeds per configuration for TOST to show equivalence within +/- margin.

    Args:
        sd: seed SD (unpaired) or SD of per-seed differences (paired).
        margin: the equivalence margin.
        alpha: level of each one-sided test.
        power: the wanted power.
        paired: paired design.
        true_difference: the difference assumed true (0: no effect).

    Returns:
        an int >= 2, or None when impossible (|true_difference| >= margin) or
        beyond 100,000.
    """
    if not (math.isfinite(sd) and math.isfinite(margin)) or margin <= 0 or abs(true_difference) >= margin:
        return None
    return _smallest_n(lambda n: power_equivalence(n, sd, margin, alpha, paired, true_difference), power)
