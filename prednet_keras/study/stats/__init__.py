"""The tests on one pair of samples: arrays in, numbers out, no files.

Plain arrays of numbers (one number per seed) in, JSON-ready dicts (floats,
lists, None) out; NaN marks "not computable" (too few values). The methods and
their references are in docs/study-statistics.md:

- one configuration: mean, SD and t interval (describe), the pooled seed SD;
- a pair: Welch's t-test, the paired t-test with Wilcoxon signed-rank, the
  per-seed differences, Mann-Whitney U, Levene (Brown-Forsythe, for a change
  in spread), Hedges' g, and TOST for equivalence within a margin;
- a family of p-values: Holm's adjustment.

The other statistics of the study, each in its own module of this package: power.py (power
and seeds needed), comparisons.py (every pair of configurations, Holm across
pairs, the verdicts), determinism_audit.py (bit-identical repeats),
curve_tests.py (whole loss curves at checkpoints) and divergence.py (distance
between trajectories).
"""

import math
import warnings

import numpy as np
from scipy import special, stats

__all__ = [
    "ALPHA",
    "MARGIN_SD",
    "PERMUTATIONS",
    "POWER",
    "describe",
    "finite_values",
    "hedges_g",
    "holm",
    "json_float",
    "levene_test",
    "mann_whitney",
    "mean_difference",
    "paired_test",
    "pooled_sd",
    "safe_ratio",
    "seed_differences",
    "tost_paired",
    "tost_welch",
    "welch_test",
]

ALPHA = 0.05
POWER = 0.8
# The margin "no effect" is tested against, as a fraction of the pooled seed SD
# (study.md: 0.5 x seed SD); report options can fix an absolute margin instead.
MARGIN_SD = 0.5
PERMUTATIONS = 2000


def finite_values(values):
    array = np.asarray(values, dtype=float).ravel()
    if not np.all(np.isfinite(array)):
        raise ValueError("Statistics need finite values; drop runs that diverged (NaN/inf) first.")
    return array


def json_float(value):
    """A float for JSON (NaN stays NaN; the writer turns it into null)."""
    return float(value) if value is not None else math.nan


