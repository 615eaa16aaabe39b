#!/bin/bash
# Issue 25 on the GPU machine: our training side by side with the most used PyTorch port of PredNet
# (github.com/leido/pytorch-prednet, run by scripts/port_bench.py, none of its code in this repository), in one
# session: Lotter's KITTI configuration (3,48,96,192), 128x160, nt 10, Adam, float32 (TF32 convolutions, both
# frameworks' default), synthetic frames, 20 timed steps after 3 warm-up steps, each configuration its own process.
#
#   PORT_DIR=.port bash scripts/device/port_h200.sh OUT
#
# PORT_DIR: a checkout of the port inside the repository in an ignored folder, carried to the GPU machine with the
# command (`run`'s carry), e.g. `mkdir .port && git --git-dir=PORT.git archive HEAD | tar -x -C .port`.
# For each batch size in PORT_BATCHES (default "16 4"), in this order:
#   port-bB-r1                     the port (port_bench.py --device gpu)
#   torch-eager-before-float32-bB  with BEFORE_DIR set (a folder holding the package of an earlier commit, carried
#                                  with the command; BEFORE_COMMIT names it): the next configuration with that code,
#                                  run from BEFORE_DIR so that its package is the one imported
#   torch-eager-float32-bB         ours, PyTorch backend, eager (Keras' default on torch)
#   torch-eager-autotune-float32-bB  the same with --autotune (torch's cudnn.benchmark: cuDNN's convolution
#                                  algorithms picked by timing them; off by default on torch, on in XLA)
#   jax-float32-bB                 ours, JAX (the GPU default)
#   jax-float32-cm8-bB             the same with PREDNET_CHANNEL_MULTIPLE=8 (layers/channel_alignment.py)
#   jax-bf16-bB, jax-bf16-cm8-bB   JAX mixed_bfloat16, without and with the channel alignment
#   torch-compiled-before-float32-bB, torch-compiled-before-float32-bB-r2
#                                  with BEFORE_DIR set: the next two with that code, in a cache of their own
#   torch-compiled-float32-bB      ours, PyTorch backend, torch.compile (--jit-compile)
#   torch-compiled-float32-bB-r2   the same in a later process, which finds Inductor's cache the first one left
#                                  (runtime/compile_cache.py): its first step is the one issue 40 wants under 30 s
#   torch-compiled-autotune-float32-bB  the same as the -r2 process with --autotune (the cache is Inductor's
#                                  graphs, which cudnn.benchmark does not change)
#   port-bB-r2                     the port again, so drift of the machine shows
#   port-autotune-bB               the port with cudnn.benchmark on (port_bench.py --cudnn-benchmark), the fair
#                                  partner of the -autotune configurations; not in the port's mean ("x port")
#   torch-compiled-cudagraphs-bB   compiled with TORCHINDUCTOR_CUDAGRAPHS=1: Inductor's CUDA graphs, the switch
#                                  torch.compile's mode "reduce-overhead" sets (Keras' jit_compile does not take
#                                  a mode); the JSON's torch_cudagraph_skips counts the graphs Inductor ran without them
#   torch-eager-float32-bB-profile, port-bB-profile
#                                  with PERF_PROFILE=1: ours eager and the port with 5 more steps traced by
#                                  torch.profiler (prednet-bench --profile, port_bench.py --profile) into profiles/;
#                                  the summary gives each one's host thread and GPU stream busy time per step
# until PERF_BUDGET_S (default 560) seconds have passed; PERF_ONLY="name ..." runs only those.
# Run from the repository root after the set-up of ../shared/gpu/README.md. Writes into OUT: summary.txt, status.tsv,
# port_h200.tgz (every JSON and log).
script=port_h200
default_budget=560
source "$(dirname "$0")/budget_lib.sh"
port=${PORT_DIR:?PORT_DIR: a checkout of github.com/leido/pytorch-prednet}

tree_of_working_copy > "$out/logs/tree.txt" 2>&1

