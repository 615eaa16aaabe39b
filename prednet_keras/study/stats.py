"""Statistics that decide whether a configuration changes what a network learns.

Everything here works on plain arrays of numbers (one number per seed, or one
curve per seed); reading run folders is report.py's job. The methods and their
references are in docs/study-statistics.md. In short:

- the unit is a seed: replicates of one seed and configuration are averaged
  before they get here, since they share the seed's starting point and would
  otherwise count one seed several times;
- every pair of configurations gets Welch's t-test, Mann-Whitney U, Levene
  (Brown-Forsythe, for a change in spread), Hedges' g, a paired t-test,
  Wilcoxon signed-rank and a count of the per-seed differences when the arms
  share seeds, and TOST for equivalence within a margin; p-values are
  Holm-adjusted across pairs;
- the verdict uses the paired design when the arms share seeds (the study gives
  every arm of a seed the same initial weights and data order), Welch otherwise;
- whole curves are compared at checkpoints with the family-wise error held by
  max-t permutation (Westfall & Young) or Holm;
- power: seeds per configuration needed to detect a shift of the margin and to
  show equivalence within it, given the observed SD.

Functions return JSON-ready dicts (floats, lists, None), so the report can
store them as they are. NaN marks "not computable" (too few values).
"""

import itertools
import math

import numpy as np
from scipy import special, stats

__all__ = [
    "ALPHA",
    "MARGIN_SD",
    "MIN_PAIRED",
    "PERMUTATIONS",
    "POWER",
    "compare_configurations",
    "compare_curves",
    "compare_pair",
    "describe",
    "determinism_audit",
    "hedges_g",
    "holm",
    "levene_test",
    "mann_whitney",
    "paired_test",
    "pooled_sd",
    "power_difference",
    "power_equivalence",
    "seeds_needed_difference",
    "seeds_needed_equivalence",
    "seed_differences",
    "summarize_divergence",
    "tost_paired",
    "tost_welch",
    "verdict",
    "welch_test",
]

ALPHA = 0.05
POWER = 0.8
# The margin "no effect" is tested against, as a fraction of the pooled seed SD
# (study.md: 0.5 x seed SD); report options can fix an absolute margin instead.
MARGIN_SD = 0.5
PERMUTATIONS = 2000
# Fewer shared seeds than this and a paired test has too few degrees of freedom
# to be worth giving up Welch's larger n.
MIN_PAIRED = 3
# Share of the smaller arm's seeds that must be shared for the paired design.
PAIRED_SHARE = 0.8
MAX_SEEDS = 100_000


def _values(values):
    array = np.asarray(values, dtype=float).ravel()
    if not np.all(np.isfinite(array)):
        raise ValueError("Statistics need finite values; drop runs that diverged (NaN/inf) first.")
    return array


def _num(value):
    """A float for JSON (NaN stays NaN; the writer turns it into null)."""
    return float(value) if value is not None else math.nan


def _safe_ratio(numerator, denominator):
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
    x = _values(values)
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
        x = _values(group)
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
    return _safe_ratio(a.mean(axis=1) - b.mean(axis=1), sp) * _hedges_correction(na + nb - 2)


def hedges_g(a, b):
    """Hedges' g: (mean a - mean b) / pooled SD, bias-corrected.

    Args:
        a, b: the two samples (at least 2 values each).

    Returns:
        g (NaN with too few values; +/- inf when both samples have no spread
        and their means differ).
    """
    a, b = _values(a), _values(b)
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
    a, b = _values(a), _values(b)
    na, nb = a.size, b.size
    if na < 2 or nb < 2:
        return {"difference": _mean_diff(a, b), "se": math.nan, "t": math.nan, "df": math.nan,
                "p": math.nan, "ci": [math.nan, math.nan]}
    diff = float(a.mean() - b.mean())
    qa, qb = a.var(ddof=1) / na, b.var(ddof=1) / nb
    se = math.sqrt(qa + qb)
    # Welch-Satterthwaite; with no spread at all, fall back to the pooled df.
    df = (qa + qb) ** 2 / (qa**2 / (na - 1) + qb**2 / (nb - 1)) if se > 0 else float(na + nb - 2)
    t = _safe_ratio(diff, se)
    p = float(2 * stats.t.sf(abs(t), df))
    half = float(stats.t.ppf(1 - alpha / 2, df)) * se
    return {"difference": diff, "se": se, "t": float(t), "df": float(df), "p": p, "ci": [diff - half, diff + half]}


