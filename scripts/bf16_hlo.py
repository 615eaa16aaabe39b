"""What a compiled PredNet training step computes in: bfloat16 against float32 tensors in its StableHLO (JAX).

    KERAS_BACKEND=jax python scripts/bf16_hlo.py [--precision mixed_bfloat16] [--stack-sizes 3,48,96,192]
        [--size 128x160] [--nt 10] [--batch-size 4]

Lowers one training step (loss, gradients and the Adam update, through Keras' stateless API, jitted as
Keras' JAX trainer does) of the KITTI training model under the given dtype policy, without running it, and
counts in the lowered StableHLO every operation's result by element type: how many operations, and how many
elements they produce (a proxy for the memory traffic of the step), with the convolutions and the
elementwise operations on their own. Run it with PYTHONPATH pointing at another checkout to compare code
versions.
"""

import argparse
import collections
import json
import os
import re

_RESULT = re.compile(r"tensor<([^>]*)>")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", default="mixed_bfloat16")
    parser.add_argument("--stack-sizes", default="3,48,96,192")
    parser.add_argument("--size", default="128x160")
    parser.add_argument("--nt", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--json", help="also write the counts here")
    args = parser.parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "jax")

    import jax
    import keras
    import numpy as np

    assert keras.backend.backend() == "jax", "run with KERAS_BACKEND=jax"
    keras.config.set_dtype_policy(args.precision)
    import prednet_keras

    stack = tuple(int(s) for s in args.stack_sizes.split(","))
    height, width = (int(v) for v in args.size.split("x"))
    L = len(stack)
    model = prednet_keras.build_training_model(
        nt=args.nt, frame_shape=(height, width, stack[0]), stack_sizes=stack, R_stack_sizes=stack,
        A_filt_sizes=[3] * (L - 1), Ahat_filt_sizes=[3] * L, R_filt_sizes=[3] * L)
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)

    def step(trainable, non_trainable, opt_vars, x):
        def loss_fn(trainable):
            y, _ = model.stateless_call(trainable, non_trainable, x, training=True)
            return keras.ops.mean(keras.ops.abs(y))

        loss, grads = jax.value_and_grad(loss_fn)(trainable)
        trainable, opt_vars = optimizer.stateless_apply(opt_vars, grads, trainable)
        return loss, trainable, opt_vars

    x = np.zeros((args.batch_size, args.nt, height, width, stack[0]), "float32")
    values = lambda vs: [v.value for v in vs]  # noqa: E731
    text = jax.jit(step).lower(values(model.trainable_variables), values(model.non_trainable_variables),
                               values(optimizer.variables), x).as_text()

    counts = collections.defaultdict(lambda: collections.Counter())
    for line in text.splitlines():
        match = re.search(r"= (stablehlo\.[a-z_]+|\"stablehlo\.[a-z_]+\")", line)
        if not match:
            continue
        op = match.group(1).strip('"').split(".", 1)[1]
        result = line.rsplit("->", 1)[1] if "->" in line else line.rsplit(":", 1)[-1]
        for shape in _RESULT.findall(result):
            *dims, dtype = shape.split("x")
            if dtype not in ("bf16", "f32"):
                continue
            elements = int(np.prod([int(d) for d in dims])) if dims else 1
            kind = "convolution" if op == "convolution" else ("reduce" if op.startswith("reduce") else "other")
            counts[kind][f"{dtype} ops"] += 1
            counts[kind][f"{dtype} elements"] += elements
            counts["all"][f"{dtype} ops"] += 1
            counts["all"][f"{dtype} elements"] += elements
    print(f"{args.precision}: PredNet {args.stack_sizes}, {height}x{width}, nt {args.nt}, batch {args.batch_size}, "
          f"one training step (forward, backward, Adam) lowered to StableHLO; operation results by type")
    print(f"{'':<14}{'f32 ops':>9}{'bf16 ops':>9}{'f32 Melem':>11}{'bf16 Melem':>11}{'bf16 share':>11}{'GB':>7}")
    for kind in ("convolution", "reduce", "other", "all"):
        c = counts[kind]
        total = c["f32 elements"] + c["bf16 elements"]
        share = c["bf16 elements"] / total if total else 0.0
        gigabytes = (4 * c["f32 elements"] + 2 * c["bf16 elements"]) / 1e9
        print(f"{kind:<14}{c['f32 ops']:>9}{c['bf16 ops']:>9}{c['f32 elements'] / 1e6:>11.1f}"
              f"{c['bf16 elements'] / 1e6:>11.1f}{share:>10.0%}{gigabytes:>7.2f}")
    print("(Melem: million elements of operation results, each operation once: the time loop's body is counted "
          "once, not nt times; GB: those elements at 4 or 2 bytes)")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"precision": args.precision, "counts": {k: dict(v) for k, v in counts.items()}}, handle)


if __name__ == "__main__":
    main()
