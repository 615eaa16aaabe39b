"""Whole training steps with and without layers/device_constants in one process, alternating: the fairest
CPU comparison on a shared machine (the same process, model and memory; only the Python numbers' path
differs: made into tensors once, or at every call as before).

    KERAS_BACKEND=torch python scripts/torch_constants_ab.py STACK_SIZES NT BATCH ROUNDS STEPS
    e.g. 3,4,8,16 10 4 8 30   (16x16 frames, train_on_batch, one compute thread)
"""

import os
import statistics
import sys
import time


def main(stack_sizes, nt, batch, rounds, steps_per_round):
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
    cached = device_constants._eager_torch

    def ms_per_step(count):
        start = time.perf_counter()
        for _ in range(count):
            float(model.train_on_batch(x, y, return_dict=True)["loss"])
        return (time.perf_counter() - start) / count * 1000

    ms_per_step(5)
    results = {"made once (after)": [], "made at every call (before)": []}
    for round_ in range(rounds):
        for label in list(results) if round_ % 2 == 0 else list(results)[::-1]:
            device_constants._eager_torch = cached if label.startswith("made once") else (lambda: False)
            results[label].append(ms_per_step(steps_per_round))
    device_constants._eager_torch = cached
    for label, values in results.items():
        print(f"{label:28s} ms/step median {statistics.median(values):.2f}  min {min(values):.2f}  "
              f"every round {[round(v, 1) for v in values]}")


if __name__ == "__main__":
    stack_sizes, nt, batch, rounds, steps = sys.argv[1:6]
    main(stack_sizes, int(nt), int(batch), int(rounds), int(steps))