def _mean_diff(a, b):
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
    a, b = _values(a), _values(b)
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
    t = _safe_ratio(out["difference"], se)
    half = float(stats.t.ppf(1 - alpha / 2, n - 1)) * se
    out.update(sd=sd, se=se, t=float(t), df=float(n - 1), p=float(2 * stats.t.sf(abs(t), n - 1)),
               ci=[out["difference"] - half, out["difference"] + half])
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
    a, b = _values(a), _values(b)
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
    a, b = _values(a), _values(b)
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
        dict: w, p, sd_ratio (SD a / SD b). Two samples without any spread:
        p = 1 (nothing to tell apart); no spread of the deviations within
        either sample (e.g. two values each): w and p nan (undefined).
    """
    a, b = _values(a), _values(b)
    if a.size < 2 or b.size < 2:
        return {"w": math.nan, "p": math.nan, "sd_ratio": math.nan}
    sd_a, sd_b = float(a.std(ddof=1)), float(b.std(ddof=1))
    ratio = float(_safe_ratio(sd_a, sd_b))
    if np.ptp(a - np.median(a)) == 0 and np.ptp(b - np.median(b)) == 0:
        return {"w": 0.0, "p": 1.0, "sd_ratio": ratio}
    # Equal absolute deviations within each sample (e.g. two values per sample)
    # leave no within-group spread: W is undefined (nan), not a warning.
    with np.errstate(divide="ignore", invalid="ignore"):
        result = stats.levene(a, b, center="median")
    if not math.isfinite(float(result.statistic)):
        return {"w": math.nan, "p": math.nan, "sd_ratio": ratio}
    return {"w": float(result.statistic), "p": float(result.pvalue), "sd_ratio": ratio}


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
    a, b = _values(a), _values(b)
    welch = welch_test(a, b, alpha=2 * alpha)
    return _tost(welch["difference"], welch["se"], welch["df"], margin, alpha)


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
    return _tost(paired["difference"], paired["se"], paired["df"], margin, alpha)


def _tost(diff, se, df, margin, alpha):
    out = {"margin": _num(margin), "difference": diff, "p": math.nan, "p_lower": math.nan,
           "p_upper": math.nan, "ci": [math.nan, math.nan], "df": df}
    if margin is None or not math.isfinite(margin) or margin < 0 or not math.isfinite(se) or not math.isfinite(df):
        return out
    t_lower = _safe_ratio(diff + margin, se)
    t_upper = _safe_ratio(diff - margin, se)
    p_lower = float(stats.t.sf(t_lower, df))
    p_upper = float(stats.t.cdf(t_upper, df))
    half = float(stats.t.ppf(1 - alpha, df)) * se
    out.update(p=max(p_lower, p_upper), p_lower=p_lower, p_upper=p_upper, ci=[diff - half, diff + half])
    return out


def holm(pvalues):
    """Holm's step-down adjustment (family-wise error control).

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


# -------------------------------------------------------------------- power


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


# ------------------------------------------------------------ comparisons


def _shared_seeds(seeds_a, seeds_b, n_a, n_b):
    """Shared seeds if the paired design applies, else None."""
    if seeds_a is None or seeds_b is None:
        return None
    seeds_a, seeds_b = list(seeds_a), list(seeds_b)
    if len(set(seeds_a)) != len(seeds_a) or len(set(seeds_b)) != len(seeds_b):
        raise ValueError("Each seed must appear once per configuration (average replicates first).")
    shared = sorted(set(seeds_a) & set(seeds_b), key=lambda s: (str(type(s)), s))
    if len(shared) < MIN_PAIRED or len(shared) < PAIRED_SHARE * min(n_a, n_b):
        return None
    return shared