def safe_ratio(numerator, denominator):
    """numerator / denominator where a zero denominator means "no spread":
    0 when the numerator is 0 too, else +/- infinity (an exact difference)."""
    numerator = np.asarray(numerator, dtype=float)
    denominator = np.asarray(denominator, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = numerator / denominator
        zero = denominator == 0
        ratio = np.where(zero & (numerator == 0), 0.0, ratio)
        ratio = np.where(zero & (numerator != 0), np.copysign(np.inf, numerator), ratio)
    return ratio if ratio.ndim else float(ratio)


# ---------------------------------------------------------------- one group


def describe(values, alpha=ALPHA):
    """Mean, SD and t-based confidence interval of one configuration's metric.

    Args:
        values: one number per seed.
        alpha: the CI is (1 - alpha).

    Returns:
        dict with n, mean, sd (ddof=1), se, ci [low, high], median, min, max;
        NaN where n is too small.
    """
    x = finite_values(values)
    n = int(x.size)
    out = {"n": n, "mean": math.nan, "sd": math.nan, "se": math.nan, "ci": [math.nan, math.nan],
           "median": math.nan, "min": math.nan, "max": math.nan}
    if n == 0:
        return out
    out.update(mean=float(x.mean()), median=float(np.median(x)), min=float(x.min()), max=float(x.max()))
    if n >= 2:
        sd = float(x.std(ddof=1))
        se = sd / math.sqrt(n)
        half = float(stats.t.ppf(1 - alpha / 2, n - 1)) * se
        out.update(sd=sd, se=se, ci=[out["mean"] - half, out["mean"] + half])
    return out


def pooled_sd(groups):
    """The within-group SD pooled over groups (each weighted by its n - 1).

    Args:
        groups: iterable of 1-D arrays; groups with fewer than 2 values add nothing.

    Returns:
        the pooled SD, or NaN when no group has 2 values.
    """
    sum_squares, dof = 0.0, 0
    for group in groups:
        x = finite_values(group)
        if x.size >= 2:
            sum_squares += float(((x - x.mean()) ** 2).sum())
            dof += x.size - 1
    return math.sqrt(sum_squares / dof) if dof else math.nan


# ------------------------------------------------------------ effect size


def _hedges_correction(dof):
    # The exact small-sample factor J = Gamma(df/2) / (sqrt(df/2) Gamma((df-1)/2))
    # (Hedges 1981); 1 - 3/(4 df - 1) is its usual approximation.
    return math.exp(special.gammaln(dof / 2) - 0.5 * math.log(dof / 2) - special.gammaln((dof - 1) / 2))


def _hedges_rows(a, b):
    """Hedges' g of each row pair: a (R, na), b (R, nb) -> (R,)."""
    na, nb = a.shape[1], b.shape[1]
    sp = np.sqrt(((na - 1) * a.var(axis=1, ddof=1) + (nb - 1) * b.var(axis=1, ddof=1)) / (na + nb - 2))
    return safe_ratio(a.mean(axis=1) - b.mean(axis=1), sp) * _hedges_correction(na + nb - 2)


def hedges_g(a, b):
    """Hedges' g: (mean a - mean b) / pooled SD, bias-corrected.

    Args:
        a, b: the two samples (at least 2 values each).

    Returns:
        g (NaN with too few values; +/- inf when both samples have no spread
        and their means differ).
    """
    a, b = finite_values(a), finite_values(b)
    if a.size < 2 or b.size < 2:
        return math.nan
    return float(_hedges_rows(a[None, :], b[None, :])[0])


# -------------------------------------------------------------------- tests


def welch_test(a, b, alpha=ALPHA):
    """Welch's t-test of mean a = mean b (unequal variances).

    Args:
        a, b: the samples (at least 2 values each).
        alpha: for the (1 - alpha) CI of the difference.

    Returns:
        dict: difference (a - b), se, t, df, p (two-sided), ci. When neither
        sample varies: t = 0, p = 1 for equal means, else t = +/-inf, p = 0.
    """
    a, b = finite_values(a), finite_values(b)
    na, nb = a.size, b.size
    if na < 2 or nb < 2:
        return {"difference": mean_difference(a, b), "se": math.nan, "t": math.nan, "df": math.nan,
                "p": math.nan, "ci": [math.nan, math.nan]}
    diff = float(a.mean() - b.mean())
    se = math.sqrt(a.var(ddof=1) / na + b.var(ddof=1) / nb)
    if se == 0:
        # With no spread at all, fall back to the pooled df.
        return {"difference": diff, "se": se, **_no_spread(diff, float(na + nb - 2))}
    result = _quiet(stats.ttest_ind, a, b, equal_var=False)
    return {"difference": diff, "se": se, **_t_result(result, alpha)}


def _quiet(test, *args, **kwargs):
    """A SciPy t-test without its warning on nearly identical data: near-identical arms are what this study
    often compares, the warning (given where the spread is tiny against the mean) would repeat for
    every such pair, and the numbers are what the hand-written formulas gave (tests/study/stats_pins.json,
    "nearly_identical_*"). A spread of exactly 0 never reaches SciPy (_no_spread)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Precision loss occurred in moment calculation", category=RuntimeWarning)
        return test(*args, **kwargs)


def _t_result(result, alpha):
    """t, df, p and the (1 - alpha) CI of a SciPy t-test result (TtestResult)."""
    ci = result.confidence_interval(1 - alpha)
    return {"t": float(result.statistic), "df": float(result.df), "p": float(result.pvalue),
            "ci": [float(ci.low), float(ci.high)]}


def _no_spread(diff, df):
    """A t-test's numbers when the standard error is 0, where SciPy's t would be 0/0 or x/0 (NaN, inf with a
    warning): the difference is exact, so t = 0 and p = 1 for no difference, else t = +/-inf and p = 0."""
    t = float(safe_ratio(diff, 0.0))
    return {"t": t, "df": df, "p": 1.0 if t == 0 else 0.0, "ci": [diff, diff]}


def mean_difference(a, b):
    """mean a - mean b of two arrays; NaN when either is empty."""
    return float(a.mean() - b.mean()) if a.size and b.size else math.nan


def paired_test(a, b, alpha=ALPHA):
    """Paired t-test and Wilcoxon signed-rank test of a[i] - b[i] (same seed i).

    Args:
        a, b: equal-length samples, aligned by seed.
        alpha: for the (1 - alpha) CI of the mean difference.

    Returns:
        dict: n, difference (mean of a - b), sd (of the differences), se, t,
        df, p, ci, wilcoxon_p. Differences all exactly zero give t = 0, p = 1.
    """
    a, b = finite_values(a), finite_values(b)
    if a.size != b.size:
        raise ValueError("A paired test needs one value per shared seed in each sample.")
    d = a - b
    n = int(d.size)
    out = {"n": n, "difference": float(d.mean()) if n else math.nan, "sd": math.nan, "se": math.nan,
           "t": math.nan, "df": math.nan, "p": math.nan, "ci": [math.nan, math.nan], "wilcoxon_p": math.nan}
    if n < 2:
        return out
    sd = float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    out.update(sd=sd, se=se)
    if se == 0:
        out.update(_no_spread(out["difference"], float(n - 1)))
    else:
        out.update(_t_result(_quiet(stats.ttest_rel, a, b), alpha))
    if np.all(d == 0):
        out["wilcoxon_p"] = 1.0
    else:
        out["wilcoxon_p"] = float(stats.wilcoxon(d).pvalue)
    return out


def seed_differences(a, b, margin=None):
    """What the per-seed differences a[i] - b[i] are, one by one (the paired
    tests summarise them by their mean; a mean inside the margin can hide
    seeds outside it).

    Args:
        a, b: equal-length samples, aligned by seed.
        margin: count the differences beyond +/- margin (None: not counted).

    Returns:
        dict: n, a_higher, b_higher, equal (seed counts), largest (the largest
        |a[i] - b[i]|), beyond_margin (count of |a[i] - b[i]| > margin, or None).
    """
    a, b = finite_values(a), finite_values(b)
    if a.size != b.size:
        raise ValueError("Per-seed differences need one value per shared seed in each sample.")
    d = a - b
    return {"n": int(d.size), "a_higher": int(np.sum(d > 0)), "b_higher": int(np.sum(d < 0)),
            "equal": int(np.sum(d == 0)), "largest": float(np.max(np.abs(d))) if d.size else math.nan,
            "beyond_margin": None if margin is None or not math.isfinite(margin) else int(np.sum(np.abs(d) > margin))}


def mann_whitney(a, b):
    """Two-sided Mann-Whitney U test (SciPy's exact or asymptotic method).

    Args:
        a, b: the samples.

    Returns:
        dict: u (of a), p, and probability_of_superiority U / (na nb) (the
        chance a value of a exceeds one of b, ties half).
    """
    a, b = finite_values(a), finite_values(b)
    if a.size < 1 or b.size < 1 or a.size + b.size < 3:
        return {"u": math.nan, "p": math.nan, "probability_of_superiority": math.nan}
    if np.all(a == a[0]) and np.all(b == a[0]):
        # All tied: SciPy's normal approximation divides by a zero variance.
        u, p = a.size * b.size / 2, 1.0
    else:
        result = stats.mannwhitneyu(a, b, alternative="two-sided")
        u, p = float(result.statistic), float(result.pvalue)
    return {"u": float(u), "p": float(p), "probability_of_superiority": float(u) / (a.size * b.size)}


def levene_test(a, b):
    """Levene's test of equal spread, median-centred (Brown-Forsythe), robust to
    the skewed distributions final losses often have.

    Args:
        a, b: the samples (at least 2 values each).

    Returns:
        dict: w, p, sd_ratio (SD a / SD b) and degenerate (None, or the sentence
        saying what the data are when the test cannot speak): fewer than 2
        values in a sample (w, p nan); no spread in either sample (w 0, p 1:
        nothing to tell apart); deviations from the median equal within each
        sample to round-off, as two values per sample always are (w, p nan: W
        would divide round-off by round-off and give any p at all).
    """
    a, b = finite_values(a), finite_values(b)
    if a.size < 2 or b.size < 2:
        return {"w": math.nan, "p": math.nan, "sd_ratio": math.nan,
                "degenerate": "fewer than 2 seeds in an arm: no spread to compare"}
    sd_a, sd_b = float(a.std(ddof=1)), float(b.std(ddof=1))
    ratio = float(safe_ratio(sd_a, sd_b))
    deviations = [np.abs(a - np.median(a)), np.abs(b - np.median(b))]
    largest = max(float(z.max()) for z in deviations)
    if largest == 0:
        return {"w": 0.0, "p": 1.0, "sd_ratio": ratio,
                "degenerate": "every seed gave the same value within each arm: neither arm has a spread"}
    # W's denominator is the spread of these deviations within each sample; at round-off (a few
    # ulps of the values, where the median and the subtraction round) W is a ratio of rounding
    # errors, not a statistic.
    within = max(float(np.ptp(z)) for z in deviations)
    roundoff = 64 * np.finfo(np.float64).eps * float(max(np.abs(a).max(), np.abs(b).max()))
    if within <= roundoff:
        return {"w": math.nan, "p": math.nan, "sd_ratio": ratio,
                "degenerate": ("each arm's values lie at equal distances from its median (to round-off), as "
                               f"{min(a.size, b.size)} seeds per arm may: the spreads cannot be compared by "
                               "Levene's test")}
    with np.errstate(divide="ignore", invalid="ignore"):
        result = stats.levene(a, b, center="median")
    if not math.isfinite(float(result.statistic)):
        return {"w": math.nan, "p": math.nan, "sd_ratio": ratio,
                "degenerate": "Levene's statistic is undefined for these values"}
    return {"w": float(result.statistic), "p": float(result.pvalue), "sd_ratio": ratio, "degenerate": None}


def tost_welch(a, b, margin, alpha=ALPHA):
    """Two one-sided Welch t-tests (Schuirmann 1987) of |mean a - mean b| < margin.

    Args:
        a, b: the samples.
        margin: the equivalence margin (> 0), in the metric's units.
        alpha: level of each one-sided test; the matching interval is (1 - 2 alpha).

    Returns:
        dict: margin, difference, p (= max of the two one-sided p), p_lower
        (H0: diff <= -margin), p_upper (H0: diff >= margin), ci (1 - 2 alpha),
        df. Equivalence is shown when p < alpha, i.e. the CI lies inside +/- margin.
    """
    welch = welch_test(a, b, alpha=2 * alpha)

    # SciPy's ttest_ind tests a difference of 0 only. Shifting b by the margin instead would round the
    # margin against the values' last digits (relative error about ulp(value) / margin: 5e-3 for values
    # near 0.01 and a margin of 1e-15, stats_pins.json "nearly_identical_tost_welch"), so Welch's
    # difference, SE and df (SciPy's) go to SciPy's t distribution directly.
    def one_sided(shift, alternative):
        t = (welch["difference"] + shift) / welch["se"]
        return stats.t.sf(t, welch["df"]) if alternative == "greater" else stats.t.cdf(t, welch["df"])

    return _tost(welch, margin, one_sided)


def tost_paired(a, b, margin, alpha=ALPHA):
    """TOST on the per-seed differences a[i] - b[i] (paired t).

    Args:
        a, b: equal-length samples, aligned by seed.
        margin: the equivalence margin (> 0).
        alpha: level of each one-sided test.

    Returns:
        as tost_welch.
    """
    paired = paired_test(a, b, alpha=2 * alpha)

    def one_sided(shift, alternative):
        return _quiet(stats.ttest_1samp, finite_values(a) - finite_values(b), -shift, alternative=alternative).pvalue

    return _tost(paired, margin, one_sided)


def _tost(test, margin, one_sided):
    """TOST from a t-test's dict (difference, se, df and its (1 - 2 alpha) ci) and one_sided(shift,
    alternative): SciPy's one-sided p-value of the difference plus shift against 0."""
    diff, se, df = test["difference"], test["se"], test["df"]
    out = {"margin": json_float(margin), "difference": diff, "p": math.nan, "p_lower": math.nan,
           "p_upper": math.nan, "ci": [math.nan, math.nan], "df": df}
    if margin is None or not math.isfinite(margin) or margin < 0 or not math.isfinite(se) or not math.isfinite(df):
        return out
    if se == 0:
        # No spread (SciPy's t would be NaN): each one-sided t is +/-inf or 0, whose p the t distribution gives.
        p_lower = float(stats.t.sf(safe_ratio(diff + margin, se), df))
        p_upper = float(stats.t.cdf(safe_ratio(diff - margin, se), df))
    else:
        p_lower = float(one_sided(margin, "greater"))  # H0: difference <= -margin
        p_upper = float(one_sided(-margin, "less"))  # H0: difference >= +margin
    out.update(p=max(p_lower, p_upper), p_lower=p_lower, p_upper=p_upper, ci=list(test["ci"]))
    return out


def holm(pvalues):
    """Holm's step-down adjustment (family-wise error control).

    Written here, not taken from statsmodels (multipletests(method="holm") gives the same numbers): SciPy,
    which the study already needs, has no Holm, and statsmodels is installed neither here nor on the GPU
    machine that makes reports without a network. Five lines do not justify a dependency.

    Args:
        pvalues: sequence of p-values; NaN entries stay NaN and do not count
            towards the family size.

    Returns:
        list of adjusted p-values, in the input order.
    """
    p = np.asarray(pvalues, dtype=float)
    adjusted = np.full(p.shape, math.nan)
    index = np.flatnonzero(np.isfinite(p))
    m = index.size
    if m:
        order = index[np.argsort(p[index], kind="stable")]
        steps = np.minimum(1.0, (m - np.arange(m)) * p[order])
        adjusted[order] = np.maximum.accumulate(steps)
    return [float(v) for v in adjusted]
