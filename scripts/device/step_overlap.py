"""Issue 7 experiment: how much of the H200 training step is host time between steps?

Times Lotter's KITTI PredNet training four ways in one process (JAX on the GPU):
  train_on_batch   what prednet-bench timed so far (a host round trip per step, no prefetch);
  fit-sync         model.fit with a callback reading each step's loss at once (prednet-train so far);
  fit-lag          model.fit with a callback reading the previous step's loss (one step in flight);
  fit-lag-unroll   the same with the time loop unrolled (PredNet(unroll=True)).
Prints frames/s per variant and batch size.

    KERAS_BACKEND=jax python3 scripts/device/step_overlap.py --batch-size 4 --batch-size 16
"""

import argparse
import json
import time

import keras
import numpy as np

from prednet_keras.models import build_training_model, kitti_prednet_kwargs


class CompletionTimes(keras.callbacks.Callback):
    """Records when each step's loss is available; lag=1 waits for the step before the last."""

    def __init__(self, lag):
        super().__init__()
        self.lag = lag
        self.pending = []
        self.times = []

    def _drain(self, keep):
        while len(self.pending) > keep:
            logs = self.pending.pop(0)
            float(np.asarray(logs["loss"]))
            self.times.append(time.perf_counter())

    def on_train_batch_end(self, batch, logs=None):
        self.pending.append(logs)
        self._drain(self.lag)

    def on_train_end(self, logs=None):
        self._drain(0)


def build(size, unroll):
    kwargs = kitti_prednet_kwargs()
    kwargs["unroll"] = unroll
    model = build_training_model(nt=10, frame_shape=size + (3,), **kwargs)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mean_absolute_error")
    return model


def measure(batch_size, variant, steps, warmup, size=(128, 160)):
    rng = np.random.default_rng(0)
    x = rng.random((batch_size, 10) + size + (3,), dtype=np.float32)
    y = np.zeros((batch_size, 1), np.float32)
    model = build(size, unroll=variant.endswith("unroll"))
    if variant == "train_on_batch":
        times = []
        for _ in range(warmup + steps):
            float(np.asarray(model.train_on_batch(x, y, return_dict=True)["loss"]))
            times.append(time.perf_counter())
    else:
        def batches():
            while True:
                yield x, y

        recorder = CompletionTimes(lag=0 if variant == "fit-sync" else 1)
        model.fit(batches(), shuffle=False, steps_per_epoch=warmup + steps, epochs=1, verbose=0, callbacks=[recorder])
        times = recorder.times
    intervals = np.diff(times[warmup - 1:])
    return {
        "batch": batch_size,
        "variant": variant,
        "fps": batch_size * 10 * len(intervals) / float(np.sum(intervals)),
        "step_ms_median": 1000 * float(np.median(intervals)),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, action="append")
    parser.add_argument("--variant", action="append")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--size", type=int, nargs=2, default=(128, 160))
    parser.add_argument("--json")
    args = parser.parse_args()
    variants = args.variant or ["train_on_batch", "fit-sync", "fit-lag", "fit-lag-unroll"]
    results = []
    for batch_size in args.batch_size or [4, 16]:
        for variant in variants:
            started = time.perf_counter()
            result = measure(batch_size, variant, args.steps, args.warmup, tuple(args.size))
            result["seconds_total"] = round(time.perf_counter() - started, 1)
            results.append(result)
            print(json.dumps(result), flush=True)
            if args.json:
                with open(args.json, "w") as file:
                    json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()
