#!/bin/bash
# Issue 25 on the GPU machine: is mixed_bfloat16 (PredNet's activations in bfloat16; c, E_0, the error means and
# the loss in float32) faster than float32, and does it train as well? Within about 250 s of machine time:
#   prednet-bench training throughput of Lotter's KITTI configuration ((3,48,96,192), 128x160, nt 10, Adam, time
#   loop unrolled), JAX float32 (TF32 convolutions, JAX's default) and JAX mixed_bfloat16, at batch 4 and 16;
#   then prednet-train on the embedded video, 3 epochs of 125 steps, JAX, both precisions at once from seed 0,
#   final validation loss.
#
#   bash scripts/device/bf16_h200.sh OUT
#
# Run from the repository root after the set-up of ../shared/gpu/README.md (the wheels installed, PYTHONPATH
# holding them and the repository). Every configuration is its own process under `timeout`: one that fails or runs
# out of time is recorded and the next one starts. They start in the order below until PERF_BUDGET_S seconds
# (default 220) have passed; each gets at most what is left of it, so the script ends within about that long. The
# speed figures come first (float32 and bfloat16 alternate, so that both are measured if the budget runs short),
# alone on the GPU; the quality check, a comparison of losses rather than of speed, runs its two trainings at once.
# Writes into OUT: summary.txt (also printed at the end), status.tsv, and bf16_h200.tgz holding NAME.json
# (prednet-bench's JSON) per configuration, quality-PRECISION/ (manifest.json and history.csv), logs/ and both text
# files. PERF_WORK (default /tmp/bf16-h200) is where they are made.
# PERF_ONLY="name name ...": run only these configurations (names as in status.tsv). The profiles
# (jax-float32-b16-profile, jax-bf16-b16-profile) run only when named there.
# PERF_DEVICE (default gpu), PERF_BENCH_EXTRA, PERF_TRAIN_EXTRA (options appended to every prednet-bench /
# prednet-train command): for a smoke test elsewhere, e.g. PERF_DEVICE=cpu PERF_BENCH_EXTRA="--stack-sizes 3,4,8
# --size 16x16 --nt 3 --steps 2 --warmup 1" PERF_TRAIN_EXTRA="--stack-sizes 3,4,8 --steps-per-epoch 2
# --val-sequences 4". PERF_BENCH_CAP_S (default 45) and PERF_QUALITY_CAP_S (default 120) cap one benchmark and the
# quality check (a slow CPU needs more).
script=bf16_h200
default_budget=220
source "$(dirname "$0")/budget_lib.sh"

tree_of_working_copy > "$out/logs/tree.txt" 2>&1


bench_cap=${PERF_BENCH_CAP_S:-45} quality_cap=${PERF_QUALITY_CAP_S:-120}
for b in 4 16; do
    bench "jax-float32-b$b" "$bench_cap" 20 --backend jax --batch-size "$b"
    bench "jax-bf16-b$b" "$bench_cap" 20 --backend jax --precision mixed_bfloat16 --batch-size "$b"
done
run quality "$quality_cap" 45 bash -c quality
# Where a batch-16 step's time goes, float32 against mixed_bfloat16: prednet-bench --profile traces 5 more steps
# after its timed ones; the summary of the busiest timelines goes into the JSON (the raw traces stay in profiles/).
for p in float32 bf16; do
    [[ " ${PERF_ONLY:-} " == *" jax-$p-b16-profile "* ]] || continue
    precision=$([ $p = bf16 ] && echo mixed_bfloat16 || echo float32)
    bench "jax-$p-b16-profile" "$bench_cap" 30 --backend jax --precision "$precision" --batch-size 16 \
        --profile "$out/profiles/jax-$p-b16"
done

python3 - "$out" <<'EOF' | tee "$out/summary.txt"
import csv, json, os, sys

out = sys.argv[1]
status = {row["name"]: row for row in csv.DictReader(open(os.path.join(out, "status.tsv")), delimiter="\t")}
fps = {}
print(f"\n{'configuration':<18}{'frames/s':>9}{'step ms med/p90':>17}{'GPU peak':>10}{'1st step':>10}  status")
for name, row in status.items():
    path = os.path.join(out, f"{name}.json")
    if name == "quality":
        continue
    if not os.path.exists(path):
        print(f"{name:<18}{'-':>9}{'-':>17}{'-':>10}{'-':>10}  {row['status']}")
        continue
    (result,) = json.load(open(path))["results"]
    train = result["train"]
    fps[name] = train["fps"]
    peak = train["memory"].get("device_peak_bytes")
    print(f"{name:<18}{train['fps']:>9.0f}{train['step_ms']['median_ms']:>9.1f}/{train['step_ms']['p90_ms']:<7.1f}"
          f"{(f'{peak / 2**30:.1f} GiB' if peak else '-'):>10}{train['warmup_seconds'][0]:>9.1f}s"
          f"  {row['status']} (model built in {train.get('dtype_policy', '?')})")
configs = [json.load(open(os.path.join(out, f"{n}.json")))["results"][0]["config"] for n in fps]
if configs:
    c = configs[0]
    print(f"{c['model']} {','.join(map(str, c['stack_sizes']))}, {c['size'][0]}x{c['size'][1]}, nt {c['nt']}, JAX: "
          f"frames/s over {c['steps']} timed training steps after {c['warmup']} warm-up steps; '1st step' includes "
          "compilation.")
for b in (4, 16):
    f32, bf16 = fps.get(f"jax-float32-b{b}"), fps.get(f"jax-bf16-b{b}")
    if f32 and bf16:
        print(f"batch {b}: mixed_bfloat16 / float32 = {bf16 / f32:.2f}x")
EOF
python3 "$(dirname "$0")/quality_summary.py" "$out" | tee -a "$out/summary.txt"
echo "total $(( $(date +%s) - started ))s; results in $dest (summary.txt, status.tsv, bf16_h200.tgz)"