def compare_pair(a, b, seeds_a=None, seeds_b=None, margin=None, alpha=ALPHA, power=POWER):
    """Every test for one pair of configurations, before adjustment across pairs.

    Args:
        a, b: the metric per seed of configurations A and B.
        seeds_a, seeds_b: the seed of each value (None: no pairing). When at
            least MIN_PAIRED seeds, and 80% of the smaller arm, are shared, the
            primary test is paired (on the shared seeds).
        margin: equivalence margin; None skips TOST.
        alpha: level of every test.
        power: wanted power for the seeds-needed estimates.

    Returns:
        dict with n_a, n_b, mean_a, mean_b, difference (A - B), design
        ("paired" or "independent"), shared_seeds, welch, mann_whitney,
        levene, paired and seed_differences (None unless paired), hedges_g,
        tost, tost_welch, primary ({test, p, difference, ci}) and power.
        Holm-adjusted p-values and the verdict are added by
        compare_configurations.
    """
    a, b = _values(a), _values(b)
    shared = _shared_seeds(seeds_a, seeds_b, a.size, b.size)
    out = {
        "n_a": int(a.size),
        "n_b": int(b.size),
        "mean_a": float(a.mean()) if a.size else math.nan,
        "mean_b": float(b.mean()) if b.size else math.nan,
        "difference": _mean_diff(a, b),
        "design": "paired" if shared else "independent",
        "shared_seeds": len(shared) if shared else 0,
        "welch": welch_test(a, b, alpha),
        "mann_whitney": mann_whitney(a, b),
        "levene": levene_test(a, b),
        "paired": None,
        "seed_differences": None,
        "identical_seeds": _identical_seeds(a, b, seeds_a, seeds_b),
    }
    if shared:
        index_a = {s: i for i, s in enumerate(seeds_a)}
        index_b = {s: i for i, s in enumerate(seeds_b)}
        pa = a[[index_a[s] for s in shared]]
        pb = b[[index_b[s] for s in shared]]
        out["paired"] = paired_test(pa, pb, alpha)
        out["seed_differences"] = seed_differences(pa, pb, margin)
    # The shift in units of the seed-to-seed spread, on the seeds the verdict
    # uses. No interval: a bootstrap of g over a few skewed seeds gave
    # intervals such as [-9e7, -9e-8], which say nothing.
    out["hedges_g"] = {"g": hedges_g(pa, pb) if shared else hedges_g(a, b), "seeds": "shared" if shared else "all"}

    out["tost_welch"] = tost_welch(a, b, margin, alpha) if margin is not None else None
    if shared:
        out["tost"] = tost_paired(pa, pb, margin, alpha) if margin is not None else None
        out["primary"] = {"test": "paired t", "p": out["paired"]["p"], "difference": out["paired"]["difference"],
                          "ci": out["paired"]["ci"]}
        sd, sd_kind = out["paired"]["sd"], "SD of the per-seed differences"
    else:
        out["tost"] = out["tost_welch"]
        out["primary"] = {"test": "Welch t", "p": out["welch"]["p"], "difference": out["welch"]["difference"],
                          "ci": out["welch"]["ci"]}
        sd, sd_kind = pooled_sd([a, b]), "pooled seed SD"
    out["power"] = _power_summary(sd, sd_kind, margin, alpha, power, bool(shared),
                                  out["shared_seeds"] if shared else min(a.size, b.size))
    return out


def _identical_seeds(a, b, seeds_a, seeds_b):
    """{"shared", "equal"}: seeds both arms ran, and how many gave exactly the same value."""
    if seeds_a is None or seeds_b is None:
        return {"shared": 0, "equal": 0}
    index_b = {s: i for i, s in enumerate(seeds_b)}
    shared = [(i, index_b[s]) for i, s in enumerate(seeds_a) if s in index_b]
    return {"shared": len(shared), "equal": sum(1 for i, j in shared if a[i] == b[j])}


def _power_summary(sd, sd_kind, margin, alpha, power, paired, n_now):
    out = {"sd": _num(sd), "sd_kind": sd_kind, "margin": _num(margin), "power_target": power,
           "seeds_now": int(n_now), "seeds_to_detect_margin": None, "seeds_to_show_equivalence": None,
           "seeds_needed": None, "power_now_detect": math.nan, "power_now_equivalence": math.nan}
    if margin is None or not math.isfinite(sd) or not math.isfinite(margin) or margin <= 0:
        return out
    detect = seeds_needed_difference(sd, margin, alpha, power, paired)
    equivalent = seeds_needed_equivalence(sd, margin, alpha, power, paired)
    # Enough to decide either way: a shift of the margin would be detected and
    # no shift would be shown equivalent (shifts in between may stay open).
    needed = None if detect is None or equivalent is None else max(detect, equivalent)
    out.update(seeds_to_detect_margin=detect, seeds_to_show_equivalence=equivalent, seeds_needed=needed)
    if n_now >= 2:
        out["power_now_detect"] = power_difference(n_now, sd, margin, alpha, paired)
        out["power_now_equivalence"] = power_equivalence(n_now, sd, margin, alpha, paired)
    return out


