#!/bin/bash
# Packs study folders for the trip back from the GPU machine: everything but the
# model files (.keras, .h5, checkpoints) and per-run loss.png, which the report does not read (the
# manifests hold the weights checksums) and which would exceed what comes back.
#   bash scripts/device/pack_results.sh OUT.tgz FOLDER...
set -e
out=$1; shift
tar czf "$out" --exclude='*.keras' --exclude='*.h5' --exclude='checkpoints' --exclude='loss.png' --exclude='.lock' --exclude='.partial-*' "$@"
ls -l "$out"
