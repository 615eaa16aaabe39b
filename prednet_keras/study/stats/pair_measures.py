"""The pre-registration's secondary measures of one contrast, over seeds: what two runs of each seed
disagree in beyond the one number per run the tests use.

Pairs in, numbers out; no tests (the measures are reported, not tested). A pair is one entry of a seed's
pairs file (study/report/seed_pairs.py, which reads and checks them): the two runs' held-out prediction
disagreement (`prediction_rms`, `prediction_scale`), the distance of their sampled weights at each
trajectory snapshot (`weight_distance`) and the first update whose logged loss differs
(`first_differing_update`, None where none does). A pair may lack the predictions or the weights (runs
that kept none); each measure counts the seeds it has.
"""

import numpy as np

from prednet_keras.study.stats.divergence import summarize_divergence

__all__ = ["spread", "summarise_pairs"]


def spread(values):
    """{"median", "min", "max"} of `values`, or None for none."""
    if not len(values):
        return None
    values = np.asarray(values, dtype=float)
    return {"median": float(np.median(values)), "min": float(values.min()), "max": float(values.max())}


def _prediction_disagreement(pairs):
    seeds = [seed for seed in sorted(pairs) if "prediction_rms" in pairs[seed]]
    values = [pairs[seed]["prediction_rms"] / pairs[seed]["prediction_scale"] for seed in seeds]
    return {"n": len(seeds), "seeds": seeds, "values": values, **(spread(values) or {})}


def _weights(pairs):
    seeds = [seed for seed in sorted(pairs) if "weight_distance" in pairs[seed]]
    if not seeds:
        return {"n": 0, "seeds": []}
    distances = [pairs[seed]["weight_distance"] for seed in seeds]
    steps = distances[0]["steps"]
    if any(d["steps"] != steps for d in distances):
        raise ValueError(f"seeds {seeds[0]} and {next(s for s, d in zip(seeds, distances) if d['steps'] != steps)} "
                         "have weight snapshots at different steps: no curve over seeds.")
    l2 = np.asarray([d["normalised_l2"] for d in distances], dtype=float)
    cosine = np.asarray([d["cosine_distance"] for d in distances], dtype=float)
    curve = summarize_divergence(steps, l2)
    return {"n": len(seeds), "seeds": seeds, "steps": list(steps),
            "median_normalised_l2": curve["median"],
            # Weights equal at every snapshot: a log axis cannot show them, so the plot marks them instead.
            "identical": int(np.sum(np.all(l2 == 0, axis=1))),
            "last": {"step": steps[-1], "normalised_l2": {"values": l2[:, -1].tolist(), **spread(l2[:, -1])},
                     "cosine_distance": {"values": cosine[:, -1].tolist(), **spread(cosine[:, -1])}}}


def _first_differing_update(pairs):
    seeds = sorted(pairs)
    values = [pairs[seed]["first_differing_update"] for seed in seeds]
    differing = [v for v in values if v is not None]
    return {"n": len(seeds), "seeds": seeds, "values": values, "never": len(values) - len(differing),
            "updates": max((max(pairs[seed]["updates"]) for seed in seeds), default=None),
            **(spread(differing) or {})}


def summarise_pairs(pairs):
    """One contrast's secondary measures over seeds.

    Args:
        pairs: {seed: pair}, the pair of the contrast's two runs in each seed that has one (finite numbers,
            as seed_pairs.read_pairs_folder checks them).

    Returns:
        a JSON-ready dict: n (seeds with a pair) and seeds;
        prediction_disagreement: per seed prediction_rms / prediction_scale (the RMS of the two runs' held-out
            predictions' difference relative to the RMS of one run's predictions), n, seeds, values, median,
            min, max;
        weights: n, seeds, steps, median_normalised_l2 (the median over seeds at each snapshot), identical
            (seeds whose sampled weights are equal at every snapshot) and last: at the last snapshot, the
            normalised L2 and the cosine distance (values, median, min, max);
        first_differing_update: values per seed (None: the losses never differ), never (how many), updates
            (the most any run made) and median, min, max over the seeds that differ.

    Raises:
        ValueError: the seeds' weight snapshots were taken at different steps.
    """
    return {"n": len(pairs), "seeds": sorted(pairs), "prediction_disagreement": _prediction_disagreement(pairs),
            "weights": _weights(pairs), "first_differing_update": _first_differing_update(pairs)}
