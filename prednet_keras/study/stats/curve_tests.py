"""Whole loss curves: a test at every checkpoint, family-wise controlled.

(seeds, checkpoints) arrays in, JSON-ready dicts out (docs/study-statistics.md,
"Whole loss curves"): paired or Welch t per checkpoint, with the max-|t|
permutation test (Westfall & Young 1993) or Holm across the checkpoints.
"""

import itertools
import math

import numpy as np
from scipy import stats

from prednet_keras.study.stats import ALPHA, PERMUTATIONS, holm, safe_ratio

__all__ = ["compare_curves"]


def _t_independent(a, b):
    """Welch t per column for stacks: a (..., na, K), b (..., nb, K) -> (..., K)."""
    na, nb = a.shape[-2], b.shape[-2]
    se = np.sqrt(a.var(axis=-2, ddof=1) / na + b.var(axis=-2, ddof=1) / nb)
    return safe_ratio(a.mean(axis=-2) - b.mean(axis=-2), se)


def _t_paired(d):
    """One-sample t per column of differences: d (..., n, K) -> (..., K)."""
    n = d.shape[-2]
    return safe_ratio(d.mean(axis=-2), d.std(axis=-2, ddof=1) / math.sqrt(n))


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
