"""The report's loss-curve and divergence sections: runs' curves binned per seed, tested per pair;
trajectories compared between configurations, with the 1-ulp baseline and replicates.
"""

import functools
import math

import numpy as np

from prednet_keras.study.report.configurations import run_sort_key
from prednet_keras.study.stats.curve_tests import compare_curves
from prednet_keras.study.stats.divergence import rms_distance, summarize_curves
from prednet_keras.study.stats import holm

__all__ = ["PLOT_BINS", "curve_section", "divergence_section"]

PLOT_BINS = 100


def _binned(run, edges):
    """Mean per-step loss in each bin (edges[i], edges[i+1]] of global steps."""
    values = np.full(len(edges) - 1, math.nan)
    for i in range(len(edges) - 1):
        inside = (run.steps > edges[i]) & (run.steps <= edges[i + 1])
        if inside.any():
            values[i] = float(np.mean(run.losses[inside]))
    return values


def _bin_edges(last_step, bins):
    bins = max(1, min(bins, last_step))
    return np.unique(np.round(np.linspace(0, last_step, bins + 1)).astype(np.int64))


def _per_seed_curves(config_runs, edges):
    """{seed: curve}, replicates averaged; runs without a full curve are skipped."""
    by_seed = {}
    for run in config_runs:
        curve = _binned(run, edges)
        if np.all(np.isfinite(curve)):
            by_seed.setdefault(run.seed, []).append(curve)
    return {seed: np.mean(curves, axis=0) for seed, curves in by_seed.items()}


def curve_section(configs, pairs, options):
    runs = [r for c in configs for r in c["runs"] if r.steps.size]
    if not runs:
        return None, None
    last = int(min(r.steps.max() for r in runs))
    edges = _bin_edges(last, options.checkpoints)
    checkpoints = edges[1:].tolist()
    per_config = {c["id"]: _per_seed_curves(c["runs"], edges) for c in configs}
    tests = []
    for number, pair in enumerate(pairs):
        ca, cb = per_config[pair["a"]], per_config[pair["b"]]
        paired = pair["design"] == "paired"
        if paired:
            shared = [s for s in sorted(set(ca) & set(cb), key=lambda s: (str(type(s)), s))]
            a = np.array([ca[s] for s in shared]).reshape(len(shared), -1)
            b = np.array([cb[s] for s in shared]).reshape(len(shared), -1)
        else:
            a = np.array(list(ca.values())).reshape(len(ca), -1)
            b = np.array(list(cb.values())).reshape(len(cb), -1)
        result = compare_curves(a, b, paired=paired, checkpoints=checkpoints, alpha=options.alpha,
                                      method=options.curve_test, permutations=options.permutations,
                                      rng=np.random.default_rng([options.seed, 1, number]))
        tests.append({"a": pair["a"], "b": pair["b"], **result})
    # Each pair's test already holds its checkpoints together; Holm on the
    # pairs' global p-values holds the family of pairs too.
    for test, adjusted in zip(tests, holm([t["p_global"] for t in tests])):
        test["p_global_holm"] = adjusted
        test["differs"] = bool(math.isfinite(adjusted) and adjusted < options.alpha)
    notes = []
    # Few seeds give few distinct permutations: the smallest p they can give,
    # times the number of pairs (Holm's first step), may never reach alpha.
    capped = [f"{t['a']} vs {t['b']} (p >= {t['p_floor']:.3g})" for t in tests
              if math.isfinite(t.get("p_floor", math.nan)) and t["p_floor"] * len(tests) >= options.alpha]
    if capped:
        notes.append(
            f"With their seeds the max-t permutation test cannot go below a floor for {', '.join(capped)}; after "
            f"Holm over {len(tests)} pairs these cannot reach alpha = {options.alpha} whatever the curves. More "
            "seeds, or --curve-test holm, lift the floor."
        )
    plot_edges = _bin_edges(last, PLOT_BINS)
    plot_curves = {c["id"]: _per_seed_curves(c["runs"], plot_edges) for c in configs}
    section = {"checkpoints": checkpoints, "bin": "mean per-step loss over the steps since the previous checkpoint",
               "method": options.curve_test, "tests": tests, "notes": notes}
    return section, {"edges": plot_edges, "curves": plot_curves}


def divergence_section(configs, perturbed, pairs):
    """Divergence summaries: between configurations (same seed), the 1-ulp
    baseline per configuration, and replicates within a configuration."""
    # Trajectories can be large (weights at every checkpoint): a few are kept
    # in memory and the rest read again when a later pair needs them.
    @functools.lru_cache(maxsize=8)
    def load(path):
        return by_path[path].trajectory()

    def trajectory(run):
        return load(run.path) if run.trajectory_path is not None else None

    by_path = {r.path: r for c in configs for r in c["runs"]}
    by_path.update({r.path: r for r in perturbed})

    def first_per_seed(config):
        chosen = {}
        for run in sorted(config["runs"], key=run_sort_key):
            if run.seed not in chosen and run.trajectory_path is not None:
                chosen[run.seed] = run
        return chosen

    firsts = {c["id"]: first_per_seed(c) for c in configs}
    if not any(firsts.values()):
        return None
    out = {"between": [], "baseline": [], "replicates": []}
    for a, b in pairs:
        shared = sorted(set(firsts[a]) & set(firsts[b]), key=lambda s: (str(type(s)), s))
        summary = summarize_curves([rms_distance(trajectory(firsts[a][s]), trajectory(firsts[b][s])) for s in shared])
        if summary:
            out["between"].append({"a": a, "b": b, **summary})
    for config in configs:
        cid = config["id"]
        nudged = [r for r in perturbed if r.config_key == config["key"] and r.seed in firsts[cid]]
        summary = summarize_curves(
            [rms_distance(trajectory(firsts[cid][r.seed]), trajectory(r)) for r in nudged if r.trajectory_path is not None]
        )
        if summary:
            out["baseline"].append({"configuration": cid, "perturbation": nudged[0].perturbation, **summary})
        repeats = []
        for seed, first in firsts[cid].items():
            for run in config["runs"]:
                if run.seed == seed and run.path != first.path and run.trajectory_path is not None:
                    repeats.append(rms_distance(trajectory(first), trajectory(run)))
        summary = summarize_curves(repeats)
        if summary:
            out["replicates"].append({"configuration": cid, **summary})
    return out if any(out.values()) else None
