#!/bin/bash
# Issue 25 on the GPU machine: training throughput of Lotter's KITTI configuration (prednet-bench defaults:
# (3,48,96,192), 128x160, nt 10, Adam, time loop unrolled) at batch 4 and 16 on
#   JAX float32 (TF32 convolutions, JAX's default), JAX mixed_bfloat16,
#   torch eager, torch compiled (torch.compile) float32 and mixed_bfloat16,
# and a short training-quality check: prednet-train on the embedded video, 3 epochs of 125 steps, JAX,
# float32 and mixed_bfloat16 from the same seed, final validation loss.
#
#   bash scripts/device/perf_h200.sh OUT
#
# Run from the repository root after the set-up of ../shared/gpu/README.md (the wheels installed, PYTHONPATH
# holding them and the repository). Every configuration is its own process under `timeout`: one that fails or
# runs out of time is recorded and the next one starts. They start in the order below until PERF_BUDGET_S
# seconds (default 400) have passed; each gets at most what is left of it, so the script ends within about that
# long. torch.compile spends minutes compiling PredNet (TorchDynamo traces Keras' Python around every op: about
# 100 s on one CPU core for this model, before Inductor generates code), so the quality check, a comparison of
# losses rather than of speed, runs on the GPU while the first torch.compile configuration compiles on the CPU;
# summary.txt says whether it was still running when that configuration's timed steps began. The budget leaves
# little for the other compiled configurations (they come last); `PERF_ONLY="torch-compiled-bf16-b16
# torch-compiled-float32-b4 torch-compiled-bf16-b4" bash scripts/device/perf_h200.sh OUT2` measures them.
# Writes into OUT: summary.txt (also printed at the end), status.tsv, and perf_h200.tgz holding NAME.json
# (prednet-bench's JSON) per configuration, quality-PRECISION/ (manifest.json and history.csv of each quality
# run), logs/ and both text files (three files: the GPU machine sends back at most eight). PERF_WORK (default
# /tmp/perf-h200) is where they are made.
# PERF_ONLY="name name ...": run only these configurations (names as in status.tsv). The CUDA-graph ones
# (torch-compiled-cudagraphs-b16, -b4) run only when named there.
# PERF_DEVICE (default gpu), PERF_BENCH_EXTRA, PERF_TRAIN_EXTRA (options appended to every prednet-bench /
# prednet-train command): for a smoke test elsewhere, e.g. PERF_DEVICE=cpu PERF_BENCH_EXTRA="--stack-sizes 3,4,8
# --size 16x16 --nt 3 --steps 2 --warmup 1".
script=perf_h200
default_budget=400
source "$(dirname "$0")/budget_lib.sh"



# First what takes longest and is least certain: the first torch.compile configuration, compiling on the CPU
# while the quality check uses the GPU. Then the configurations that take half a minute each.
bench torch-compiled-float32-b16 300 90 --backend torch --jit-compile --batch-size 16 &
run quality 180 60 bash -c quality &
wait
for b in 4 16; do bench "jax-float32-b$b" 120 30 --backend jax --batch-size "$b"; done
for b in 4 16; do bench "jax-bf16-b$b" 120 30 --backend jax --precision mixed_bfloat16 --batch-size "$b"; done
for b in 4 16; do bench "torch-eager-b$b" 120 30 --backend torch --batch-size "$b"; done
bench torch-compiled-bf16-b16 300 90 --backend torch --jit-compile --precision mixed_bfloat16 --batch-size 16
bench torch-compiled-float32-b4 300 90 --backend torch --jit-compile --batch-size 4
bench torch-compiled-bf16-b4 300 90 --backend torch --jit-compile --precision mixed_bfloat16 --batch-size 4
# CUDA graphs for the compiled step, only when named in PERF_ONLY: PyTorch's switch for Inductor's cudagraphs
# (what torch.compile's mode "reduce-overhead" sets), which Keras' jit_compile=True does not expose. The run's
# record lists the variable (prednet_keras.runtime.RECORDED_ENVIRONMENT).
for b in 16 4; do
    [[ " ${PERF_ONLY:-} " == *" torch-compiled-cudagraphs-b$b "* ]] || continue
    TORCHINDUCTOR_CUDAGRAPHS=1 bench "torch-compiled-cudagraphs-b$b" 300 90 --backend torch --jit-compile --batch-size "$b"
done

python3 - "$out" <<'EOF' | tee "$out/summary.txt"
import csv, json, os, sys

out = sys.argv[1]
status = {row["name"]: row for row in csv.DictReader(open(os.path.join(out, "status.tsv")), delimiter="\t")}
print(f"\n{'configuration':<27}{'frames/s':>9}{'step ms med/p90':>17}{'GPU peak':>10}{'1st step':>10}"
      f"{'graphs w/t':>11}  status")
for name, row in status.items():
    path = os.path.join(out, f"{name}.json")
    if name == "quality" or not os.path.exists(path):
        if name != "quality":
            print(f"{name:<27}{'-':>9}{'-':>17}{'-':>10}{'-':>10}{'-':>11}  {row['status']}")
        continue
    (result,) = json.load(open(path))["results"]
    train = result["train"]
    peak = train["memory"].get("device_peak_bytes")
    graphs = train.get("torch_compiled_graphs") or {}
    compiled = result["runtime"].get("jit_compile_used") is True and result["runtime"]["requested"]["backend"] == "torch"
    graph_text = f"{graphs.get('after_warmup')}/{graphs.get('after_timed_steps')}" if compiled else "-"
    print(f"{name:<27}{train['fps']:>9.0f}{train['step_ms']['median_ms']:>9.1f}/{train['step_ms']['p90_ms']:<7.1f}"
          f"{(f'{peak / 2**30:.1f} GiB' if peak else '-'):>10}{train['warmup_seconds'][0]:>9.1f}s{graph_text:>11}"
          f"  {row['status']} (model built in {train.get('dtype_policy', '?')})")
configs = [json.load(open(os.path.join(out, f"{n}.json")))["results"][0]["config"] for n in status
           if os.path.exists(os.path.join(out, f"{n}.json"))]
if configs:
    c = configs[0]
    print(f"{c['model']} {','.join(map(str, c['stack_sizes']))}, {c['size'][0]}x{c['size'][1]}, nt {c['nt']}: "
          f"frames/s over {c['steps']} timed steps after {c['warmup']} warm-up steps; '1st step' includes "
          "compilation; graphs w/t: graphs torch.compile had made after the warm-up / after the timed steps "
          "(equal: no recompilation while timing).")
quality = status.get("quality")
first = status.get("torch-compiled-float32-b16")
path = os.path.join(out, "torch-compiled-float32-b16.json")
if quality and first and quality["started_at"] != "-" and os.path.exists(path):
    quality_end = int(quality["started_at"]) + int(quality["seconds"])
    (result,) = json.load(open(path))["results"]
    timed_start = int(first["started_at"]) + int(first["seconds"]) - sum(result["train"]["step_seconds"]) - 1
    print(f"torch-compiled-float32-b16 timed its steps from about {timed_start:.0f}s; the quality check ended at "
          f"{quality_end}s: " + ("no overlap." if quality_end <= timed_start else "OVERLAP, that figure is disturbed."))
EOF
python3 "$(dirname "$0")/quality_summary.py" "$out" | tee -a "$out/summary.txt"
echo "total $(( $(date +%s) - started ))s; results in $dest (summary.txt, status.tsv, perf_h200.tgz)"
