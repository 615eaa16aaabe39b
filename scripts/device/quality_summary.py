"""The quality check's lines of a GPU measurement script's summary (perf_h200.sh, bf16_h200.sh).

    python3 scripts/device/quality_summary.py OUT

Reads OUT/status.tsv (the "quality" row) and OUT/quality-PRECISION/manifest.json (prednet-train on the embedded
video, JAX, float32 and mixed_bfloat16 from the same seed, made by budget_lib.sh's `quality`) and prints each
run's recorded precision and losses, then the ratio of the final validation losses.
"""

import csv
import json
import os
import sys


def main(out):
    with open(os.path.join(out, "status.tsv")) as handle:
        status = {row["name"]: row for row in csv.DictReader(handle, delimiter="\t")}
    if "quality" not in status:
        return
    print(f"\nquality (prednet-train, embedded video, JAX, 3 epochs, seed 0): {status['quality']['status']}")
    losses = {}
    for precision in ("float32", "mixed_bfloat16"):
        path = os.path.join(out, f"quality-{precision}", "manifest.json")
        if not os.path.exists(path):
            print(f"  {precision}: no manifest")
            continue
        with open(path) as handle:
            manifest = json.load(handle)
        result = manifest.get("result") or {}
        effective = (manifest.get("runtime") or {}).get("effective") or {}
        losses[precision] = result.get("final_val_loss")
        print(f"  {precision:<15} recorded precision {effective.get('precision')}, final val_loss "
              f"{result.get('final_val_loss')}, final loss {result.get('final_loss')}, best val_loss "
              f"{result.get('best_val_loss')} (epoch {result.get('best_epoch')}), {result.get('train_seconds')} s")
    if all(isinstance(losses.get(p), (int, float)) for p in ("float32", "mixed_bfloat16")):
        f32, bf16 = losses["float32"], losses["mixed_bfloat16"]
        print(f"  final val_loss mixed_bfloat16 / float32 = {bf16 / f32:.4f} ({100 * (bf16 / f32 - 1):+.1f}%)")


if __name__ == "__main__":
    main(sys.argv[1])
