"""The determinism audit: are a configuration's repeats of a seed bit-identical?

Checksums and metrics of runs in, counts and a status out
(docs/study-statistics.md, "Determinism audit").
"""

import math

__all__ = ["determinism_audit"]


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
