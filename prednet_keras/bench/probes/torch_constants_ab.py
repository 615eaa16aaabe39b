"""Whole training steps with and without layers/device_constants in one process, alternating: the fairest
CPU comparison on a shared machine (the same process, model and memory; only the Python numbers' path
differs: made into tensors once, or at every call as before).

    python -m prednet_keras.bench.probes.torch_constants_ab STACK_SIZES NT BATCH ROUNDS STEPS
    e.g. 3,4,8,16 10 4 8 30   (16x16 frames, train_on_batch, one compute thread)

Torch only, whatever KERAS_BACKEND says. Until this move it was scripts/torch_constants_ab.py (last changed in
ccd11af), the name docs/benchmarks.md's records give.
"""

import argparse
import contextlib
import os
import statistics
import time


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m prednet_keras.bench.probes.torch_constants_ab",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("stack_sizes", metavar="STACK_SIZES", help="channels per layer, e.g. 3,4,8,16")
    parser.add_argument("nt", metavar="NT", type=int, help="frames per sequence")
    parser.add_argument("batch", metavar="BATCH", type=int, help="sequences per step")
    parser.add_argument("rounds", metavar="ROUNDS", type=int, help="rounds, each timing both forms")
    parser.add_argument("steps_per_round", metavar="STEPS", type=int, help="training steps per form and round")
    args = parser.parse_args(argv)
    compare(args.stack_sizes, args.nt, args.batch, args.rounds, args.steps_per_round)


def compare(stack_sizes, nt, batch, rounds, steps_per_round):
    os.environ["KERAS_BACKEND"] = "torch"
    from prednet_keras import runtime

    runtime.configure(runtime.RuntimeConfig(backend="torch", device="cpu", threads=1))
    import numpy as np

    from prednet_keras.layers import device_constants
    from prednet_keras.options.recipe import TrainConfig
    from prednet_keras.session import recipe_training

    stack = tuple(int(v) for v in stack_sizes.split(","))
    config = TrainConfig(stack_sizes=stack, nt=nt, batch_size=batch, val_sequences=0).resolved()
    model, _ = recipe_training.build_model(config, (16, 16, 3), "auto")
    x = np.random.default_rng(0).random((batch, nt, 16, 16, 3), dtype=np.float32)
    y = np.zeros((batch, 1), np.float32)

    def ms_per_step(count):
        start = time.perf_counter()
        for _ in range(count):
            float(model.train_on_batch(x, y, return_dict=True)["loss"])
        return (time.perf_counter() - start) / count * 1000

    ms_per_step(5)
    results = {"made once (after)": [], "made at every call (before)": []}
    for round_ in range(rounds):
        for label in list(results) if round_ % 2 == 0 else list(results)[::-1]:
            made_once = label.startswith("made once")
            with contextlib.nullcontext() if made_once else device_constants.made_at_every_call():
                results[label].append(ms_per_step(steps_per_round))
    for label, values in results.items():
        print(f"{label:28s} ms/step median {statistics.median(values):.2f}  min {min(values):.2f}  "
              f"every round {[round(v, 1) for v in values]}")


if __name__ == "__main__":
    main()
