#!/bin/bash
# Steady-state compiled steps on this CPU, before and after, alternated; each side its own Inductor cache.
cd /tmp
for round in 1 2; do
  for side in before after; do
    src=/tmp/before; [ $side = after ] && src=/work/main
    TORCHINDUCTOR_CACHE_DIR=$OUT/cache-$side KERAS_BACKEND= PYTHONPATH=$src python -m prednet_keras.cli.bench \
      --backend torch --jit-compile --mode train --size 32x32 --stack-sizes 3,8,16 --nt 6 --batch-size 4 --steps 40 --warmup 3 \
      --threads 1 --json $OUT/$side-r$round.json > $OUT/$side-r$round.log 2>&1
  done
done
