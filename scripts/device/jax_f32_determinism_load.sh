#!/bin/bash
# Issue 37, Amendment 1, third probe. Probes 1 and 2 (docs/study/device/probes/) found the reference (JAX
# float32, TF32 off, deterministic ops) bit-identical alone, with a shared compilation cache, and eight at once
# under MPS from a cache one run had filled. The study differed from them in two ways: 16 processes at once,
# half of them CPU runs, and programs compiled while they ran (the window shapes a run meets later than its
# first update, which no gate holds back, compiled by each process, each timing its own cuDNN candidates under
# that load). This probe compiles every program in every run, under the study's load:
#
#   PREDNET_SOURCE_COMMIT=$(git rev-parse HEAD) PREDNET_SOURCE_DIRTY=0 bash scripts/device/jax_f32_determinism_load.sh OUT
#
# Under MPS, at once, no compilation cache anywhere: seed 101 three times as the reference (f32) and three
# times with XLA's default algorithms (noauto: prednet-train --no-autotune, which sets --xla_gpu_autotune_level=0:
# nothing timed), beside a load of four
# nondeterministic GPU runs and six one-thread JAX CPU runs of other seeds. Each variant's runs are compared with
# its first (bit-identical final weights and loss curve, or the first update whose loss differs). OUT gets
# summary.txt and jax-f32-determinism-load.tar.xz. No loss value is printed (preregistration.md: no interim looks).
set -u
source "$(dirname "$0")/require_commit.sh"
dest=${1:-${OUT:-}}
[ -n "$dest" ] || { echo "usage: bash scripts/device/jax_f32_determinism_load.sh OUT" >&2; exit 2; }
work=/tmp/jax-f32-determinism-load
rm -rf "$work"; mkdir -p "$work/logs" "$dest"
export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
unset JAX_COMPILATION_CACHE_DIR
mps=off
stop_mps() { [ "$mps" = on ] && echo quit | nvidia-cuda-mps-control; mps=off; }
pack() {
    stop_mps
    cp "$work/summary.txt" "$dest/" 2>/dev/null
    tar cJf "$dest/jax-f32-determinism-load.tar.xz" -C "$work" --exclude='*.keras' --exclude='*.h5' \
        --exclude='*.npz' --exclude='loss.png' --exclude='history.csv' --exclude='load-*' . 2>> "$work/logs/pack.txt"
}
trap pack EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$work/summary.txt" 2>&1
common=(--model prednet-chainer --protocol paper --size 32x40 --stack-sizes 3,16,32,64 --period "${PROBE_PERIOD:-4000}"
        --unroll --data data/study/clips-32x40.h5 --backend jax --quiet)
run() {  # run NAME XLA_FLAGS ARGS...: one training into $work/NAME, in the background
    local name=$1 xla=$2; shift 2
    XLA_FLAGS=$xla python3 -m prednet_keras.cli.train "${common[@]}" "$@" -o "$work/$name" > "$work/logs/$name.log" 2>&1 &
}
export CUDA_MPS_PIPE_DIRECTORY=$work/mps/pipe CUDA_MPS_LOG_DIRECTORY=$work/mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if command -v nvidia-cuda-mps-control > /dev/null && nvidia-cuda-mps-control -d; then mps=on; fi
echo "MPS: $mps" >> "$work/summary.txt"
started=$(date +%s)
gpu=(--device "${PROBE_DEVICE:-gpu}" --no-tf32)
for i in 1 2 3; do
    run f32-$i "" --seed 101 "${gpu[@]}" --deterministic
    run noauto-$i "" --seed 101 "${gpu[@]}" --deterministic --no-autotune
done
for seed in 110 111 112 113; do run load-gpu-$seed "" --seed $seed "${gpu[@]}" --no-deterministic; done
for seed in 110 111 112 113 114 115; do run load-cpu-$seed "" --seed $seed --device cpu --threads 1 --deterministic; done
# The load's CPU runs take longer than the probe's; the probe waits for its own six only.
while pgrep -f -- "-o $work/(f32|noauto)-" > /dev/null; do sleep 2; done
echo "probe runs done at $(( $(date +%s) - started )) s" >> "$work/summary.txt"
pkill -f -- "-o $work/load-" ; sleep 3

python3 - "$work" >> "$work/summary.txt" 2>&1 <<'PY'
import csv, pathlib, sys
from prednet_keras.study import load_run
work = pathlib.Path(sys.argv[1])

def losses(folder):
    with open(folder / "history.csv") as f:
        return [row["loss"] for row in csv.DictReader(f)]

for variant in ("f32", "noauto"):
    first = work / f"{variant}-1"
    try:
        reference = load_run(first)
    except Exception as error:
        print(f"{variant}-1 did not finish ({error})"); continue
    for i in (2, 3):
        other_path = work / f"{variant}-{i}"
        try:
            other = load_run(other_path)
        except Exception as error:
            print(f"{variant}-{i} did not finish ({error})"); continue
        same = (other.weights_checksum == reference.weights_checksum
                and other.curve_checksum == reference.curve_checksum)
        a, b = losses(first), losses(other_path)
        differs = next((k + 1 for k, (x, y) in enumerate(zip(a, b)) if x != y), None)
        print(f"{variant}-{i} vs {variant}-1: {'bit-identical' if same else 'differs'}"
              + ("" if same else f", loss first differs at update {differs}") + f" ({len(b)} updates)")
PY
cat "$work/summary.txt"
