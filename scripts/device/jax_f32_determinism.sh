#!/bin/bash
# Issue 37, Amendment 1 of docs/study/device/preregistration.md: why JAX's float32 GPU runs (TF32 off) do not
# repeat bit for bit with deterministic ops, and whether a setting makes them repeat without changing their
# precision. On the GPU machine, after the set-up of ../shared/gpu/README.md, carrying data/study/:
#
#   PREDNET_SOURCE_COMMIT=$(git rev-parse HEAD) PREDNET_SOURCE_DIRTY=0 bash scripts/device/jax_f32_determinism.sh OUT
#
# Every variant trains the device study's model and protocol (prednet-chainer, paper protocol at 32x40,
# channels 3,16,32,64, 4000 frames, window unrolled, the study's training frames) from seed 100 with
# `prednet-train --repeat 2` (two runs one after the other, each in its own process compiling its own programs,
# then the audit: bit-identical or not). The variants run side by side, one process each on the GPU:
#   f32          --deterministic --no-tf32            the study's reference, alone (no MPS, no shared cache)
#   tf32         --deterministic --tf32               the arm that repeated in the study
#   f32-noauto   f32 with XLA_FLAGS=--xla_gpu_autotune_level=0 (XLA's default algorithms, no autotuning)
#   f32-nondet   --no-deterministic --no-tf32         for comparison
#   f32-cache    f32 with one JAX compilation cache for both repeats: the second loads the first's executable
#                (its autotuned algorithm picks), as the study's runs of one configuration do
#   f32-notriton f32 with XLA_FLAGS=--xla_gpu_enable_triton_gemm=false (cuBLAS for every matrix product)
# and one more run of f32 and of tf32 with --xla_dump_to, whose optimised HLO says which cuDNN engines and
# which other kernels (cuBLAS, Triton) each precision uses. OUT gets summary.txt and jax-f32-determinism.tar.xz
# (the runs' manifests, histories and logs, the audits, the HLO excerpts).
set -u
source "$(dirname "$0")/require_commit.sh"
dest=${1:-${OUT:-}}
[ -n "$dest" ] || { echo "usage: bash scripts/device/jax_f32_determinism.sh OUT" >&2; exit 2; }
work=/tmp/jax-f32-determinism
rm -rf "$work"; mkdir -p "$work/logs" "$dest"
export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
pack() {
    cp "$work/summary.txt" "$dest/" 2>/dev/null
    tar cJf "$dest/jax-f32-determinism.tar.xz" -C "$work" --exclude='*.keras' --exclude='*.h5' --exclude='*.npz' \
        --exclude='loss.png' --exclude='dump-*' --exclude='cache-*' . 2>> "$work/logs/pack.txt"
}
trap pack EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$work/logs/nvidia-smi.txt" 2>&1
# PROBE_DEVICE=cpu PROBE_PERIOD=60: a smoke test of this script elsewhere (tf32 is then refused, as it should be).
common=(--model prednet-chainer --protocol paper --size 32x40 --stack-sizes 3,16,32,64 --period "${PROBE_PERIOD:-4000}"
        --unroll --data data/study/clips-32x40.h5 --seed 100 --backend jax --device "${PROBE_DEVICE:-gpu}" --quiet)
train() { python3 -m prednet_keras.cli.train "${common[@]}" "$@"; }

train --deterministic --no-tf32 --repeat 2 -o "$work/f32" > "$work/logs/f32.log" 2>&1 &
train --deterministic --tf32 --repeat 2 -o "$work/tf32" > "$work/logs/tf32.log" 2>&1 &
XLA_FLAGS=--xla_gpu_autotune_level=0 train --deterministic --no-tf32 --repeat 2 -o "$work/f32-noauto" \
    > "$work/logs/f32-noauto.log" 2>&1 &
train --no-deterministic --no-tf32 --repeat 2 -o "$work/f32-nondet" > "$work/logs/f32-nondet.log" 2>&1 &
JAX_COMPILATION_CACHE_DIR="$work/cache-f32" JAX_COMPILATION_CACHE_MAX_SIZE=$((2 * 1024**3)) \
    train --deterministic --no-tf32 --repeat 2 -o "$work/f32-cache" > "$work/logs/f32-cache.log" 2>&1 &
XLA_FLAGS=--xla_gpu_enable_triton_gemm=false train --deterministic --no-tf32 --repeat 2 -o "$work/f32-notriton" \
    > "$work/logs/f32-notriton.log" 2>&1 &
for precision in no-tf32 tf32; do
    XLA_FLAGS="--xla_dump_to=$work/dump-$precision --xla_dump_hlo_as_text" \
        train --deterministic --$precision -o "$work/dumped-$precision" > "$work/logs/dumped-$precision.log" 2>&1 &
done
wait

{
    cat "$work/logs/nvidia-smi.txt"
    for variant in f32 tf32 f32-noauto f32-nondet f32-cache f32-notriton; do
        echo "== $variant: $(grep -h -E 'Bit-identical|Not bit-identical|did not finish|Error' "$work/logs/$variant.log" | tr '\n' ' ')"
    done
    # The kernels each precision's optimised program calls: custom-call targets with the cuDNN engine or
    # algorithm chosen, counted (the training step's module is the largest after-optimizations dump).
    for precision in no-tf32 tf32; do
        module=$(ls -S "$work/dump-$precision"/*after_optimizations.txt 2>/dev/null | head -1)
        echo "== kernels, $precision: ${module##*/}"
        [ -n "$module" ] && grep -o 'custom_call_target="[^"]*"' "$module" | sort | uniq -c
        [ -n "$module" ] && grep -o '"algo_id":"[0-9]*"\|"math_type":"[A-Z_]*"\|"is_cudnn_frontend":[a-z]*' "$module" \
            | sort | uniq -c
        [ -n "$module" ] && grep -o 'fusion_kind":"[^"]*"\|kind=k[A-Za-z]*' "$module" | sort | uniq -c | head -20
        [ -n "$module" ] && cp "$module" "$work/logs/hlo-$precision.txt"
    done
} > "$work/summary.txt" 2>&1
cat "$work/summary.txt"
