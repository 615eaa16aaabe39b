#!/bin/bash
# Issue 37 on the GPU machine: one portion of the pre-registered device study (docs/study/device/), or of its
# secondary part at full size (STUDY=docs/study/device-full).
#
#   PREDNET_SOURCE_COMMIT=$(git rev-parse HEAD) PREDNET_SOURCE_DIRTY=0 STUDY_SEEDS=100-103 \
#       TOTAL_S=560 [STUDY=docs/study/device-full] bash scripts/device/device_study.sh OUT
#
# Run from the repository root after the set-up of ../shared/gpu/README.md (the wheels installed, PYTHONPATH
# holding them and the repository), carrying data/study/ (the study's frames: data/study/clips-32x40.h5 for
# the device study, data/study/box-cup-120x160.h5 for the full size; the studies' READMEs say how they are
# made; their frames' checksums are checked before anything runs).
# A portion is a block of seeds (STUDY_SEEDS, e.g. 100-103) with every arm, so that each seed's pairs of runs
# (prediction disagreement, weight distance, first differing update: `prednet-study pairs`) are computed here
# while the runs' large files exist. The steps:
#   1. the study's earlier runs unpacked (docs/study/device/runs.tar.xz, when there);
#   2. `prednet-study run docs/study/device/spec.toml -o docs/study/device --seeds STUDY_SEEDS -j 16` under MPS
#      (where it starts), stopped at TOTAL_S minus the time the later steps need;
#   3. `prednet-study pairs`: the pairs of every seed whose runs are all complete;
#   4. the runs of seeds left incomplete are removed (a later portion runs them again whole: their pairs need
#      all their runs on one machine), the large files dropped, the runs packed (`prednet-study pack`);
#   5. OUT/device-study.tar: runs.tar.xz, study.json, seeds/*/seed.json, pairs/, logs/ and summary.txt.
# The confirmatory report is not built here: the plan allows no interim look at effects (preregistration.md).
set -u
source "$(dirname "$0")/require_commit.sh"
dest=${1:-${OUT:-}}
[ -n "$dest" ] || { echo "usage: bash scripts/device/device_study.sh OUT" >&2; exit 2; }
[ -n "${STUDY_SEEDS:-}" ] || { echo "STUDY_SEEDS (e.g. 100-103) is required" >&2; exit 2; }
total=${TOTAL_S:-560}
study=${STUDY:-docs/study/device}
logs=/tmp/device-study-logs
rm -rf "$logs"; mkdir -p "$logs" "$dest"
started=$(date +%s)
export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
study_cli() { python3 -m prednet_keras.cli.study "$@"; }

pack() {
    tar cf "$dest/device-study.tar" -C "$study" --exclude='runs' --exclude='.jax-compilation-cache' \
        --exclude='*.h5' --exclude='.start-gates' --exclude='.lock' --exclude='.lock.owner' --exclude='report' . -C "$logs" . 2>> "$logs/pack.txt"
    cp "$logs/summary.txt" "$dest/" 2>/dev/null
}
trap 'stop_mps; pack' EXIT

nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv > "$logs/nvidia-smi.csv" 2>&1
(nproc; lscpu | grep -i 'model name'; free -g; pwd) > "$logs/host.txt" 2>&1
echo "code: ${PREDNET_SOURCE_COMMIT:-unknown} dirty=${PREDNET_SOURCE_DIRTY:-unknown}" > "$logs/summary.txt"

# Frames carried as NAME.h5.xz (scripts/device/xz_frames.py: the 64 MiB that may travel) are unpacked first.
for packed in data/study/*.h5.xz; do
    [ -f "$packed" ] && [ ! -f "${packed%.xz}" ] && python3 scripts/device/xz_frames.py unpack "$packed" >> "$logs/summary.txt" 2>&1
done
python3 - "$study" <<'PY' >> "$logs/summary.txt" 2>&1 || exit 3
import sys
from pathlib import Path
from prednet_keras import data
from prednet_keras.data import dataset_checksum
# The frames each study planned to read (the embedded video the full size trains on ships in the package).
planned = {
    "device": [("training", "data/study/clips-32x40.h5", (32, 40),
                "sha256:d9f6d5f782e54bfb2d8f6e7d22cd87b007b3354146598ed5b23c319f67606ede")],
    "device-full": [("held-out", "data/study/box-cup-120x160.h5", (120, 160),
                     "sha256:acf55b642bbd33466dd2829baacbf1d598e5f03f0964168a327c33c2680d1996")],
}[Path(sys.argv[1]).name]
ok = True
for role, path, size, expected in planned:
    found = dataset_checksum(data.load_frames(path, size=size))
    print(f"{role} frames {found}: {'as planned' if found == expected else 'NOT the planned frames'}")
    ok = ok and found == expected
raise SystemExit(0 if ok else 1)
PY

mps="off"
stop_mps() { [ "$mps" = on ] && echo quit | nvidia-cuda-mps-control; mps=stopped; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/device-study-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/device-study-mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if command -v nvidia-cuda-mps-control > /dev/null && nvidia-cuda-mps-control -d; then
    mps=on
else
    mps="not available"; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi
echo "MPS: $mps" >> "$logs/summary.txt"

python3 -m compileall -q -j 0 "$PWD/prednet_keras" \
    $(python3 -c "import keras, os; print(os.path.dirname(keras.__file__))" 2>/dev/null) > /dev/null 2>&1
if [ -f "$study/runs.tar.xz" ]; then
    study_cli unpack "$study" > "$logs/unpack.txt" 2>&1 || { echo "unpack failed" >> "$logs/summary.txt"; exit 4; }
fi

# What the steps after training need: pairs, packing and the tar (about a minute for a portion of the scaled
# study; STUDY_AFTER_S sets it, e.g. for the full size's larger files).
left=$(( total - ($(date +%s) - started) - ${STUDY_AFTER_S:-75} ))
echo "training limit: ${left} s" >> "$logs/summary.txt"
timeout -k 10 "$left" python3 -m prednet_keras.cli.study run "$study/spec.toml" -o "$study" --seeds "$STUDY_SEEDS" \
    -j "${STUDY_WORKERS:-16}" --no-report --quiet ${STUDY_RUN_EXTRA:-} > "$logs/run.log" 2>&1
echo "prednet-study run: exit $? after $(( $(date +%s) - started )) s" >> "$logs/summary.txt"
[ "$mps" = on ] && { echo get_server_list | nvidia-cuda-mps-control >> "$logs/mps.txt" 2>&1; stop_mps; }

study_cli pairs "$study/spec.toml" -o "$study" --remove-incomplete -j 8 >> "$logs/summary.txt" 2>&1
echo "prednet-study pairs: exit $?" >> "$logs/summary.txt"
find "$study/runs" \( -name '*.keras' -o -name '*.h5' -o -name '*.npz' -o -name 'loss.png' \) -delete 2>/dev/null
rm -rf "$study/.jax-compilation-cache"
study_cli pack "$study" --remove >> "$logs/summary.txt" 2>&1
echo "prednet-study pack: exit $? at $(( $(date +%s) - started )) s" >> "$logs/summary.txt"
