#!/bin/bash
# The records of this folder: scripts/torch_compile_times.py with the code before (BEFORE, a checkout of 6b73e13:
# Keras' one compiled step) and after (AFTER, 76810bb: the step in two compiled parts), two processes in a row per
# side, each side with a fresh Inductor cache of its own.
#   bash run.sh BEFORE AFTER OUT
before=${1:?usage: run.sh BEFORE AFTER OUT}; after=${2:?}; out=${3:?}
# (Since moved: python -m prednet_keras.bench.probes.torch_compile_times, the same program.)
script=$(cd "$(dirname "$0")/../../../scripts" && pwd)/torch_compile_times.py
mkdir -p "$out"
for side in before after; do
  src=$before; [ $side = after ] && src=$after
  rm -rf "$out/cache-$side"
  for r in first later; do
    (cd /tmp && TORCHINDUCTOR_CACHE_DIR="$out/cache-$side" KERAS_BACKEND=torch PYTHONPATH=$src \
        python "$script" --json "$out/$side-$r.json" > "$out/$side-$r.log" 2>&1)
  done
done
