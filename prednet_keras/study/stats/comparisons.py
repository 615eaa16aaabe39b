"""Every pair of configurations: all tests, Holm across the pairs, and a verdict in plain words.

Arrays of per-seed metrics in, JSON-ready dicts out (docs/study-statistics.md,
"Every pair of configurations" and "Verdict, per pair"):

- the verdict uses the paired design when the arms share seeds (the study gives
  every arm of a seed the same initial weights and data order), Welch otherwise;
- each test's p-values are Holm-adjusted across the pairs, test by test;
- power: seeds per configuration needed to detect a shift of the margin and to
  show equivalence within it, given the observed SD.
"""

import itertools
import math

from prednet_keras.study.stats.power import (
    MAX_SEEDS,
    power_difference,
    power_equivalence,
    seeds_needed_difference,
    seeds_needed_equivalence,
)
from prednet_keras.study.stats import (
    ALPHA,
    MARGIN_SD,
    POWER,
    finite_values,
    hedges_g,
    holm,
    json_float,
    levene_test,
    mann_whitney,
    mean_difference,
    paired_test,
    pooled_sd,
    seed_differences,
    tost_paired,
    tost_welch,
    welch_test,
)

__all__ = ["MIN_PAIRED", "PAIRED_SHARE", "compare_configurations", "compare_pair", "verdict"]

# Fewer shared seeds than this and a paired test has too few degrees of freedom
# to be worth giving up Welch's larger n.
MIN_PAIRED = 3
# Share of the smaller arm's seeds that must be shared for the paired design.
PAIRED_SHARE = 0.8


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
        ("paired" or "independent"), shared_seeds (the seeds both arms ran),
        paired_seeds (those the paired test used: 0 in the independent design), welch, mann_whitney,
        levene, paired and seed_differences (None unless paired), hedges_g,
        tost, tost_welch, primary ({test, p, difference, ci}) and power.
        Holm-adjusted p-values and the verdict are added by
        compare_configurations.
    """
    a, b = finite_values(a), finite_values(b)
    shared = _shared_seeds(seeds_a, seeds_b, a.size, b.size)
    identical = _identical_seeds(a, b, seeds_a, seeds_b)
    out = {
        "n_a": int(a.size),
        "n_b": int(b.size),
        "mean_a": float(a.mean()) if a.size else math.nan,
        "mean_b": float(b.mean()) if b.size else math.nan,
        "difference": mean_difference(a, b),
        "design": "paired" if shared else "independent",
        "shared_seeds": identical["shared"],
        "paired_seeds": len(shared) if shared else 0,
        "welch": welch_test(a, b, alpha),
        "mann_whitney": mann_whitney(a, b),
        "levene": levene_test(a, b),
        "paired": None,
        "seed_differences": None,
        "identical_seeds": identical,
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
                                  out["paired_seeds"] if shared else min(a.size, b.size))
    return out


def _identical_seeds(a, b, seeds_a, seeds_b):
    """{"shared", "equal"}: seeds both arms ran, and how many gave exactly the same value."""
    if seeds_a is None or seeds_b is None:
        return {"shared": 0, "equal": 0}
    index_b = {s: i for i, s in enumerate(seeds_b)}
    shared = [(i, index_b[s]) for i, s in enumerate(seeds_a) if s in index_b]
    return {"shared": len(shared), "equal": sum(1 for i, j in shared if a[i] == b[j])}


def _power_summary(sd, sd_kind, margin, alpha, power, paired, n_now):
    out = {"sd": json_float(sd), "sd_kind": sd_kind, "margin": json_float(margin), "power_target": power,
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
    arrays = {name: finite_values(groups[name]) for name in names}
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
    return {"margin": json_float(used), "margin_rule": rule, "pooled_sd": pooled, "alpha": alpha, "power": power,
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
    if pair["levene"].get("degenerate") and pair["n_a"] >= 2 and pair["n_b"] >= 2:
        notes.append(f"spread not tested: {pair['levene']['degenerate']}")
    elif _below(p["levene"], alpha):
        notes.append(f"the spread differs (Levene Holm p = {_fmt(p['levene'])}, SD ratio {_fmt(pair['levene']['sd_ratio'])})")
    return {"verdict": text, "verdict_kind": kind, "notes": notes}


def _below(p, alpha):
    return p is not None and math.isfinite(p) and p < alpha


def _fmt(value):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:.3g}"
