#!/usr/bin/env bash
# Issue 39 on the GPU machine: XLA's "Delay kernel timed out" autotuning warnings kept out of a run's output.
# Three small JAX GPU trainings at once (a busy GPU is when XLA's timer warns), two filtered as usual, one with
# PREDNET_SHOW_LOG_NOISE=1 (every line as XLA wrote it); counts the timer lines and the filter's own line in
# each output, and checks that every run completed.
#   bash scripts/device/log_noise_check.sh OUT_DIR
set -uo pipefail
out=${1:?usage: log_noise_check.sh OUT_DIR}
mkdir -p "$out"
train() {
    python3 -m prednet_keras.cli.train --backend jax --device gpu --size 64x80 --stack-sizes 3,16,32,64 \
        --epochs 2 --steps-per-epoch 20 --val-sequences 20 --quiet -o "$out/run-$1" --overwrite
}
train a > "$out/a.out" 2> "$out/a.err" &
train b > "$out/b.out" 2> "$out/b.err" &
PREDNET_SHOW_LOG_NOISE=1 train shown > "$out/shown.out" 2> "$out/shown.err" &
wait
for name in a b shown; do
    status=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['status'])" "$out/run-$name/manifest.json" 2>/dev/null)
    echo "$name: manifest status ${status:-missing}; timer lines $(grep -c 'cuda_timer' "$out/$name.err"); the filter's line $(grep -c 'such lines are hidden' "$out/$name.err")"
done | tee "$out/summary.txt"
