"""How fast runs that started alike drift apart: distances between trajectories, summarised over seeds.

Arrays in, numbers out (docs/study-statistics.md, "Divergence"); the report
reads the trajectories from the run folders.
"""

import math

import numpy as np

__all__ = ["normalised_distances", "rms_distance", "summarize_curves", "summarize_divergence"]


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


def rms_distance(first, second):
    """RMS difference of two trajectories at their common steps -> (steps, distances)."""
    (steps_a, values_a), (steps_b, values_b) = first, second
    common, index_a, index_b = np.intersect1d(steps_a, steps_b, return_indices=True)
    if common.size == 0 or values_a.shape[1] != values_b.shape[1]:
        return None
    diff = values_a[index_a].astype(np.float64) - values_b[index_b].astype(np.float64)
    return common, np.sqrt(np.mean(diff**2, axis=1))


def normalised_distances(values, reference):
    """Per snapshot (row), how far `values` is from `reference`: (|a - b| / |b|, 1 - cos(a, b)), float64.

    Scale-free where rms_distance is not: a normalised L2 of 0.01 is 1% of the reference's size.
    """
    a, b = np.asarray(values, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    tiny = np.finfo(np.float64).tiny
    norm_a, norm_b = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    cosine = np.sum(a * b, axis=1) / np.maximum(norm_a * norm_b, tiny)
    return np.linalg.norm(a - b, axis=1) / np.maximum(norm_b, tiny), 1.0 - cosine


def summarize_curves(curves):
    """Summary over (steps, distances) curves, on the steps they all share."""
    curves = [c for c in curves if c is not None]
    if not curves:
        return None
    steps = curves[0][0]
    for s, _ in curves[1:]:
        steps = np.intersect1d(steps, s)
    if steps.size == 0:
        return None
    rows = [d[np.searchsorted(s, steps)] for s, d in curves]
    return summarize_divergence(steps.tolist(), np.vstack(rows))
