"""Where the host time of an eager PyTorch-backend training step goes, and whose it is.

Builds Lotter's training model as prednet-train and prednet-bench do (`prednet_keras.build_training_model`
with their defaults: 3x3 filters, the time loop unrolled, the loss on layer 0; compiled with Adam 1e-3, the
mean absolute error of the weighted error, the last-batch metric), trains it through `model.fit` on
synthetic frames (a callback reading each loss at once, as their fit loop does on torch's CPU), and
reports:

- `numbers_made_into_tensors`: the Python numbers (bool, int, float) turned into tensors during one
  training step (`torch.as_tensor` / `torch.tensor` of a number), by who asked: on a GPU each is a copy
  from pageable host memory followed by a wait for the stream;
- `without_profiler`: STEPS steps timed first, wall clock and this process's CPU time per step;
- `profile`: cProfile over STEPS more steps of `fit`, the own time (tottime) of every function summed by owner
  (prednet_keras, keras, torch's Python, torch's C functions, the rest) and the functions with the most
  own and cumulative time. cProfile slows Python down more than C, so the shares are the host's, not
  the wall clock's.

    KERAS_BACKEND=torch python scripts/torch_step_overhead.py --stack-sizes 3,4,8 --size 16x16 --nt 4 \\
        --batch-size 2 --steps 300 --json overhead.json

Runs on this process's backend (set KERAS_BACKEND=torch) on the CPU, one compute thread unless told.
"""

import argparse
import collections
import cProfile
import json
import os
import pstats
import sys
import time
import traceback


def owner(filename, function):
    if "prednet_keras" in filename:
        return "prednet_keras"
    if "/keras/" in filename:
        return "keras"
    if "/torch/" in filename:
        return "torch (Python)"
    if filename == "~":
        if "run_backward" in function:
            return "torch autograd engine (C)"
        if "torch" in function or "Tensor" in function:
            return "torch ops (C)"
        return "Python builtins"
    return "other Python"


