#!/usr/bin/env bash
# Every backend and precision side by side on this CPU: Lotter's KITTI configuration (3,48,96,192, 128x160,
# nt 10), training, batch 4, synthetic input, each configuration in its own prednet-bench process.
# Two rounds, the second in reverse order, so slow drift of a shared machine falls on every configuration
# alike; figures from a 2-core VM are comparable only as ratios within one run.
#
#   bash scripts/cpu_backends.sh OUT_DIR [THREADS]
#
# Writes OUT_DIR/<backend>-<precision>-r<round>.json (one prednet-bench --json each), OUT_DIR/log.txt,
# then OUT_DIR/cpu-backends.json (all results in one prednet-bench document) and cpu-backends.png
# (one bar per run, sorted by backend, precision and round).
# A configuration that fails or passes PER_CONFIG_S seconds is logged and left out; the rest go on.
set -u
out=${1:?usage: cpu_backends.sh OUT_DIR [THREADS]}
threads=${2:-2}
per_config=${PER_CONFIG_S:-900}
steps=${STEPS:-3}
warmup=${WARMUP:-1}
python=${PYTHON:-python}
mkdir -p "$out"
configs=()
for backend in ${BACKENDS:-tensorflow jax torch}; do
  for precision in ${PRECISIONS:-float32 mixed_bfloat16}; do configs+=("$backend:$precision"); done
done
order=("${configs[@]}")
for round in 1 2; do
  if [ "$round" = 2 ]; then
    order=(); for ((i=${#configs[@]}-1; i>=0; i--)); do order+=("${configs[$i]}"); done
  fi
  for item in "${order[@]}"; do
    backend=${item%%:*}; precision=${item#*:}
    json="$out/$backend-$precision-r$round.json"
    echo "$(date -u +%H:%M:%S) round $round: $backend $precision" | tee -a "$out/log.txt"
    timeout "$per_config" "$python" -m prednet_keras.cli.bench --backend "$backend" --device cpu \
      --threads "$threads" --batch-size 4 --mode train --steps "$steps" --warmup "$warmup" \
      --precision "$precision" -q --json "$json" --overwrite >> "$out/log.txt" 2>&1 \
      || echo "  exit $? (left out)" | tee -a "$out/log.txt"
  done
done
"$python" - "$out" <<'PY'
import glob, json, os, sys
from prednet_keras.bench import document, format_table, plot_results
out = sys.argv[1]
results = []
for path in sorted(glob.glob(os.path.join(out, "*-r[12].json"))):
    with open(path) as handle:
        for result in json.load(handle)["results"]:
            result["round"] = int(path[-6])
            results.append(result)
with open(os.path.join(out, "cpu-backends.json"), "w") as handle:
    json.dump(document(results, command=["bash", "scripts/cpu_backends.sh"] + sys.argv[1:]), handle, indent=1)
results.sort(key=lambda r: (r["runtime"]["requested"]["backend"], r["runtime"]["requested"]["precision"],
                            r["round"]))
plot_results(results, os.path.join(out, "cpu-backends.png"),
             title="2-core CPU: training, batch 4, 128x160, nt 10; 2 runs each")
print(format_table(results))
PY
