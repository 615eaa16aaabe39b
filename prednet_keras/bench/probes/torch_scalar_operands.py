"""The host cost of a Python number given to a Keras op on eager torch, the old form against the new, in one
process: the old and new forms alternate, so a shared machine's drift falls on both alike.

    KERAS_BACKEND=torch python -m prednet_keras.bench.probes.torch_scalar_operands [--json out.json]

Forms: PredNet's hard sigmoid with the clip's bounds as Python numbers (as before) or as tensors made once
(layers/device_constants.scalar); WeightedError's constant vector made at every call or once
(device_constants.cached); ops.minimum against pixel_max; and the cell's dtype check
(keras.backend.standardize_dtype against lotter.dtype_name). Per call, in microseconds, median of ROUNDS
rounds of CALLS calls each, forward only, on a (2, 16, 16, 12) float32 tensor on the CPU. Until this move it
was scripts/torch_scalar_operands.py (last changed in a8f7d52), the name docs/benchmarks.md's records give.
"""

import argparse
import json
import os
import statistics
import time


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m prednet_keras.bench.probes.torch_scalar_operands",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras
    import torch
    from keras import ops

    from prednet_keras import backends
    from prednet_keras.layers import lotter
    from prednet_keras.layers.device_constants import cached, scalar
    from prednet_keras.layers.lotter_args import keras2_hard_sigmoid

    if backends.find(keras.backend.backend()) is not backends.TORCH:
        parser.error("set KERAS_BACKEND=torch")
    torch.set_num_threads(1)
    x = torch.rand((2, 16, 16, 12))
    weights = (0.0, 1 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 9)

    def vector_old():
        return ops.stack([ops.full((), w, dtype="float32") for w in weights])

    forms = {
        "hard sigmoid": (lambda: ops.clip(0.2 * x + 0.5, 0.0, 1.0), lambda: keras2_hard_sigmoid(x)),
        "constant vector (10 values)": (vector_old, lambda: cached(("vector", weights, "float32"), x, vector_old)),
        "minimum with pixel_max": (lambda: ops.minimum(x, 1.0), lambda: ops.minimum(x, scalar(1.0, x, "float32"))),
        "dtype check": (lambda: keras.backend.standardize_dtype(x.dtype), lambda: lotter.dtype_name(x.dtype)),
    }
    result = {}
    for name, (old, new) in forms.items():
        assert torch.equal(torch.as_tensor(old()), torch.as_tensor(new())) if name != "dtype check" else old() == new()
        times = {"old": [], "new": []}
        for _ in range(args.rounds):
            for label, form in (("old", old), ("new", new)):
                start = time.perf_counter()
                for _ in range(args.calls):
                    form()
                times[label].append((time.perf_counter() - start) / args.calls * 1e6)
        result[name] = {label: {"median_us": round(statistics.median(v), 3), "min_us": round(min(v), 3),
                                "max_us": round(max(v), 3)} for label, v in times.items()}
        print(f"{name:30s} old {result[name]['old']['median_us']:8.2f} us   new {result[name]['new']['median_us']:8.2f} us")
    if args.json:
        # The versions keyed by package as keyword arguments: only backends.py writes a backend's name as a key.
        with open(args.json, "w") as handle:
            json.dump({"command": ["python", "-m", "prednet_keras.bench.probes.torch_scalar_operands",
                                   "--rounds", str(args.rounds), "--calls", str(args.calls)],
                       "versions": dict(keras=keras.__version__, torch=torch.__version__),
                       "per_call": result}, handle, indent=1)


if __name__ == "__main__":
    main()
