"""Where one eager torch training step of Lotter's PredNet spends its host time, by operation and input shape.

Builds the training model as prednet-train does (`prednet_keras.build_training_model`: 3x3 filters, the time loop
unrolled, the loss on layer 0), trains WARMUP steps with `train_on_batch`, times STEPS more, then profiles one with
torch.profiler recording input shapes, and writes the operations with the most own (self) CPU time, grouped by name
and input shapes, with the median step time. On the CPU at batch 1 and small frames torch takes its native
convolution, which copies a kernel that is not contiguous at every call; Keras hands it a permuted view of the
(kh, kw, in, out) kernel, so the copies show here under `aten::copy_` with the kernel's shape.

    python scripts/torch_step_by_shape.py --stack-sizes 3,48,96,192 --size 16x16 --nt 10 \\
        --batch-size 1 --json by-shape.json

Torch only, whatever KERAS_BACKEND says; on the CPU, with one compute thread unless told.
"""

import argparse
import json
import os
import statistics
import sys
import time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack-sizes", default="3,48,96,192")
    parser.add_argument("--size", default="16x16", help="HxW of the frames")
    parser.add_argument("--nt", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--steps", type=int, default=5, help="timed steps before the profiled one")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rows", type=int, default=12, help="operations kept, by own CPU time")
    parser.add_argument("--json", required=True, help="where the result goes")
    args = parser.parse_args(argv)
    folder = os.path.dirname(os.path.abspath(args.json))
    if not os.path.isdir(folder):
        parser.error(f"--json {args.json}: the folder {folder} does not exist")
    try:
        stack = tuple(int(s) for s in args.stack_sizes.split(","))
        height, width = (int(s) for s in args.size.lower().split("x"))
    except ValueError:
        parser.error("--stack-sizes takes integers separated by commas, --size HxW")
    os.environ["KERAS_BACKEND"] = "torch"  # torch only, whatever the environment says

    import keras
    import numpy as np
    import torch

    import prednet_keras
    from lotter_training import compiled_training_model  # scripts/lotter_training.py, beside this file

    torch.set_num_threads(args.threads)
    model = compiled_training_model(stack, args.nt, height, width)
    frames = np.random.default_rng(0).random((args.batch_size, args.nt, height, width, stack[0]), dtype=np.float32)
    zeros = np.zeros((args.batch_size, 1), np.float32)
    for _ in range(args.warmup):
        model.train_on_batch(frames, zeros)
    step_ms = []
    for _ in range(args.steps):
        started = time.perf_counter()
        model.train_on_batch(frames, zeros)
        step_ms.append(1000 * (time.perf_counter() - started))
    with torch.profiler.profile(record_shapes=True) as profile:
        model.train_on_batch(frames, zeros)
    events = sorted(profile.key_averages(group_by_input_shape=True), key=lambda e: -e.self_cpu_time_total)
    total_us = sum(e.self_cpu_time_total for e in events)
    rows = [{"name": e.key, "input_shapes": str(e.input_shapes), "calls": e.count,
             "self_cpu_ms": round(e.self_cpu_time_total / 1000, 3),
             "share": round(e.self_cpu_time_total / total_us, 4)} for e in events[: args.rows]]
    result = {"config": {k: getattr(args, k) for k in ("stack_sizes", "size", "nt", "batch_size", "threads")},
              "torch": torch.__version__, "keras": keras.__version__,
              "prednet_keras": os.path.dirname(prednet_keras.__file__),
              "median_step_ms": round(statistics.median(step_ms), 1),
              "profiled_step_self_cpu_ms": round(total_us / 1000, 1), "by_self_cpu_time": rows}
    with open(args.json, "w") as handle:
        json.dump(result, handle, indent=1)
    print(f"median step {result['median_step_ms']} ms; the profiled step's own CPU time "
          f"{result['profiled_step_self_cpu_ms']} ms, of which:")
    for row in rows:
        print(f"  {row['self_cpu_ms']:>9.1f} ms  {100 * row['share']:5.1f}%  {row['calls']:>4}x  {row['name']}  "
              f"{row['input_shapes']}")


if __name__ == "__main__":
    sys.exit(main())
