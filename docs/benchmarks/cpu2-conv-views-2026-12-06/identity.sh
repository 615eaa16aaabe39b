#!/bin/bash
# Bit identity, code before (8338451, a worktree at /tmp/before) and after (this checkout): identity.txt.
PYTHON=/work/main/.venv/bin/python bash scripts/train_identity.sh /tmp/before /work/main /tmp/ident3 \
    "torch float32" "torch mixed_bfloat16" "torch float32 --no-unroll"
