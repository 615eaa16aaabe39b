#!/bin/bash
# Issue 25, one GPU command (device time is short): run from the repository root on the GPU machine, with .whl and
# .port carried (../shared/gpu/README.md; .port: a checkout of github.com/leido/pytorch-prednet).
#   bash scripts/device/unroll_port_arm_h200.sh      (writes into $OUT; TOTAL_S: seconds it may take, default 575;
#                                                      STAGES: which of "port unroll wgrad arm cudagraphs" run, in
#                                                      that order; default "port unroll wgrad")
# port       the port side by side with ours at batch 16: port, ours with JAX, ours compiled (torch.compile), port
#            (port_h200.sh). Most of it is Inductor compiling our step (145-230 s cold). Inductor's cache is kept in
#            /tmp/inductor-cache, which a later call on the same held machine finds; it is too large to bring back
#            (31 MiB packed after one configuration, against 16 MiB a file).
# unroll     the study window rolled against unrolled, deterministic GPU ops (python -m prednet_keras.bench.probes.chainer_unroll).
# wgrad      the weight-gradient batching probe (scripts/wgrad_batching_probe.py), with at most WGRAD_S seconds.
# arm        the 30-seed deterministic arm at -j 16 under MPS, unrolled if the unroll stage (this command's, or an
#            earlier call's on the same held machine) found unrolled faster, else rolled.
# cudagraphs ours compiled with Inductor's CUDA graphs at batches 16 and 4, and compiled without them at batch 4.
# $OUT gets probes.tgz (the unroll and wgrad probes, the kernel count), and per stage port16/ (summary.txt,
# status.tsv, port_h200.tgz), arm/ (summary.txt, study_arm.tar.xz) and graphs/ (summary.txt, status.tsv, port_h200.tgz).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
start=$(date +%s); p=/tmp/probes; mkdir -p $p; export KERAS_BACKEND=jax PYTHONUNBUFFERED=1
total=${TOTAL_S:-575}   # what the device call allows, less packing; every stage below fits in what is left
left() { echo $(( total - ($(date +%s) - start) )); }
stages=" ${STAGES:-port unroll wgrad} "
has() { [[ $stages == *" $1 "* ]]; }
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
mkdir -p $TORCHINDUCTOR_CACHE_DIR
python3 -m compileall -q -j 0 prednet_keras /tmp/site/keras > /dev/null 2>&1
# What remains of the command after each stage: the stages that follow need about this much.
reserve() { local r=10 s; for s in "$@"; do has $s && case $s in unroll) r=$((r+165));; wgrad) r=$((r+40));; arm) r=$((r+170));; cudagraphs) r=$((r+200));; esac; done; echo $r; }

if has port; then
    port_s=$(( $(left) - $(reserve unroll wgrad arm cudagraphs) )); (( port_s > 340 )) && port_s=340
    PORT_DIR=.port PORT_BATCHES=16 PERF_ONLY="port-b16-r1 jax-float32-b16 torch-compiled-float32-b16 port-b16-r2" \
        PERF_BUDGET_S=$port_s bash scripts/device/port_h200.sh $OUT/port16 | tail -8
    python3 scripts/inductor_kernels.py $TORCHINDUCTOR_CACHE_DIR --json $p/inductor-kernels-gpu.json > $p/inductor-kernels-gpu.txt 2>&1
fi
if has unroll; then
    for u in no-unroll unroll; do XLA_FLAGS=--xla_gpu_deterministic_ops=true timeout 80 python3 -m prednet_keras.bench.probes.chainer_unroll --$u --json $p/chainer-$u-det.json > $p/chainer-$u-det.txt 2>&1; tail -1 $p/chainer-$u-det.txt; done
    python3 -c "import json; a=json.load(open('$p/chainer-no-unroll-det.json')); b=json.load(open('$p/chainer-unroll-det.json')); print(int(b['update_ms']['median'] < a['update_ms']['median']))" > $p/unrolled_faster 2>/dev/null || rm -f $p/unrolled_faster
fi
tar czf $OUT/probes.tgz -C /tmp probes
if has wgrad; then
    w=$(( $(left) - $(reserve arm cudagraphs) )); (( w > ${WGRAD_S:-60} )) && w=${WGRAD_S:-60}
    (( w > 20 )) && timeout $w python3 scripts/wgrad_batching_probe.py --batch-size 16 --json $p/wgrad-b16.json > $p/wgrad-b16.txt 2>&1; tail -2 $p/wgrad-b16.txt
    tar czf $OUT/probes.tgz -C /tmp probes
fi
if has arm; then
    faster=$(cat $p/unrolled_faster 2>/dev/null); echo "unrolled faster: ${faster:-not known, rolled}"
    arm_s=$(( $(left) - $(reserve cudagraphs) )); (( arm_s > 170 )) && arm_s=170
    STUDY_WORK=/tmp/arm STUDY_UNROLL=${faster:-0} STUDY_WORKERS=16 STUDY_MPS=1 STUDY_ALONE_LIMIT_S=0 \
        STUDY_LIMIT_S=$arm_s bash scripts/device/study_arm_h200.sh $OUT/arm
fi
if has cudagraphs; then
    PORT_DIR=.port PORT_BATCHES="16 4" PERF_ONLY="torch-compiled-cudagraphs-b16 torch-compiled-float32-b4 torch-compiled-cudagraphs-b4" \
        PERF_BUDGET_S=$(( $(left) - 10 )) bash scripts/device/port_h200.sh $OUT/graphs | tail -6
fi
echo "Inductor cache: $(du -sh $TORCHINDUCTOR_CACHE_DIR | cut -f1)"
echo "total $(( $(date +%s) - start )) s"