port_run() {  # NAME BATCH [OPTION...]
    local name=$1 batch=$2; shift 2
    run "$name" 120 30 python3 "$(dirname "$0")/../port_bench.py" --port-dir "$port" --device "$device" \
        --batch-size "$batch" --steps 20 --warmup 3 --json "$out/$name.json" "${port_extra[@]}" "$@"
}
read -r -a port_extra <<< "${PORT_BENCH_EXTRA:-}"
before=${BEFORE_DIR:+$(cd "$BEFORE_DIR" && pwd)}
bench_before() {  # bench NAME ... with the code in BEFORE_DIR: `python -m` puts the working directory first on sys.path
    (cd "$before" && PREDNET_SOURCE_COMMIT=${BEFORE_COMMIT:?BEFORE_COMMIT: the commit BEFORE_DIR holds} bench "$@")
}
port=$(cd "$port" && pwd)
for b in ${PORT_BATCHES:-16 4}; do
    port_run "port-b$b-r1" "$b"
    if [ -n "$before" ]; then
        (cd "$before" && python3 -c 'import prednet_keras; print(prednet_keras.__file__)') > "$out/logs/before-package.txt"
        bench_before "torch-eager-before-float32-b$b" 120 30 --backend torch --batch-size "$b"
    fi
    bench "torch-eager-float32-b$b" 120 30 --backend torch --batch-size "$b"
    bench "torch-eager-autotune-float32-b$b" 120 30 --backend torch --autotune --batch-size "$b"
    bench "jax-float32-b$b" 120 30 --backend jax --batch-size "$b"
    PREDNET_CHANNEL_MULTIPLE=8 bench "jax-float32-cm8-b$b" 120 30 --backend jax --batch-size "$b"
    bench "jax-bf16-b$b" 120 30 --backend jax --precision mixed_bfloat16 --batch-size "$b"
    PREDNET_CHANNEL_MULTIPLE=8 bench "jax-bf16-cm8-b$b" 120 30 --backend jax --precision mixed_bfloat16 --batch-size "$b"
    if [ -n "$before" ]; then
        # Its own Inductor cache (KERAS_HOME), so that the code after finds none of the graphs it compiled.
        for r in "" -r2; do
            KERAS_HOME="$out-keras-home-before" \
                bench_before "torch-compiled-before-float32-b$b$r" 300 60 --backend torch --jit-compile --batch-size "$b"
        done
    fi
    bench "torch-compiled-float32-b$b" 300 90 --backend torch --jit-compile --batch-size "$b"
    bench "torch-compiled-float32-b$b-r2" 200 60 --backend torch --jit-compile --batch-size "$b"
    bench "torch-compiled-autotune-float32-b$b" 200 60 --backend torch --jit-compile --autotune --batch-size "$b"
    port_run "port-b$b-r2" "$b"
    port_run "port-autotune-b$b" "$b" --cudnn-benchmark
    TORCHINDUCTOR_CUDAGRAPHS=1 bench "torch-compiled-cudagraphs-b$b" 300 90 --backend torch --jit-compile --batch-size "$b"
    if [ -n "${PERF_PROFILE:-}" ]; then
        bench "torch-eager-float32-b$b-profile" 150 40 --backend torch --batch-size "$b" --profile "$out/profiles"
        port_run "port-b$b-profile" "$b" --profile "$out/profiles/port-b$b"
    fi
done

python3 - "$out" <<'EOF' | tee "$out/summary.txt"
import csv, json, os, re, statistics, sys

out = sys.argv[1]
status = list(csv.DictReader(open(os.path.join(out, "status.tsv")), delimiter="\t"))
rows, port_fps = [], {}
for row in status:
    name = row["name"]
    path = os.path.join(out, f"{name}.json")
    if not os.path.exists(path):
        rows.append((name, None, None, None, None, row["status"]))
        continue
    document = json.load(open(path))
    batch = int(re.search(r"-b(\d+)", name).group(1))
    if name.startswith("port"):
        fps, median, first = document["fps"], document["step_ms_median"], document["warmup_seconds"][0]
        if re.fullmatch(r"port-b\d+-r\d+", name):  # the port as kitti_train.py runs it
            port_fps.setdefault(batch, []).append(fps)
        note = ""
        profile = document.get("profile")
    else:
        (result,) = document["results"]
        train = result["train"]
        fps, median, first = train["fps"], train["step_ms"]["median_ms"], train["warmup_seconds"][0]
        graphs = train.get("torch_compiled_graphs") or {}
        note = f"graphs {graphs.get('after_warmup')}/{graphs.get('after_timed_steps')}" if graphs else ""
        if "torch_cudagraph_skips" in train:
            note += f"; graphs Inductor ran without CUDA graphs: {train['torch_cudagraph_skips']}"
        if train.get("torch_inductor_cache"):
            note += f"{'; ' if note else ''}inductor cache {train['torch_inductor_cache']}"
        profile = train.get("profile")
    if profile and profile.get("summary"):
        # Busy time per profiled step of the four busiest timelines (host threads, GPU streams).
        busy = [f"{line['process']}/{line['thread']} {line['busy_ms'] / profile['steps']:.1f} ms"
                for line in profile["summary"]["timelines"][:4]]
        note += f"{'; ' if note else ''}busy per step: {', '.join(busy)}"
    rows.append((name, batch, fps, median, first, (row["status"] + (f" ({note})" if note else ""))))
print(f"{'configuration':<38}{'frames/s':>9}{'x port':>8}{'step ms':>9}{'1st step':>10}  status")
for name, batch, fps, median, first, text in rows:
    if fps is None:
        print(f"{name:<38}{'-':>9}{'-':>8}{'-':>9}{'-':>10}  {text}")
        continue
    # No port at this batch size in this call (PERF_ONLY left it out): no ratio.
    ratio = f"{fps / statistics.mean(port_fps[batch]):.2f}x" if port_fps.get(batch) else "-"
    print(f"{name:<38}{fps:>9.0f}{ratio:>8}{median:>9.1f}{first:>9.1f}s  {text}")
print("x port: against the mean of the port's rounds at that batch size; '1st step' includes compilation.")
EOF
echo "total $(( $(date +%s) - started ))s; results in $dest (summary.txt, status.tsv, $script.tgz)"
