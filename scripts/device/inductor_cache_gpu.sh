#!/usr/bin/env bash
# Issue 40 on the GPU machine: torch.compile's first step in a later process, with the Inductor cache the first
# process left (runtime/compile_cache.py). The KITTI configuration compiled on the GPU (prednet-bench --xla, batch
# 16), three fresh processes in a row under one fresh KERAS_HOME: the first compiles into the empty cache, the
# next two load from it. Each result JSON holds the warm-up steps' seconds (the first is the compiling one) and
# torch_inductor_cache (graphs loaded / compiled, the folder).
#   bash scripts/device/inductor_cache_gpu.sh OUT_DIR          # about 6-8 minutes, most of it the first compile
set -uo pipefail
out=${1:?usage: inductor_cache_gpu.sh OUT_DIR}
mkdir -p "$out"
export KERAS_HOME=$(mktemp -d /tmp/inductor-cache-home.XXXX) PYTHONUNBUFFERED=1
for i in 1 2 3; do
    python3 -m prednet_keras.cli.bench --backend torch --device gpu --xla --mode train --batch-size 16 \
        --steps 20 --warmup 2 --json "$out/process-$i.json" > "$out/process-$i.log" 2>&1
    python3 - "$out/process-$i.json" "$i" <<'PY' | tee -a "$out/summary.txt"
import json, sys
train = json.load(open(sys.argv[1]))["results"][0]["train"]
print(f"process {sys.argv[2]}: first step {train['warmup_seconds'][0]:.1f} s, {train['fps']:.0f} frames/s, "
      f"cache {train.get('torch_inductor_cache')}")
PY
done
