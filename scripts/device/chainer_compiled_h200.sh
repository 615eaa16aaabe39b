#!/bin/bash
# Issue 40 on the GPU machine: the study's Chainer PredNet window (the paper's size: channels 3,48,96,192, 120x160,
# a window of 20 frames, batch 1) trained on torch eagerly and compiled (--jit-compile: the step in two parts,
# the window's carried state assigned after the backward pass), with JAX beside them, each in a fresh process:
#   chainer-torch-eager            torch, eager (the study's torch arms)
#   chainer-torch-compiled         torch.compile, an empty Inductor cache
#   chainer-torch-compiled-r2      the same in a later process, which finds the first one's cache
#   chainer-jax                    JAX (the study's GPU arms)
# With BEFORE_DIR (a folder holding another version's prednet_keras/) and BEFORE_COMMIT (the commit it is), first
#   chainer-torch-eager-before-rN, chainer-torch-eager-rN   that code and this one eager on torch, alternating, N = 1, 2
# prednet-bench's training step for prednet-chainer is the trainer's update (train_on_batch on one window), 60
# timed updates after 3. Run from the repository root after the set-up of ../shared/gpu/README.md:
#
#   bash scripts/device/chainer_compiled_h200.sh OUT
#
# PERF_BUDGET_S (default 420), PERF_ONLY, PERF_DEVICE and PERF_BENCH_EXTRA as in budget_lib.sh. Writes into OUT:
# summary.txt, status.tsv, chainer_compiled_h200.tgz (every JSON and log).
script=chainer_compiled_h200
default_budget=420
source "$(dirname "$0")/budget_lib.sh"

tree_of_working_copy > "$out/logs/tree.txt" 2>&1
chainer() { local name=$1 cap=$2 least=$3; shift 3; bench "$name" "$cap" "$least" --model prednet-chainer --steps 60 "$@"; }
before=${BEFORE_DIR:+$(cd "$BEFORE_DIR" && pwd)}
chainer_before() {  # chainer NAME ... with the code in BEFORE_DIR: `python -m` puts the working directory first on sys.path
    (cd "$before" && PREDNET_SOURCE_COMMIT=${BEFORE_COMMIT:?BEFORE_COMMIT: the commit BEFORE_DIR holds} chainer "$@")
}
if [ -n "$before" ]; then
    (cd "$before" && python3 -c 'import prednet_keras; print(prednet_keras.__file__)') > "$out/logs/before-package.txt"
    # Before and after alternating, twice, so that drift of the machine falls on both.
    for r in 1 2; do
        chainer_before "chainer-torch-eager-before-r$r" 120 30 --backend torch
        chainer "chainer-torch-eager-r$r" 120 30 --backend torch
    done
fi
chainer chainer-torch-eager 120 30 --backend torch
chainer chainer-torch-compiled 300 90 --backend torch --jit-compile
chainer chainer-torch-compiled-r2 200 60 --backend torch --jit-compile
chainer chainer-jax 120 30 --backend jax

python3 - "$out" <<'EOF' | tee "$out/summary.txt"
import csv, json, os, sys

out = sys.argv[1]
print(f"{'configuration':<28}{'updates/s':>10}{'frames/s':>10}{'update ms':>11}{'1st update':>12}  status")
for row in csv.DictReader(open(os.path.join(out, "status.tsv")), delimiter="\t"):
    path = os.path.join(out, f"{row['name']}.json")
    if not os.path.exists(path):
        print(f"{row['name']:<28}{'-':>10}{'-':>10}{'-':>11}{'-':>12}  {row['status']}")
        continue
    (result,) = json.load(open(path))["results"]
    train = result["train"]
    median_ms = train["step_ms"]["median_ms"]
    graphs = train.get("torch_compiled_graphs") or {}
    note = f" (graphs {graphs.get('after_warmup')}/{graphs.get('after_timed_steps')})" if graphs else ""
    print(f"{row['name']:<28}{1000 / median_ms:>10.1f}{train['fps']:>10.0f}{median_ms:>11.1f}"
          f"{train['warmup_seconds'][0]:>11.1f}s  {row['status']}{note}")
print("updates/s from the median update; frames/s: the window's frames per update over the timed updates' sum.")
EOF
echo "total $(( $(date +%s) - started ))s; results in $dest (summary.txt, status.tsv, $script.tgz)"
