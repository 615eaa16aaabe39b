"""Where eager torch's training step waits for the GPU, and what the waits cost (issue 40).

On a GPU an eager torch step returns before the GPU has done it. In prednet-train's loop (the one
prednet-bench times, `bench.measure._fit_loop`) fit's thread still waits for the GPU before the next step is
dispatched: Keras converts each step's logs to floats in fit's thread (torch's callbacks are not
`async_safe`, session.callbacks.StepLosses), and Keras sends each numpy batch to the GPU with a blocking copy
(torch.as_tensor onto the device), which waits for the work queued before it; the counts below show where
else (on the H100, about 15 waits a step, every one in Keras' torch backend: docs/benchmarks.md). Where the
GPU sets the pace (batch 16), the host could be dispatching the next step while the GPU finishes this one.

This probe times Lotter's KITTI training step (eager, float32) through that loop in four ways, alternating,
in one process and on one model (the weights keep training; only the times are compared):

  as-is              the loop as prednet-train runs it
  async-callbacks    the logs converted in Keras' thread pool (StepLosses async-safe, as on JAX)
  device-batches     the batch already on the GPU (no copy per step), logs as as-is
  both               the two together: what staging the batch ahead without a wait could reach

and counts, over a few as-is steps under torch.cuda.set_sync_debug_mode("warn"), the synchronizing calls
by the Python line that made them.

    KERAS_BACKEND=torch python -m prednet_keras.bench.probes.torch_step_waits --json waits.json

`--device cpu` runs the same loops on the CPU, a smoke test only: there a step returns when it is done, so
StepLosses reads each loss at once and no loop is async-safe (`async_safe` in the JSON says which loops were).
"""

import argparse
import collections
import dataclasses
import json
import os
import statistics
import sys
import time
import warnings

VARIANTS = ("as-is", "async-callbacks", "device-batches", "both")


def _loop(model, x, y, async_callbacks):
    """(bench.measure's fit loop, whether its losses are read async-safe), StepLosses async-safe on torch
    or as the package decides."""
    from prednet_keras import backends
    from prednet_keras.bench.measure import _fit_loop
    from prednet_keras.session.callbacks import StepLosses

    table = backends.BACKENDS
    if async_callbacks:
        # StepLosses is async-safe where the backend keeps no copy of a step's output: the table asked, changed.
        backends.BACKENDS = tuple(dataclasses.replace(b, keep_step_output=None) if b is backends.TORCH else b
                                  for b in table)
    try:
        return _fit_loop(model, x, y), StepLosses(model).async_safe
    finally:
        backends.BACKENDS = table


def _median_step_ms(run, steps):
    stamps = []
    run(steps + 1, lambda: stamps.append(time.perf_counter()))
    return statistics.median(b - a for a, b in zip(stamps, stamps[1:])) * 1000


def _sync_sites(run, steps):
    """{"file:line": count} of the synchronizing calls in `steps` steps of `run`, from every thread."""
    import torch

    sites = collections.Counter()
    previous = warnings.showwarning

    def record(message, category, filename, lineno, file=None, line=None):
        if "synchronizing" in str(message):
            sites[f"{filename}:{lineno}"] += 1
        else:
            previous(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            run(steps, lambda: None)
            torch.cuda.synchronize()
        finally:
            torch.cuda.set_sync_debug_mode("default")
            warnings.showwarning = previous
    return dict(sites.most_common())


def probe(batch_size, size, stack_sizes, nt, steps, rounds, device="cuda"):
    import numpy as np
    import torch

    from prednet_keras.options.recipe import TrainConfig
    from prednet_keras.session import recipe_training

    config = TrainConfig(stack_sizes=stack_sizes, nt=nt, batch_size=batch_size, val_sequences=0).resolved()
    model, _ = recipe_training.build_model(config, size + (3,), jit_compile=False)
    x = np.random.default_rng(0).random((batch_size, nt) + size + (3,), dtype=np.float32)
    y = np.zeros((batch_size, 1), np.float32)
    x_gpu, y_gpu = (torch.as_tensor(a, device=device) for a in (x, y))
    loops = {
        "as-is": _loop(model, x, y, False),
        "async-callbacks": _loop(model, x, y, True),
        "device-batches": _loop(model, x_gpu, y_gpu, False),
        "both": _loop(model, x_gpu, y_gpu, True),
    }
    runs = {name: run for name, (run, _) in loops.items()}
    for run in runs.values():  # the first steps of each loop (cuDNN's plans, the allocator's pools)
        run(3, lambda: None)
    times = {name: [] for name in VARIANTS}
    for index in range(rounds):
        order = VARIANTS if index % 2 == 0 else VARIANTS[::-1]
        for name in order:
            times[name].append(round(_median_step_ms(runs[name], steps), 2))
            print(f"batch {batch_size}, round {index + 1}: {name:<16} {times[name][-1]:8.2f} ms", flush=True)
    return {
        "batch_size": batch_size,
        "async_safe": {name: safe for name, (_, safe) in loops.items()},
        "median_step_ms": times,
        "frames_per_s": {name: round(batch_size * nt * 1000 / statistics.median(t), 1) for name, t in times.items()},
        **({"sync_sites_in_3_as_is_steps": _sync_sites(runs["as-is"], 3),
            "sync_sites_in_3_both_steps": _sync_sites(runs["both"], 3)} if device == "cuda" else {}),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m prednet_keras.bench.probes.torch_step_waits",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="where the results go")
    parser.add_argument("--batch-sizes", default="4,16")
    parser.add_argument("--size", default="128x160", help="frames HxW")
    parser.add_argument("--stack-sizes", default="3,48,96,192")
    parser.add_argument("--nt", type=int, default=10)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per loop and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu",
                        help="cpu: a smoke test of the loops only (a CPU step does not run ahead of the host)")
    args = parser.parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras
    import torch

    import prednet_keras
    from prednet_keras import backends

    if backends.find(keras.backend.backend()) is not backends.TORCH:
        parser.error("set KERAS_BACKEND=torch")
    if args.device == "gpu" and not torch.cuda.is_available():
        parser.error("--device gpu: torch sees no CUDA device")
    device = "cuda" if args.device == "gpu" else "cpu"
    size = tuple(int(v) for v in args.size.split("x"))
    stack = tuple(int(v) for v in args.stack_sizes.split(","))
    result = {
        "what": __doc__.split("\n\n")[0],
        "command": ["python", "-m", "prednet_keras.bench.probes.torch_step_waits", *(argv or sys.argv[1:])],
        "prednet_keras": os.path.dirname(prednet_keras.__file__),
        "source_commit": os.environ.get("PREDNET_SOURCE_COMMIT"),
        "versions": {module.__name__: module.__version__ for module in (torch, keras)},
        "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
        "config": {"size": list(size), "stack_sizes": list(stack), "nt": args.nt, "steps": args.steps,
                   "rounds": args.rounds, "precision": "float32 (torch's default TF32 convolutions)"},
        "batches": [probe(int(b), size, stack, args.nt, args.steps, args.rounds, device)
                    for b in args.batch_sizes.split(",")],
    }
    with open(args.json, "w") as handle:
        json.dump(result, handle, indent=1)
    for batch in result["batches"]:
        print(f"batch {batch['batch_size']}: frames/s " + ", ".join(f"{k} {v}" for k, v in batch["frames_per_s"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
