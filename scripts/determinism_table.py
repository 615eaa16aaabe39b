"""The determinism table of a study folder: per configuration, are repeats bit-identical, and how long is a step?

    python scripts/determinism_table.py results/determinism-prednet [--json table.json]
    python scripts/determinism_table.py docs/determinism/prednet     # a packed study: runs.tar.xz

Reads the run folders under STUDY/runs/<configuration>/ (prednet-study run's
layout), or those of STUDY/runs.tar.xz when the study is packed. A configuration's repeats are bit-identical when every replicate of a
seed ends with the same final-weights checksum and the same loss curve (every
history column but the wall-clock seconds) as the seed's first replicate. Step
time: the median wall-clock seconds of a training step (an update for the study
models), the first step (compilation) left out; frames/s from it.
"""

import argparse
import contextlib
import json
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path

from prednet_keras.study import load_run

FLAGS = ("backend", "device", "threads", "deterministic", "cudnn", "tf32")
# A study folder's layout (README.md, docs/study-statistics.md): its run folders, or the archive `prednet-study pack` made of them.
RUNS, ARCHIVE = "runs", "runs.tar.xz"


def frames_per_step(manifest, row):
    """Frames one history row trained on (Lotter: batch x nt; Chainer: the window's steps; autoencoder: 1)."""
    options = manifest.get("options") or {}
    if options.get("model") == "prednet":
        return options["batch_size"] * options["nt"]
    if options.get("model") == "prednet-chainer":
        return row.get("steps")
    return 1


def step_durations(run):
    """[(row, seconds)] of a run's training steps. prednet-train's history gives the
    time since the epoch began; the study models' the time of each update."""
    rows = [r for r in run.history if r.get("kind", "step") == "step" and r.get("seconds") is not None]
    if (run.manifest.get("options") or {}).get("model") != "prednet":
        return [(r, r["seconds"]) for r in rows]
    out, previous = [], {}
    for row in rows:
        out.append((row, row["seconds"] - previous.get(row["epoch"], 0.0)))
        previous[row["epoch"]] = row["seconds"]
    return out


@contextlib.contextmanager
def runs_folder(study):
    """STUDY/runs, or the runs of a packed study (STUDY/runs.tar.xz) in a temporary folder."""
    packed = Path(study, ARCHIVE)
    if Path(study, RUNS).is_dir() or not packed.is_file():
        yield Path(study, RUNS)
        return
    with tempfile.TemporaryDirectory(prefix="determinism-table-") as root, tarfile.open(packed) as tar:
        tar.extractall(root, filter="data")  # members that would land outside `root` are refused
        yield Path(root) / RUNS


def table(study):
    with runs_folder(study) as folder:
        return _table(folder)


def _table(runs_dir):
    rows = []
    for config_dir in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        runs = [load_run(p) for p in sorted(config_dir.glob("seed-*-r*")) if p.is_dir()]
        runs = [r for r in runs if r.status == "complete"]
        if not runs:
            continue
        by_seed = {}
        for run in runs:
            by_seed.setdefault(run.seed, []).append(run)
        repeats = identical = 0
        for members in by_seed.values():
            members.sort(key=lambda r: r.replicate or 0)
            for other in members[1:]:
                repeats += 1
                identical += (other.weights_checksum == members[0].weights_checksum
                              and other.curve_checksum == members[0].curve_checksum)
        seconds, frames, total = [], 0, 0.0
        for run in runs:
            for row, duration in step_durations(run)[1:]:
                seconds.append(duration)
                frames += frames_per_step(run.manifest, row) or 0
                total += duration
        step = statistics.median(seconds) if seconds else None
        requested = runs[0].requested
        rows.append({
            "configuration": config_dir.name,
            **{k: requested.get(k) for k in FLAGS},
            "effective_tf32": runs[0].effective.get("tf32"),
            "runs": len(runs),
            "repeats": repeats,
            "identical": identical,
            "median_step_seconds": step,
            "frames_per_second": frames / total if total and frames else None,
            "final_weights": sorted({r.weights_checksum[:12] for r in runs if r.weights_checksum}),
        })
    return rows


def markdown(rows):
    lines = ["| configuration | backend | device | threads | deterministic | cuDNN | TF32 (effective) | repeats bit-identical | median step | frames/s | final weights |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        step = f"{r['median_step_seconds'] * 1000:.2f} ms" if r["median_step_seconds"] else "n/a"
        fps = f"{r['frames_per_second']:.0f}" if r["frames_per_second"] else "n/a"
        identical = f"{r['identical']}/{r['repeats']}" + (" yes" if r["repeats"] and r["identical"] == r["repeats"] else " NO" if r["repeats"] else "")
        lines.append(f"| {r['configuration']} | {r['backend']} | {r['device']} | {r['threads'] or 'default'} | "
                     f"{'yes' if r['deterministic'] else 'no'} | {'on' if r['cudnn'] else 'off'} | "
                     f"{r['tf32'] if r['tf32'] is not None else 'default'} ({r['effective_tf32']}) | {identical} | "
                     f"{step} | {fps} | {', '.join(r['final_weights'])} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    rows = table(args.study)
    if not rows:
        print(f"No finished runs under {args.study}/runs.", file=sys.stderr)
        return 1
    print(markdown(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
