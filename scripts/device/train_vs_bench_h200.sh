#!/bin/bash
# Issue 25 on the GPU machine: does prednet-train keep the GPU fed? prednet-train on the embedded video (128x160,
# Lotter's KITTI model, nt 10, JAX, float32) at batch 4 and 16, 2 epochs of 100 steps; its second epoch's
# training frames/s (from history.csv's step times, validation excluded) against prednet-bench's for the same
# model and batch in the same session (the bench JSON named by BENCH_DIR, default: bf16_h200.sh's output).
#
#   bash scripts/device/train_vs_bench_h200.sh OUT [BENCH_DIR]
#
# Run from the repository root after the set-up of ../shared/gpu/README.md. Writes into OUT: summary.txt and
# train_vs_bench.tar.xz (the two runs' manifest.json, history.csv and log).
set -u
dest=${1:?usage: bash scripts/device/train_vs_bench_h200.sh OUT [BENCH_DIR]}
bench_dir=${2:-}
work=${TVB_WORK:-/tmp/train-vs-bench}
rm -rf "$work"; mkdir -p "$work/logs" "$dest"
pack() {
    cp "$work/summary.txt" "$dest/" 2>/dev/null
    tar cJf "$dest/train_vs_bench.tar.xz" -C "$work" --exclude='*.keras' --exclude='*.h5' --exclude='checkpoints' \
        --exclude='*.png' .
}
trap pack EXIT
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
# TVB_DEVICE (default gpu) and TVB_EXTRA (options appended to prednet-train) are for a smoke test elsewhere.
read -r -a extra <<< "${TVB_EXTRA:-}"
for b in 4 16; do
    timeout -k 10 ${TVB_LIMIT_S:-90} python3 -m prednet_keras.cli.train --backend jax --device "${TVB_DEVICE:-gpu}" --epochs 2 \
        --steps-per-epoch 100 --batch-size "$b" --val-sequences 16 --seed 0 --quiet -o "$work/train-b$b" "${extra[@]}" \
        > "$work/logs/train-b$b.log" 2>&1
    echo "prednet-train batch $b: exit $?" >> "$work/logs/status.txt"
done
python3 - "$work" "$bench_dir" <<'PY' | tee "$work/summary.txt"
import csv, json, pathlib, sys
work, bench_dir = pathlib.Path(sys.argv[1]), sys.argv[2]
print((work / "logs" / "status.txt").read_text().strip())
for b in (4, 16):
    history = work / f"train-b{b}" / "history.csv"
    if not history.exists():
        print(f"batch {b}: no history")
        continue
    rows = list(csv.DictReader(open(history)))
    steps = [r for r in rows if r["kind"] == "step" and r["epoch"] == "2"]
    epoch = [r for r in rows if r["kind"] == "epoch" and r["epoch"] == "2"]
    t = [float(r["seconds"]) for r in steps]
    fps = (len(t) - 1) * b * 10 / (t[-1] - t[0])
    line = f"batch {b}: prednet-train epoch 2: {fps:,.0f} frames/s over steps 2-{len(t)} (validation excluded)"
    if epoch:
        line += f", whole epoch {float(epoch[0]['seconds']):.2f} s with validation ({len(t) * b * 10 / float(epoch[0]['seconds']):,.0f} frames/s)"
    for name in (f"jax-float32-b{b}.json",):
        path = pathlib.Path(bench_dir) / name if bench_dir else None
        if path and path.exists():
            (result,) = json.load(open(path))["results"]
            line += f"; prednet-bench {result['train']['fps']:,.0f} frames/s: train/bench {fps / result['train']['fps']:.2f}"
    print(line)
PY
