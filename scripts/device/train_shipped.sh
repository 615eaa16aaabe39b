#!/bin/bash
# Issue 4 on the GPU machine: the shipped model's training (weights/README.md). Makes the combined dataset
# from the embedded clips (the dataset is larger than what travels with a command, so it is made there),
# then trains each named variant in its own process at once on the one GPU, and scores each on the embedded
# held-out clip. Run folders come back in one archive (without model files, weight files and checkpoints);
# each model.keras comes back split in 15 MB pieces (the device returns files of at most 16 MiB).
#   bash scripts/device/train_shipped.sh OUT EPOCHS NAME:STACK_SIZES[:OPTIONS]...
# OPTIONS: further prednet-train options, words joined by '+' (e.g. --augment+flip+--augment+reverse).
# TRAIN_LIMIT_S (environment) stops training after that many seconds; the best model so far is still scored.
# Needs KERAS_BACKEND=jax and the project importable (PYTHONPATH).
set -u
out=$1; epochs=$2; shift 2
data=/tmp/combined.h5
logs=/tmp/shipped/logs
mkdir -p "$out" "$logs"
[ -f "$data" ] || python3 -m prednet_keras.cli.data prepare data/clips/vtest.avi data/clips/box.mp4 data/clips/cup.mp4 \
    data/video_train.h5 --size 128x160 --scene-cuts on -o "$data" > "$logs/prepare.log" 2>&1 || { cat "$logs/prepare.log"; exit 1; }
for variant in "$@"; do
    name=${variant%%:*}; rest=${variant#*:}; stacks=${rest%%:*}; options=""
    [ "$rest" != "$stacks" ] && options=${rest#*:} && options=${options//+/ }
    (timeout "${TRAIN_LIMIT_S:-86400}" python3 -m prednet_keras.cli.train --backend jax --device gpu --data "$data" --val-data data/video_val.h5 \
        --stack-sizes "$stacks" --batch-size 16 --steps-per-epoch 32 --epochs "$epochs" $options --quiet -o "/tmp/shipped/$name" \
        > "$logs/$name-train.log" 2>&1; python3 -m prednet_keras.cli.eval "/tmp/shipped/$name" --backend jax --device gpu > "$logs/$name-eval.log" 2>&1) &
done
wait
for variant in "$@"; do
    name=${variant%%:*}
    echo "== $name"; tail -3 "$logs/$name-train.log"; cat "/tmp/shipped/$name/eval/prediction_scores.txt" 2>/dev/null
    [ -f "/tmp/shipped/$name/model.keras" ] && split -b 15000000 -d "/tmp/shipped/$name/model.keras" "$out/$name.keras.part"
done
tar czf "$out/runs.tgz" --exclude='*.keras' --exclude='*.h5' --exclude=checkpoints -C /tmp/shipped .
ls -l "$out"
