"""The operating characteristics of the device study's noise-floor rule, from the exploratory seeds' spread.

docs/study/device/preregistration.md fixes, before any run, how a device difference is set against the
one-ulp difference: G = exp(median over seeds of (ln|d_s| - ln|u_s|)), with a bootstrap percentile 95%
interval; "no larger than the one-ulp noise" when the upper bound is below 3. This script says how
often that rule concludes what, when d is the noise's size times a scale, drawing per-seed log-ratios
from the committed exploratory records (the retraction study's stack contrasts, n=30 each), and how
the RMS ratio and the mean of the log ratios would have fared instead:

    python scripts/noise_rule_simulation.py docs/study/retraction/runs.tar.xz --json out.json
"""

import argparse
import collections
import json
import math
import tarfile

import numpy as np

CONTRASTS = {
    "gpu-path": ("gpu-jax-gpu-path", "cpu-torch-gpu-path"),
    "cpu-path": ("gpu-jax-cpu-path", "cpu-torch-cpu-path"),
}
STATISTICS = {
    "median log ratio": lambda d, u: np.exp(np.median(_log_abs(d) - _log_abs(u), axis=-1)),
    "mean log ratio": lambda d, u: np.exp(np.mean(_log_abs(d) - _log_abs(u), axis=-1)),
    "RMS ratio": lambda d, u: np.sqrt(np.mean(d**2, axis=-1) / np.mean(u**2, axis=-1)),
}


def _log_abs(values):
    with np.errstate(divide="ignore"):
        return np.log(np.abs(values))


def exploratory_log_ratios(archive):
    """{contrast: per-seed ln(a / b)} of the archive's first replicates."""
    values = collections.defaultdict(dict)
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if not member.name.endswith("manifest.json"):
                continue
            manifest = json.load(tar.extractfile(member))
            study = manifest.get("study") or {}
            if manifest.get("status") == "complete" and study.get("replicate") == 1:
                values[study["configuration"]][manifest["seeds"]["seed"]] = manifest["metric"]["value"]
    out = {}
    for name, (a, b) in CONTRASTS.items():
        seeds = sorted(set(values[a]) & set(values[b]))
        out[name] = np.log([values[a][s] / values[b][s] for s in seeds])
    return out


def simulate(pool, statistic, scale, seeds, simulations, resamples, threshold, rng):
    """Shares of simulated studies whose interval lies below `threshold`, above 1, above `threshold`."""
    below = above_one = above = 0
    for _ in range(simulations):
        d = rng.choice(pool, seeds) * scale
        u = rng.choice(pool, seeds)
        index = rng.integers(0, seeds, (resamples, seeds))
        low, high = np.percentile(statistic(d[index], u[index]), [2.5, 97.5])
        below += high < threshold
        above_one += low > 1
        above += low > threshold
    return {"upper_below_threshold": below / simulations, "lower_above_1": above_one / simulations,
            "lower_above_threshold": above / simulations}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archive")
    parser.add_argument("--seeds", type=int, default=35)
    parser.add_argument("--threshold", type=float, default=3.0)
    parser.add_argument("--simulations", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--json")
    args = parser.parse_args()
    pools = exploratory_log_ratios(args.archive)
    rows = []
    for contrast, pool in pools.items():
        for name, statistic in STATISTICS.items():
            for scale in (1, 2, 3, 6):
                rng = np.random.default_rng(1)
                shares = simulate(pool, statistic, scale, args.seeds, args.simulations, args.resamples,
                                  args.threshold, rng)
                rows.append({"contrast": contrast, "statistic": name, "scale": scale, **shares})
                print(f"{contrast:9} {name:17} device = {scale} x noise: upper < {args.threshold:g} in "
                      f"{shares['upper_below_threshold']:.0%}, lower > 1 in {shares['lower_above_1']:.0%}, "
                      f"lower > {args.threshold:g} in {shares['lower_above_threshold']:.0%}")
    if args.json:
        spread = {k: {"n": len(v), "sd": float(np.std(v, ddof=1)), "median_abs": float(np.median(np.abs(v))),
                      "max_abs": float(np.max(np.abs(v)))} for k, v in pools.items()}
        with open(args.json, "w") as handle:
            json.dump({"seeds": args.seeds, "threshold": args.threshold, "simulations": args.simulations,
                       "resamples": args.resamples, "exploratory": spread, "rows": rows}, handle, indent=1)
    return 0 if all(math.isfinite(r["upper_below_threshold"]) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
