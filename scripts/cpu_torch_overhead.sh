#!/usr/bin/env bash
# Two versions of the code side by side on the PyTorch backend, eager, on this CPU, with a model so small
# that the per-step host work (Keras' and ours) is most of the step: the same prednet-bench command with
# PYTHONPATH=BEFORE and PYTHONPATH=AFTER, alternating, ROUNDS rounds (the order reversed every other round),
# so that slow drift of a shared machine falls on both alike. Only ratios within one run mean anything.
#
#   bash scripts/cpu_torch_overhead.sh OUT_DIR BEFORE_CHECKOUT AFTER_CHECKOUT
#
# BACKEND (default torch) names another Keras backend (BACKEND=jax: the async-safe callbacks' comparison).
# CONFIGS (space-separated, each STACK_SIZES:HxW:NT:BATCH) default to a tiny model and Lotter's KITTI layers
# on 16x16 frames. Writes OUT_DIR/<config>-<before|after>-r<round>.json (one prednet-bench --json each),
# OUT_DIR/log.txt, then OUT_DIR/torch-overhead.json (every result, with its "code" and "round") and prints
# the median frames/s of each side and their ratio per configuration.
set -u
out=${1:?usage: cpu_torch_overhead.sh OUT_DIR BEFORE_CHECKOUT AFTER_CHECKOUT}
before=${2:?usage: cpu_torch_overhead.sh OUT_DIR BEFORE_CHECKOUT AFTER_CHECKOUT}
after=${3:?usage: cpu_torch_overhead.sh OUT_DIR BEFORE_CHECKOUT AFTER_CHECKOUT}
threads=${THREADS:-1}
backend=${BACKEND:-torch}
rounds=${ROUNDS:-3}
steps=${STEPS:-100}
warmup=${WARMUP:-5}
python=${PYTHON:-python}
mkdir -p "$out"
for config in ${CONFIGS:-3,4,8:16x16:4:2 3,48,96,192:16x16:10:4}; do
  IFS=: read -r stack size nt batch <<< "$config"
  name="s${stack//,/-}-${size}-nt${nt}-b${batch}"
  for ((round=1; round<=rounds; round++)); do
    sides=(before after); [ $((round % 2)) = 0 ] && sides=(after before)
    for side in "${sides[@]}"; do
      code=$before; [ "$side" = after ] && code=$after
      json="$out/$name-$side-r$round.json"
      echo "$(date -u +%H:%M:%S) $name round $round: $side ($code)" | tee -a "$out/log.txt"
      PYTHONPATH="$code" "$python" -m prednet_keras.cli.bench --backend "$backend" --device cpu --threads "$threads" \
        --mode train --stack-sizes "$stack" --size "$size" --nt "$nt" --batch-size "$batch" --steps "$steps" \
        --warmup "$warmup" -q --json "$json" --overwrite >> "$out/log.txt" 2>&1 \
        || echo "  exit $? (left out)" | tee -a "$out/log.txt"
    done
  done
done
"$python" - "$out" "$before" "$after" <<'PY'
import glob, json, os, statistics, sys
out, before, after = sys.argv[1:4]
results, table = [], {}
for path in sorted(glob.glob(os.path.join(out, "*-r[0-9]*.json"))):
    stem = os.path.basename(path)[:-5]
    name, side, round_ = stem.rsplit("-", 2)
    with open(path) as handle:
        document = json.load(handle)
    for result in document["results"]:
        result.update(code=side, checkout={"before": before, "after": after}[side], round=int(round_[1:]),
                      bench_command=document.get("command"))
        results.append(result)
        table.setdefault(name, {}).setdefault(side, []).append(result["train"]["fps"])
with open(os.path.join(out, "torch-overhead.json"), "w") as handle:
    json.dump({"format": "prednet-bench results, two checkouts side by side",
               "command": ["bash", "scripts/cpu_torch_overhead.sh"] + sys.argv[1:],
               "results": results}, handle, indent=1)
for name, sides in table.items():
    b, a = sides.get("before", []), sides.get("after", [])
    line = f"{name}: before {statistics.median(b):.1f} frames/s {sorted(round(v, 1) for v in b)}" if b else name
    if a:
        line += f"; after {statistics.median(a):.1f} {sorted(round(v, 1) for v in a)}"
    if a and b:
        line += f"; after/before {statistics.median(a) / statistics.median(b):.3f}"
    print(line)
PY
