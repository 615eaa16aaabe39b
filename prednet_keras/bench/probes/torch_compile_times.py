"""Where a compiled torch training step's first call spends its time: torch.compile's own phase timings.

Builds Lotter's PredNet as prednet-train and prednet-bench build it (`session.recipe_training.build_model`
with `jit_compile=True`: 3 layers 3,4,8 at 16x16, nt 4, batch 2 by default), runs its first two training steps
through `model.fit` as they do, one step per `fit`, with the frames already torch tensors as fit's data
adapter hands them over, and times each; then writes what `torch._dynamo.utils.compile_times` shows, summed per
phase (TorchDynamo's tracing of Python, AOT autograd, Inductor's code generation and loading), the seconds of
TorchDynamo's five largest frames, and the graph breaks TorchDynamo counted. Run it twice with one
TORCHINDUCTOR_CACHE_DIR: the second run shows what a later process still spends when every graph comes from
Inductor's cache (docs/benchmarks.md).

    TORCHINDUCTOR_CACHE_DIR=DIR KERAS_BACKEND=torch python -m prednet_keras.bench.probes.torch_compile_times \
        --json first.json          # then the same with --json later.json

--no-inductor compiles with torch.compile's "aot_eager" backend instead: TorchDynamo and AOT autograd as
always, no code generated, so the tracing phases show in well under a minute (the test's setting).

Until this move it was scripts/torch_compile_times.py (last changed in 76810bb), the name docs/benchmarks.md's
records give. Before 76810bb it called `train_on_batch` with NumPy arrays on a model without `settle_gradients`:
NumPy inputs break TorchDynamo's graph at Keras' input conversion and the second call compiled again, so its
figures were of a path prednet-train does not take.
"""

import argparse
import json
import os
import sys
import time


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m prednet_keras.bench.probes.torch_compile_times",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="where the timings go (must not exist)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-inductor", action="store_true", help='torch.compile\'s "aot_eager" backend: tracing only')
    args = parser.parse_args(argv)
    if os.path.exists(args.json):
        parser.error(f"{args.json}: already exists; not overwritten")
    import keras

    from prednet_keras import backends

    if backends.find(keras.backend.backend()) is not backends.TORCH:
        parser.error("set KERAS_BACKEND=torch")
    import numpy as np
    import torch

    from prednet_keras.options.recipe import TrainConfig
    from prednet_keras.session import recipe_training

    torch.set_num_threads(args.threads)
    if args.no_inductor:
        compile_ = torch.compile
        torch.compile = lambda fn=None, **kwargs: compile_(fn, backend="aot_eager", **kwargs)
    config = TrainConfig(stack_sizes=(3, 4, 8), nt=4, batch_size=2, val_sequences=0, unroll=True).resolved()
    model, _ = recipe_training.build_model(config, (16, 16, 3), jit_compile=True)
    # What fit's data adapter hands the compiled step: torch tensors (NumPy arrays would break its graph).
    frames = keras.ops.convert_to_tensor(np.random.default_rng(0).random((2, 4, 16, 16, 3), dtype=np.float32))
    zeros = keras.ops.zeros((2, 1))
    calls = []
    for _ in range(2):
        started = time.perf_counter()
        model.fit(frames, zeros, batch_size=2, epochs=1, shuffle=False, verbose=0)
        calls.append(time.perf_counter() - started)
    # What compile_times() prints: per phase (functions torch marks dynamo_timed), the seconds of each call.
    metrics = torch._dynamo.utils.compilation_time_metrics
    phases = {name: (len(times), sum(times)) for name, times in metrics.items()}
    # The versions keyed by package as keyword arguments: only backends.py writes a backend's name as a key.
    result = {**dict(torch=torch.__version__, keras=keras.__version__),
              "inductor_cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR"), "inductor": not args.no_inductor,
              "first_call_seconds": round(calls[0], 3), "second_call_seconds": round(calls[1], 3),
              "graph_breaks": sum(torch._dynamo.utils.counters["graph_break"].values()),
              # TorchDynamo's frames by time, largest first: the model's forward is one frame.
              "largest_frames_seconds": sorted((round(t, 3) for t in metrics.get("_compile.compile_inner", [])),
                                               reverse=True)[:5],
              "phases": {name: {"calls": n, "seconds": round(s, 3)} for name, (n, s) in
                         sorted(phases.items(), key=lambda item: -item[1][1])}}
    with open(args.json, "x") as handle:
        json.dump(result, handle, indent=1)
    print(f"first call {calls[0]:.1f} s, second {calls[1]:.3f} s")
    for name, found in list(result["phases"].items())[:8]:
        print(f"  {found['seconds']:8.2f} s  {found['calls']:4d} calls  {name}")


if __name__ == "__main__":
    sys.exit(main())
