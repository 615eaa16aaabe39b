#!/usr/bin/env bash
# Our float32 training side by side with the most used PyTorch port on this CPU (issue 25's "float32 at
# least 2x the port, side by side"): Lotter's KITTI configuration (3,48,96,192, 128x160, nt 10), batch 4,
# synthetic input, each configuration in its own process. Two rounds, the second in reverse order, so slow
# drift of a shared machine falls on every configuration alike.
#
#   bash scripts/cpu_port.sh OUT_DIR PORT_DIR [THREADS]
#
# PORT_DIR: a checkout of github.com/leido/pytorch-prednet (not a dependency; see scripts/port_bench.py).
# Writes OUT_DIR/<config>-r<round>.json, OUT_DIR/log.txt, then OUT_DIR/cpu-port.json (every result, the
# port's and prednet-bench's documents as they are) and cpu-port.png; prints the table.
set -u
out=${1:?usage: cpu_port.sh OUT_DIR PORT_DIR [THREADS]}
port=${2:?usage: cpu_port.sh OUT_DIR PORT_DIR [THREADS]}
threads=${3:-2}
per_config=${PER_CONFIG_S:-900}
steps=${STEPS:-3}
warmup=${WARMUP:-1}
python=${PYTHON:-python}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
configs=(port ${CONFIGS:-tensorflow:float32 torch:float32})
order=("${configs[@]}")
for round in 1 2; do
  if [ "$round" = 2 ]; then
    order=(); for ((i=${#configs[@]}-1; i>=0; i--)); do order+=("${configs[$i]}"); done
  fi
  for item in "${order[@]}"; do
    json="$out/${item/:/-}-r$round.json"
    rm -f "$json"
    echo "$(date -u +%H:%M:%S) round $round: $item" | tee -a "$out/log.txt"
    if [ "$item" = port ]; then
      timeout "$per_config" "$python" "$here/port_bench.py" --port-dir "$port" --threads "$threads" \
        --batch-size 4 --steps "$steps" --warmup "$warmup" --json "$json" >> "$out/log.txt" 2>&1
    else
      timeout "$per_config" "$python" -m prednet_keras.cli.bench --backend "${item%%:*}" --device cpu \
        --threads "$threads" --batch-size 4 --mode train --steps "$steps" --warmup "$warmup" \
        --precision "${item#*:}" -q --json "$json" >> "$out/log.txt" 2>&1
    fi || echo "  exit $? (left out)" | tee -a "$out/log.txt"
  done
done
"$python" - "$out" "$@" <<'PY'
import glob, json, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out = sys.argv[1]
rows, documents = [], {}
for path in sorted(glob.glob(os.path.join(out, "*-r[12].json"))):
    name = os.path.basename(path)[:-len("-r1.json")]
    with open(path) as handle:
        document = json.load(handle)
    documents[os.path.basename(path)] = document
    fps = document["fps"] if name == "port" else document["results"][0]["train"]["fps"]
    rows.append((name, int(path[-6]), fps))
with open(os.path.join(out, "cpu-port.json"), "w") as handle:
    json.dump({"command": ["bash", "scripts/cpu_port.sh"] + sys.argv[2:], "runs": documents}, handle, indent=1)
port = [fps for name, _, fps in rows if name == "port"]
print("| configuration | round | frames/s | / port (same round) |")
print("|---|---|---|---|")
for name, round_, fps in rows:
    same = [f for n, r, f in rows if n == "port" and r == round_]
    ratio = f"{fps / same[0]:.2f}x" if same else "-"
    print(f"| {name} | {round_} | {fps:.2f} | {ratio} |")
labels = [f"{name} r{round_}" for name, round_, _ in rows]
figure, axes = plt.subplots(figsize=(7, 3.5))
axes.barh(labels, [fps for *_, fps in rows], color=["tab:gray" if n == "port" else "tab:blue" for n, *_ in rows])
axes.set_xlabel("frames/s (training, batch 4, 128x160, nt 10)")
axes.set_title("2-core CPU: ours (prednet-bench) against the PyTorch port")
figure.tight_layout()
figure.savefig(os.path.join(out, "cpu-port.png"), dpi=110)
PY
