#!/bin/bash
# Issue 37, Amendment 1, second probe. The first (jax_f32_determinism.sh, docs/study/device/probes/) found
# JAX's float32 GPU runs (TF32 off, deterministic ops) bit-identical when a process runs alone, with or
# without a shared compilation cache; in the study they were not. What differs in the study: 16 processes at
# once under MPS. This probe runs seed 100 of the study's reference the study's way, to find which part of
# that setting breaks the repeat and whether XLA's default algorithms (no autotuning) survive it:
#
#   PREDNET_SOURCE_COMMIT=$(git rev-parse HEAD) PREDNET_SOURCE_DIRTY=0 bash scripts/device/jax_f32_determinism_mps.sh OUT
#
# Variants (each with its own JAX compilation cache, as the study's configurations have):
#   f32      --deterministic --no-tf32                               the study's reference
#   noauto   f32 with XLA_FLAGS=--xla_gpu_autotune_level=0           XLA's default algorithms, nothing timed
#   tf32     --deterministic --tf32                                  repeated in the study
#   nondet   --no-deterministic --no-tf32                            for comparison
# Phase 0: one run of each variant, side by side under MPS (it compiles and fills the variant's cache).
# Phase 1: two more runs of each variant, all eight at once under MPS, loading the cached programs.
# Phase 2: MPS stopped; two more runs of f32 and of noauto, four at once (the GPU time-sliced).
# Every run is compared with its variant's phase-0 run: bit-identical final weights and loss curve, or the first
# update whose loss differs. OUT gets summary.txt and jax-f32-determinism-mps.tar.xz (manifests, histories,
# logs). No loss value is printed: the runs are the study's seed 100 (preregistration.md, no interim looks).
set -u
source "$(dirname "$0")/require_commit.sh"
dest=${1:-${OUT:-}}
[ -n "$dest" ] || { echo "usage: bash scripts/device/jax_f32_determinism_mps.sh OUT" >&2; exit 2; }
work=/tmp/jax-f32-determinism-mps
rm -rf "$work"; mkdir -p "$work/logs" "$dest"
export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
mps=off
stop_mps() { [ "$mps" = on ] && echo quit | nvidia-cuda-mps-control; mps=off; }
pack() {
    stop_mps
    cp "$work/summary.txt" "$dest/" 2>/dev/null
    tar cJf "$dest/jax-f32-determinism-mps.tar.xz" -C "$work" --exclude='*.keras' --exclude='*.h5' \
        --exclude='*.npz' --exclude='loss.png' --exclude='cache-*' . 2>> "$work/logs/pack.txt"
}
trap pack EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$work/logs/nvidia-smi.txt" 2>&1

common=(--model prednet-chainer --protocol paper --size 32x40 --stack-sizes 3,16,32,64 --period "${PROBE_PERIOD:-4000}"
        --unroll --data data/study/clips-32x40.h5 --seed 100 --backend jax --device "${PROBE_DEVICE:-gpu}" --quiet)
flags() {
    case $1 in
        f32) echo "--deterministic --no-tf32";; noauto) echo "--deterministic --no-tf32";;
        tf32) echo "--deterministic --tf32";; nondet) echo "--no-deterministic --no-tf32";;
    esac
}
run() {  # run VARIANT NAME: one training of VARIANT into $work/VARIANT/NAME, in the background
    local variant=$1 name=$2 xla=""
    [ "$variant" = noauto ] && xla=--xla_gpu_autotune_level=0
    XLA_FLAGS=$xla JAX_COMPILATION_CACHE_DIR="$work/cache-$variant" JAX_COMPILATION_CACHE_MAX_SIZE=$((2 * 1024**3)) \
        python3 -m prednet_keras.cli.train "${common[@]}" $(flags "$variant") -o "$work/$variant/$name" \
        > "$work/logs/$variant-$name.log" 2>&1 &
}
start_mps() {
    export CUDA_MPS_PIPE_DIRECTORY=$work/mps/pipe CUDA_MPS_LOG_DIRECTORY=$work/mps/log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if command -v nvidia-cuda-mps-control > /dev/null && nvidia-cuda-mps-control -d; then mps=on; fi
    echo "MPS: $mps" >> "$work/summary.txt"
}
started=$(date +%s)
stamp() { echo "$1 done at $(( $(date +%s) - started )) s" >> "$work/summary.txt"; }
cat "$work/logs/nvidia-smi.txt" > "$work/summary.txt"

start_mps
for v in f32 noauto tf32 nondet; do run $v p0; done; wait; stamp "phase 0 (MPS $mps)"
for v in f32 noauto tf32 nondet; do run $v p1a; run $v p1b; done; wait; stamp "phase 1 (MPS $mps)"
stop_mps; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
for v in f32 noauto; do run $v p2a; run $v p2b; done; wait; stamp "phase 2 (MPS off)"

python3 - "$work" >> "$work/summary.txt" 2>&1 <<'PY'
import csv, pathlib, sys
from prednet_keras.study import load_run
work = pathlib.Path(sys.argv[1])

def losses(folder):
    with open(folder / "history.csv") as f:
        return [row["loss"] for row in csv.DictReader(f)]

for variant in ("f32", "noauto", "tf32", "nondet"):
    reference = work / variant / "p0"
    try:
        first = load_run(reference)
    except Exception as error:
        print(f"{variant}: p0 did not finish ({error})"); continue
    for run in sorted(p for p in (work / variant).iterdir() if p.name.startswith("p") and p.name != "p0"):
        try:
            other = load_run(run)
        except Exception as error:
            print(f"{variant} {run.name}: did not finish ({error})"); continue
        same = (other.weights_checksum == first.weights_checksum and other.curve_checksum == first.curve_checksum)
        a, b = losses(reference), losses(run)
        differs = next((i + 1 for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
        print(f"{variant} {run.name} vs p0: {'bit-identical' if same else 'differs'}"
              + ("" if same else f", loss first differs at update {differs}") + f" ({len(b)} updates)")
PY
cat "$work/summary.txt"