def short(filename):
    for marker in ("site-packages/", "prednet_keras/"):
        if marker in filename:
            return ("prednet_keras/" if marker == "prednet_keras/" else "") + filename.split(marker, 1)[1]
    return filename


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack-sizes", default="3,4,8")
    parser.add_argument("--size", default="16x16")
    parser.add_argument("--nt", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--json", help="write the report here (else it is printed)")
    args = parser.parse_args(argv)

    from prednet_keras import runtime

    runtime.configure(runtime.RuntimeConfig(backend=os.environ.get("KERAS_BACKEND", "torch"), device="cpu",
                                            threads=args.threads))
    import keras
    import numpy as np
    import torch

    import prednet_keras
    from lotter_training import compiled_training_model  # scripts/lotter_training.py, beside this file
    from prednet_keras.models import LastBatchLoss

    if keras.backend.backend() != "torch":
        parser.error("set KERAS_BACKEND=torch")
    stack = tuple(int(v) for v in args.stack_sizes.split(","))
    height, width = (int(v) for v in args.size.split("x"))
    model = compiled_training_model(stack, args.nt, height, width, metrics=[LastBatchLoss()])
    frames = np.random.default_rng(0).random((args.batch_size, args.nt, height, width, 3), dtype=np.float32)
    zeros = np.zeros((args.batch_size, 1), np.float32)

    made = collections.Counter()
    counting = [False]

    def counted(real):
        def make(data, *a, **k):
            if counting[0] and isinstance(data, (bool, int, float)):
                stack_ = traceback.extract_stack()[:-1]
                ours = [f for f in stack_ if "prednet_keras" in f.filename]
                theirs = [f for f in stack_ if "/keras/src/" in f.filename]
                if ours:
                    where = f"prednet_keras: {short(ours[-1].filename)}:{ours[-1].lineno} {ours[-1].line}"
                else:
                    where = "keras: " + " < ".join(f"{short(f.filename)}:{f.name}" for f in theirs[-4:][::-1])
                made[where] += 1
            return real(data, *a, **k)
        return make

    real_as_tensor, real_tensor = torch.as_tensor, torch.tensor
    torch.as_tensor, torch.tensor = counted(real_as_tensor), counted(real_tensor)
    profile = cProfile.Profile()

    def read_loss(logs):
        """A step's loss as prednet-train reads it on torch: copied on its device, then read (at once, on a CPU)."""
        loss = logs.get("batch_loss", logs.get("loss"))
        return float(loss.detach().clone() if isinstance(loss, torch.Tensor) else loss)

    steps = {"seconds": []}

    class Steps(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            counting[0] = batch == 2  # one step, after the first (which builds) and the second
            if batch == 3:  # STEPS steps timed without the profiler, then STEPS under it
                steps["clock"] = (time.perf_counter(), time.process_time())
            if batch == 3 + args.steps:
                wall, cpu = time.perf_counter(), time.process_time()
                steps["plain"] = (wall - steps["clock"][0], cpu - steps["clock"][1])
                steps["start"] = time.perf_counter()
                profile.enable()

        def on_train_batch_end(self, batch, logs=None):
            read_loss(logs or {})
            counting[0] = False

    def batches():
        while True:
            yield frames, zeros

    model.fit(batches(), steps_per_epoch=2 * args.steps + 3, epochs=1, shuffle=False, verbose=0, callbacks=[Steps()])
    profile.disable()
    wall = time.perf_counter() - steps["start"]
    torch.as_tensor, torch.tensor = real_as_tensor, real_tensor

    stats = pstats.Stats(profile)
    by_owner = collections.Counter()
    functions = []
    for (filename, line, function), (calls, _, own, cumulative, _) in stats.stats.items():
        by_owner[owner(filename, function)] += own
        functions.append((own, cumulative, calls, f"{short(filename)}:{line}({function})"))
    total = sum(by_owner.values())
    report = {
        "command": ["python", "scripts/torch_step_overhead.py"] + list(argv if argv is not None else sys.argv[1:]),
        "prednet_keras": os.path.dirname(prednet_keras.__file__),
        "versions": {"keras": keras.__version__, "torch": torch.__version__},
        "config": {"stack_sizes": list(stack), "size": [height, width], "nt": args.nt,
                   "batch_size": args.batch_size, "threads": args.threads},
        "without_profiler": {"steps": args.steps, "wall_ms_per_step": round(1000 * steps["plain"][0] / args.steps, 3),
                             "process_cpu_ms_per_step": round(1000 * steps["plain"][1] / args.steps, 3)},
        "numbers_made_into_tensors": {"per_step": sum(made.values()), "by_maker": dict(made.most_common())},
        "profile": {
            "steps": args.steps,
            "wall_seconds_under_cprofile": round(wall, 3),
            "own_seconds": round(total, 3),
            "python_calls_per_step": round(sum(v[1] for v in stats.stats.values()) / args.steps, 1),
            "by_owner": {k: {"seconds": round(v, 3), "share": round(v / total, 4)} for k, v in by_owner.most_common()},
            "top_own": [{"function": f, "own_s": round(o, 3), "cumulative_s": round(c, 3), "calls": n}
                        for o, c, n, f in sorted(functions, reverse=True)[:args.top]],
            "top_cumulative": [{"function": f, "own_s": round(o, 3), "cumulative_s": round(c, 3), "calls": n}
                               for o, c, n, f in sorted(functions, key=lambda t: -t[1])[:args.top]],
        },
    }
    text = json.dumps(report, indent=1)
    if args.json:
        with open(args.json, "w") as handle:
            handle.write(text + "\n")
    print(f"{report['numbers_made_into_tensors']['per_step']} Python numbers made into tensors per step")
    for maker, count in made.most_common():
        print(f"  {count:4d}  {maker}")
    print(f"{args.steps} steps without the profiler: {report['without_profiler']}")
    print(f"cProfile, {args.steps} steps, {wall:.2f} s, {report['profile']['python_calls_per_step']} calls per step: "
          "own time by owner")
    for name, value in by_owner.most_common():
        print(f"  {value:7.3f} s  {100 * value / total:5.1f}%  {name}")


if __name__ == "__main__":
    main()