# Holm families: each test is adjusted across the pairs on its own.
_FAMILIES = {
    "primary": lambda c: c["primary"]["p"],
    "welch": lambda c: c["welch"]["p"],
    "mann_whitney": lambda c: c["mann_whitney"]["p"],
    "levene": lambda c: c["levene"]["p"],
    "paired": lambda c: c["paired"]["p"] if c["paired"] else math.nan,
    "wilcoxon": lambda c: c["paired"]["wilcoxon_p"] if c["paired"] else math.nan,
    "tost": lambda c: c["tost"]["p"] if c["tost"] else math.nan,
}


def compare_configurations(groups, seeds=None, margin=None, margin_sd=MARGIN_SD, alpha=ALPHA, power=POWER):
    """Every pair of configurations, with Holm adjustment across pairs and a verdict each.

    Args:
        groups: dict name -> metric per seed (1-D), in the order pairs are formed.
        seeds: dict name -> the seed of each value (same order); None or a
            missing name: no pairing for that configuration.
        margin: a fixed equivalence margin in the metric's units; None: margin_sd
            x the SD pooled over every configuration (one margin for all pairs).
        margin_sd: fraction of the pooled seed SD used when margin is None.
        alpha: level (family-wise across pairs).
        power: wanted power for the seeds-needed estimates.

    Returns:
        dict: margin, margin_rule, pooled_sd, alpha, pairs (list of compare_pair
        dicts plus a, b, p_holm {family: p}, verdict, verdict_kind, notes).
    """
    names = list(groups)
    seeds = seeds or {}
    arrays = {name: _values(groups[name]) for name in names}
    pooled = pooled_sd(arrays.values())
    if margin is not None:
        margin = float(margin)
        if not margin > 0:
            raise ValueError(f"The equivalence margin must be > 0, got {margin}.")
        rule = "fixed"
        used = margin
    else:
        rule = f"{margin_sd:g} x pooled seed SD"
        used = margin_sd * pooled if math.isfinite(pooled) and pooled > 0 else None
    pairs = []
    for i, j in itertools.combinations(range(len(names)), 2):
        a, b = names[i], names[j]
        result = compare_pair(arrays[a], arrays[b], seeds.get(a), seeds.get(b), margin=used, alpha=alpha,
                              power=power)
        pairs.append({"a": a, "b": b, **result})
    for family, get in _FAMILIES.items():
        for pair, adjusted in zip(pairs, holm([get(pair) for pair in pairs])):
            pair.setdefault("p_holm", {})[family] = adjusted
    for pair in pairs:
        pair.update(verdict(pair, alpha))
    return {"margin": _num(used), "margin_rule": rule, "pooled_sd": pooled, "alpha": alpha, "power": power,
            "pairs": pairs}


