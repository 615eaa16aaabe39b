#!/bin/bash
# Issue 8 on the GPU machine: the ready `paper` spec (its JAX GPU arms, the first SEEDS seeds) run twice,
# through a private Ray on that machine (GPU runs sharing the one GPU: --gpu-share SHARE) and through the
# local process pool (-j 1/SHARE), each into its own folder. Writes OUT/wall.txt (wall time of each) and
# OUT/compare.txt (every run's metric and final-weights checksum under both executors).
#   bash scripts/device/ray_vs_local.sh OUT [SEEDS] [SHARE] [LIMIT_S]
# Needs Ray importable (PYTHONPATH) and KERAS_BACKEND=jax in the environment.
set -u
out=$1; seeds=${2:-4}; share=${3:-0.25}; limit=${4:-280}
workers=$(python3 -c "print(round(1 / $share))")
mkdir -p "$out"
spec=/tmp/paper-$seeds-seeds.toml
sed "s/^seeds = 30$/seeds = $seeds/" prednet_keras/study/specs/paper.toml > "$spec"
grep -q "^seeds = $seeds$" "$spec" || { echo "could not set seeds in $spec" >&2; exit 1; }
# A private Ray (no --address) finds the GPU through NVML; where it does not, a head node declaring it.
gpus=$(python3 -c "import ray; ray.init(address='local', include_dashboard=False, logging_level='ERROR'); print(ray.cluster_resources().get('GPU', 0)); ray.shutdown()" 2>/dev/null | tail -1)
echo "private Ray sees GPUs: $gpus" | tee -a "$out/wall.txt"
if [ "${gpus%.*}" != 1 ]; then
    python3 -m ray.scripts.scripts start --head --num-gpus 1 --include-dashboard false --disable-usage-stats > "$out/ray-start.log" 2>&1
    export RAY_ADDRESS=auto
    echo "started a head node declaring 1 GPU (RAY_ADDRESS=auto)" | tee -a "$out/wall.txt"
fi
for executor in ray local; do
    if [ "$executor" = ray ]; then
        how=(--executor ray --gpu-share "$share")
    else
        how=(--executor local -j "$workers")
    fi
    start=$(date +%s.%N)
    timeout "$limit" python3 -m prednet_keras.cli.study run "$spec" -o "$out/$executor" --only 'gpu-jax*' "${how[@]}" -q \
        > "$out/$executor.log" 2>&1
    code=$?
    end=$(date +%s.%N)
    python3 -c "print('$executor: exit $code, wall %.1f s, ${how[*]}' % ($end - $start))" | tee -a "$out/wall.txt"
done
python3 - "$out" > "$out/compare.txt" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
def runs(folder):
    found = {}
    for manifest in sorted((out / folder / "runs").glob("*/*/manifest.json")):
        m = json.loads(manifest.read_text())
        found[f"{manifest.parent.parent.name}/{manifest.parent.name}"] = (
            m["metric"]["value"], m["result"]["weights_checksum"], m.get("study", {}).get("executor", {}).get("node_ip"))
    return found
ray, local = runs("ray"), runs("local")
print(f"runs: ray {len(ray)}, local {len(local)}")
same = 0
for name in sorted(set(ray) | set(local)):
    a, b = ray.get(name), local.get(name)
    identical = a is not None and b is not None and a[1] == b[1]
    same += identical
    print(f"{name}: ray {a[0] if a else '-'} local {b[0] if b else '-'} weights {'identical' if identical else 'differ'}")
print(f"identical final weights: {same} of {len(set(ray) | set(local))}")
EOF
cat "$out/compare.txt"
