"""Would unrolling the study's window (20 frame steps at batch 1) make its update cheaper? Measured before building it.

The 30-seed arm of the paper study is bound by the GPU's throughput at batch 1 (about 18.5 ms of GPU per update
with 16 processes sharing it). The Chainer-lineage window runs its time loop through `keras.layers.RNN` rolled:
on JAX a `lax.scan`, whose body XLA compiles once and runs 20 times, launching its kernels per step. Unrolled,
XLA sees the 20 steps as one program and can fuse and schedule across them. This probe builds the study's
trainer (`ChainerPredNetTrainer`, the paper's model and size) with the window's RNN rolled or unrolled, runs the first update (compilation) and then
--updates updates on one synthetic window sequence, and writes the timings and every loss.

    KERAS_BACKEND=jax python3 -m prednet_keras.bench.probes.chainer_unroll --unroll --json unrolled.json
    KERAS_BACKEND=jax python3 -m prednet_keras.bench.probes.chainer_unroll --no-unroll --json rolled.json

Each setting in its own process (no compilation shared). Deterministic GPU ops: set XLA_FLAGS as the arm does
(`--xla_gpu_deterministic_ops=true`); the flag is recorded. Until this move it was scripts/chainer_unroll_probe.py
(last changed in a3da048), the name docs/benchmarks.md's records give.
"""
import argparse
import json
import os
import platform
import statistics
import time


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m prednet_keras.bench.probes.chainer_unroll",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--unroll", action=argparse.BooleanOptionalAction, required=True)
    parser.add_argument("--updates", type=int, default=40)
    parser.add_argument("--size", default="120x160")
    parser.add_argument("--stack-sizes", default="3,48,96,192")
    parser.add_argument("--bprop", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    if os.path.exists(args.json):
        raise SystemExit(f"{args.json}: already exists; not overwritten")
    import keras
    import numpy as np

    from prednet_keras import backends
    from prednet_keras.models.chainer_protocol import ChainerPredNetTrainer

    height, width = (int(part) for part in args.size.split("x"))
    keras.utils.set_random_seed(args.seed)
    trainer = ChainerPredNetTrainer(
        (height, width, 3), {"stack_sizes": tuple(int(s) for s in args.stack_sizes.split(","))}, bprop=args.bprop,
        unroll=args.unroll,
    )
    rng = np.random.default_rng(args.seed)
    frames = rng.random((args.bprop * (args.updates + 1) + 1, height, width, 3), dtype=np.float32)
    seconds, losses = [], []
    for update in range(args.updates + 1):
        window = frames[update * args.bprop: (update + 1) * args.bprop + 1]
        started = time.perf_counter()
        mse, window_loss = trainer.update(window, starts_sequence=update == 0)  # reads the loss: waits for the device
        seconds.append(time.perf_counter() - started)
        losses.append([mse, window_loss])
    timed = seconds[1:]
    document = {
        "what": "ChainerPredNetTrainer.update, one window of bprop frame steps at batch 1, rolled or unrolled",
        "config": {"unroll": args.unroll, "updates": args.updates, "size": [height, width],
                   "stack_sizes": args.stack_sizes, "bprop": args.bprop, "seed": args.seed},
        "first_update_seconds": seconds[0],
        "update_ms": {"median": statistics.median(timed) * 1000, "min": min(timed) * 1000,
                      "max": max(timed) * 1000},
        "update_seconds": seconds,
        "losses": losses,
        "environment": {"backend": keras.backend.backend(), "keras": keras.__version__,
                        "XLA_FLAGS": os.environ.get("XLA_FLAGS"), "python": platform.python_version()},
    }
    if backends.find(keras.backend.backend()) is backends.JAX:
        import jax

        document["environment"].update(jax=jax.__version__, device=jax.devices()[0].device_kind)
    with open(args.json, "x") as handle:
        json.dump(document, handle, indent=1)
    print(f"unroll {args.unroll}: first update {seconds[0]:.1f} s, then median {document['update_ms']['median']:.1f} ms "
          f"per update ({args.updates} updates); last losses {losses[-1]}")


if __name__ == "__main__":
    main()