def verdict(pair, alpha=ALPHA):
    """The plain-words decision for one compared pair (after Holm).

    Rules: "identical" when both arms ran the same seeds (at least 2) and
    each gave exactly the same value in both; else "difference detected" when the primary test's Holm-adjusted p <
    alpha; else "equivalent within +/- margin" when TOST's Holm-adjusted p <
    alpha; else "inconclusive: about N seeds per configuration needed", N from
    the power analysis (enough to detect a shift of the margin and to show
    equivalence if there is none).

    Args:
        pair: a compare_pair dict with p_holm added.
        alpha: level.

    Returns:
        dict: verdict (the sentence), verdict_kind ("identical": every seed
        gave exactly the same value in both arms; "difference", "equivalent"
        or "inconclusive"), notes (list of sentences: supporting and
        contradicting evidence).
    """
    p = pair["p_holm"]
    notes = []
    same = pair.get("identical_seeds") or {}
    if same.get("shared", 0) >= 2 and same["equal"] == same["shared"] == pair["n_a"] == pair["n_b"]:
        # Not inference: every seed gave the very same number in both arms.
        return {"verdict": f"equivalent: identical results for each of the {same['shared']} seeds",
                "verdict_kind": "identical",
                "notes": ["the configuration made no difference to any seed's outcome; "
                          "the tests below have no spread to work with"]}
    margin = pair["tost"]["margin"] if pair.get("tost") else math.nan
    paired = pair.get("paired")
    if paired and paired["n"] >= 2 and paired["sd"] == 0 and paired["difference"] == 0:
        notes.append(f"the metric is identical for all {paired['n']} shared seeds")
    if _below(p["primary"], alpha):
        kind = "difference"
        text = "difference detected"
        if _below(p["tost"], alpha):
            notes.append(f"the difference is smaller than the margin (+/- {_fmt(margin)}): TOST also passes")
        if not _below(p["mann_whitney"], alpha) and pair["design"] == "independent":
            notes.append(f"Mann-Whitney U does not confirm it (Holm p = {_fmt(p['mann_whitney'])})")
    elif _below(p["tost"], alpha):
        kind = "equivalent"
        text = f"equivalent within +/- {_fmt(margin)}"
    else:
        kind = "inconclusive"
        needed = pair["power"]["seeds_needed"]
        if pair["n_a"] < 2 or pair["n_b"] < 2:
            text = "inconclusive: at least 2 seeds per configuration needed"
        elif needed is None:
            text = ("inconclusive: no margin to test against (no seed spread)" if not math.isfinite(margin)
                    else f"inconclusive: more than {MAX_SEEDS} seeds per configuration needed")
        else:
            text = f"inconclusive: about {needed} seeds per configuration needed"
    if _below(p["levene"], alpha):
        notes.append(f"the spread differs (Levene Holm p = {_fmt(p['levene'])}, SD ratio {_fmt(pair['levene']['sd_ratio'])})")
    return {"verdict": text, "verdict_kind": kind, "notes": notes}


def _below(p, alpha):
    return p is not None and math.isfinite(p) and p < alpha


def _fmt(value):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:.3g}"


# ------------------------------------------------------------- determinism


def determinism_audit(runs, claims_determinism):
    """Share of bit-identical repeats in one configuration.

    A repeat is every run of a seed after the first (runs in the given order);
    it is bit-identical when its final-weights checksum and its loss-curve
    checksum both equal the first run's. A checksum that is None on either
    side is not compared (the other one decides); with both None the repeat
    cannot be audited.

    The size of the run-to-run variation: the largest absolute difference of
    the metric between a repeat and its seed's first run, over the repeats
    where both have a finite metric (whether or not their checksums could be
    compared).

    Args:
        runs: list of dicts with "seed", "weights_checksum", "curve_checksum"
            and optionally "metric" (the study's metric of the run; None or
            absent: not known).
        claims_determinism: whether the configuration asked for deterministic kernels.

    Returns:
        dict: seeds, seeds_repeated, repeats, audited, identical, share,
        identical_weights, identical_curves, claims_determinism, status
        ("deterministic", "defect", "not deterministic", "not audited"),
        differing_seeds, max_metric_difference (float; None when no repeat
        has a metric to compare) and metric_repeats (the repeats it is over).
    """
    by_seed = {}
    for run in runs:
        by_seed.setdefault(run["seed"], []).append(run)
    repeats = audited = identical = same_weights = same_curves = 0
    weight_pairs = curve_pairs = 0
    differing = []
    metric_difference, metric_repeats = None, 0
    for seed_, group in by_seed.items():
        first = group[0]
        for other in group[1:]:
            repeats += 1
            a, b = first.get("metric"), other.get("metric")
            if a is not None and b is not None and math.isfinite(a) and math.isfinite(b):
                metric_repeats += 1
                difference = abs(float(b) - float(a))
                metric_difference = difference if metric_difference is None else max(metric_difference, difference)
            checks = []
            for key in ("weights_checksum", "curve_checksum"):
                if first.get(key) is not None and other.get(key) is not None:
                    checks.append((key, first[key] == other[key]))
            if not checks:
                continue
            audited += 1
            for key, same in checks:
                if key == "weights_checksum":
                    weight_pairs += 1
                    same_weights += same
                else:
                    curve_pairs += 1
                    same_curves += same
            if all(same for _, same in checks):
                identical += 1
            elif seed_ not in differing:
                differing.append(seed_)
    share = identical / audited if audited else math.nan
    if not audited:
        status = "not audited"
    elif identical == audited:
        status = "deterministic"
    else:
        status = "defect" if claims_determinism else "not deterministic"
    return {
        "seeds": len(by_seed),
        "seeds_repeated": sum(1 for g in by_seed.values() if len(g) > 1),
        "repeats": repeats,
        "audited": audited,
        "identical": identical,
        "share": share,
        "identical_weights": [same_weights, weight_pairs],
        "identical_curves": [same_curves, curve_pairs],
        "claims_determinism": bool(claims_determinism),
        "status": status,
        "differing_seeds": differing,
        "max_metric_difference": metric_difference,
        "metric_repeats": metric_repeats,
    }


