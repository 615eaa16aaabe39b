#!/bin/bash
# Issue 25, one GPU command (device time is short): run from the repository root on the GPU machine, with .whl and
# .port carried (../shared/gpu/README.md; .port: a checkout of github.com/leido/pytorch-prednet).
#   bash scripts/device/unroll_port_arm_h200.sh      (writes into $OUT; TOTAL_S: seconds it may take, default 575;
#                                                      STAGES: which of "port arm wgrad" follow step 1, default all)
# 1. the study window rolled against unrolled, deterministic GPU ops (scripts/chainer_unroll_probe.py);
# 2. the port side by side with ours compiled (torch.compile) at batch 16 (port_h200.sh: port, ours, port);
# 3. the 30-seed deterministic arm at -j 16 under MPS, unrolled if step 1 found unrolled faster, else rolled;
# 4. with the time left, the weight-gradient batching probe (scripts/wgrad_batching_probe.py).
# $OUT gets port16/ (summary.txt, status.tsv, port_h200.tgz), arm/ (summary.txt, study_arm.tar.xz), probes.tgz.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
start=$(date +%s); p=/tmp/probes; mkdir -p $p; export KERAS_BACKEND=jax
total=${TOTAL_S:-575}   # what the device call allows, less packing; every stage below fits in what is left
left() { echo $(( total - ($(date +%s) - start) )); }
python3 -m compileall -q -j 0 prednet_keras /tmp/site/keras > /dev/null 2>&1
for u in no-unroll unroll; do XLA_FLAGS=--xla_gpu_deterministic_ops=true timeout 80 python3 scripts/chainer_unroll_probe.py --$u --json $p/chainer-$u-det.json > $p/chainer-$u-det.txt 2>&1; tail -1 $p/chainer-$u-det.txt; done
tar czf $OUT/probes.tgz -C /tmp probes
faster=$(python3 -c "import json; a=json.load(open('$p/chainer-no-unroll-det.json')); b=json.load(open('$p/chainer-unroll-det.json')); print(int(b['update_ms']['median'] < a['update_ms']['median']))" 2>/dev/null || echo 0)
echo "unrolled faster: $faster"
stages=" ${STAGES:-port arm wgrad} "
if [[ $stages == *" port "* ]]; then
    arm_s=$([[ $stages == *" arm "* ]] && echo 170 || echo 0)
    port_s=$(( $(left) - arm_s - 15 )); (( port_s > 250 )) && port_s=250
    PORT_DIR=.port PORT_BATCHES=16 PERF_ONLY="port-b16-r1 torch-compiled-float32-b16 port-b16-r2" PERF_BUDGET_S=$port_s \
        bash scripts/device/port_h200.sh $OUT/port16 | tail -8
fi
arm_s=$(( $(left) - 10 )); (( arm_s > 170 )) && arm_s=170
[[ $stages == *" arm "* ]] && STUDY_WORK=/tmp/arm STUDY_UNROLL=$faster STUDY_WORKERS=16 STUDY_MPS=1 STUDY_ALONE_LIMIT_S=0 \
    STUDY_LIMIT_S=$arm_s bash scripts/device/study_arm_h200.sh $OUT/arm
w=$(left)
[[ $stages == *" wgrad "* ]] && (( w > 20 )) && timeout $w python3 scripts/wgrad_batching_probe.py --batch-size 16 --json $p/wgrad-b16.json > $p/wgrad-b16.txt 2>&1; tail -2 $p/wgrad-b16.txt
tar czf $OUT/probes.tgz -C /tmp probes
