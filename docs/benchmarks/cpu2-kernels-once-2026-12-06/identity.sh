#!/bin/bash
# Bit identity, code before (88f3220, a worktree at /tmp/before) and after (this checkout): identity.txt. Ran as a
# script of its own, whose body is now scripts/train_identity.sh (which names the checkouts by path in its first line).
PYTHON=/work/main/.venv/bin/python bash scripts/train_identity.sh /tmp/before /work/main /tmp/ident2 \
    "tensorflow float32" "jax float32" "torch float32" "tensorflow mixed_bfloat16" "jax mixed_bfloat16" \
    "torch mixed_bfloat16" "tensorflow float32 --no-unroll" "jax float32 --no-unroll" "torch float32 --no-unroll"