# ----------------------------------------------------------------- curves


def _t_independent(a, b):
    """Welch t per column for stacks: a (..., na, K), b (..., nb, K) -> (..., K)."""
    na, nb = a.shape[-2], b.shape[-2]
    se = np.sqrt(a.var(axis=-2, ddof=1) / na + b.var(axis=-2, ddof=1) / nb)
    return _safe_ratio(a.mean(axis=-2) - b.mean(axis=-2), se)


def _t_paired(d):
    """One-sample t per column of differences: d (..., n, K) -> (..., K)."""
    n = d.shape[-2]
    return _safe_ratio(d.mean(axis=-2), d.std(axis=-2, ddof=1) / math.sqrt(n))


def compare_curves(a, b, paired=False, checkpoints=None, alpha=ALPHA, method="maxt",
                   permutations=PERMUTATIONS, rng=None):
    """A test at every checkpoint of two sets of curves, family-wise controlled.

    Args:
        a: (n_a, K) array, one curve per seed of configuration A, at K checkpoints.
        b: (n_b, K) array for B; with paired, rows of a and b are the same seeds.
        paired: paired t per checkpoint and sign-flip permutations; else Welch t
            and label permutations.
        checkpoints: K labels (e.g. global steps); default 1..K.
        alpha: family-wise level over the K checkpoints.
        method: "maxt" (Westfall-Young max-|t| permutation: exact when all
            permutations fit in `permutations`, else that many random ones) or
            "holm" (Holm on the pointwise t-test p-values). Both are computed;
            method picks which marks checkpoints significant.
        permutations: the permutation budget.
        rng: numpy Generator for random permutations.

    Returns:
        dict: checkpoints, mean_a, mean_b, difference, t, p (pointwise), p_holm,
        p_maxt, permutations (used), exact, p_floor (the smallest p the
        permutations can give), method, significant (list of bool),
        first_significant (checkpoint or None), p_global (the smallest
        adjusted p: the test of "the curves differ somewhere").
    """
    if method not in ("maxt", "holm"):
        raise ValueError(f"method must be 'maxt' or 'holm', got {method!r}.")
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError("Curves must be (seeds, checkpoints) arrays with the same checkpoints.")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("Curves must be finite.")
    k = a.shape[1]
    checkpoints = list(checkpoints) if checkpoints is not None else list(range(1, k + 1))
    rng = rng if rng is not None else np.random.default_rng(0)
    out = {"checkpoints": checkpoints, "design": "paired" if paired else "independent",
           "mean_a": a.mean(axis=0).tolist() if len(a) else [math.nan] * k,
           "mean_b": b.mean(axis=0).tolist() if len(b) else [math.nan] * k,
           "method": method}
    if paired and a.shape != b.shape:
        raise ValueError("Paired curves need the same seeds (rows) in a and b.")
    too_few = (a.shape[0] < 2) if paired else (a.shape[0] < 2 or b.shape[0] < 2)
    if too_few:
        nan = [math.nan] * k
        out.update(difference=(a.mean(0) - b.mean(0)).tolist() if len(a) and len(b) else nan, t=nan, p=nan,
                   p_holm=nan, p_maxt=nan, permutations=0, exact=False, p_floor=math.nan, significant=[False] * k,
                   first_significant=None, p_global=math.nan)
        return out

    if paired:
        d = a - b
        t = _t_paired(d)
        p = 2 * stats.t.sf(np.abs(t), d.shape[0] - 1)
        n = d.shape[0]
        if 2**n <= permutations:
            signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
            exact = True
        else:
            signs = rng.choice((1.0, -1.0), size=(permutations, n))
            exact = False
        null_max = np.abs(_t_paired(d[None, :, :] * signs[:, :, None])).max(axis=1)
    else:
        t = _t_independent(a, b)
        na, nb = a.shape[0], b.shape[0]
        qa, qb = a.var(axis=0, ddof=1) / na, b.var(axis=0, ddof=1) / nb
        with np.errstate(divide="ignore", invalid="ignore"):
            df = (qa + qb) ** 2 / (qa**2 / (na - 1) + qb**2 / (nb - 1))
        df = np.where(np.isfinite(df), df, na + nb - 2)
        p = 2 * stats.t.sf(np.abs(t), df)
        pooled = np.vstack([a, b])
        total = na + nb
        if math.comb(total, na) <= permutations:
            choices = list(itertools.combinations(range(total), na))
            labels = np.zeros((len(choices), total), dtype=bool)
            for row, chosen in enumerate(choices):
                labels[row, list(chosen)] = True
            exact = True
        else:
            labels = np.zeros((permutations, total), dtype=bool)
            for row in range(permutations):
                labels[row, rng.permutation(total)[:na]] = True
            exact = False
        # Stable argsort puts the na rows labelled A first, in their original order.
        order = np.argsort(~labels, axis=1, kind="stable")
        shuffled = pooled[order]
        null_max = np.abs(_t_independent(shuffled[:, :na], shuffled[:, na:])).max(axis=1)
    t = np.asarray(t, dtype=float)
    observed = np.abs(t)
    # A relative tolerance keeps ties (the identity permutation) counted despite rounding.
    exceed = (null_max[:, None] >= observed[None, :] * (1 - 1e-12)).sum(axis=0)
    if exact:
        p_maxt = exceed / null_max.size
        # The smallest p the permutations can give: few seeds cap it (2 / 2^n paired).
        p_floor = float((null_max >= null_max.max() * (1 - 1e-12)).sum() / null_max.size)
    else:
        p_maxt = (1 + exceed) / (1 + null_max.size)
        p_floor = 1 / (1 + null_max.size)
    p_holm = holm(p)
    adjusted = p_maxt if method == "maxt" else np.asarray(p_holm)
    significant = [bool(v < alpha) for v in adjusted]
    first = next((c for c, s in zip(checkpoints, significant) if s), None)
    out.update(difference=(a.mean(0) - b.mean(0)).tolist(), t=t.tolist(), p=np.asarray(p, float).tolist(),
               p_holm=p_holm, p_maxt=np.asarray(p_maxt, float).tolist(), permutations=int(null_max.size),
               exact=exact, p_floor=p_floor if method == "maxt" else math.nan, significant=significant,
               first_significant=first,
               p_global=float(np.min(adjusted)))
    return out


# -------------------------------------------------------------- divergence


def summarize_divergence(steps, distances):
    """Median and quartiles over seeds of distance-over-training curves.

    Args:
        steps: the K steps the distances were measured at.
        distances: (n, K) array: one curve per seed (or per pair of runs).

    Returns:
        dict: steps, n, median, q25, q75 (lists), first_separated (the first
        step at which the median distance is above 0, or None), final_median.
    """
    d = np.asarray(distances, dtype=float)
    if d.ndim != 2 or d.shape[1] != len(steps):
        raise ValueError("distances must be (curves, steps) with one column per step.")
    if d.shape[0] == 0:
        return {"steps": list(steps), "n": 0, "median": [], "q25": [], "q75": [], "first_separated": None,
                "final_median": math.nan}
    q25, median, q75 = np.quantile(d, [0.25, 0.5, 0.75], axis=0)
    first = next((s for s, m in zip(steps, median) if m > 0), None)
    return {"steps": [int(s) for s in steps], "n": int(d.shape[0]), "median": median.tolist(), "q25": q25.tolist(),
            "q75": q75.tolist(), "first_separated": first, "final_median": float(median[-1])}
