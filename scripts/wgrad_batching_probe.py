"""Would batching the weight gradients of PredNet's time loop make JAX's float32 step faster? The premise, measured.

Issue 25's lead for JAX float32 on the GPU: at least a third of a training step's GPU time goes to cuDNN's
weight-gradient convolutions (wgrad), and each of the nt time steps computes its own for the same weights.
Batching them means one wgrad over the nt steps' inputs and output gradients stacked along the batch axis
instead of nt wgrads summed. That takes a hand-written gradient of the whole time loop, so this probe first
measures what it could gain: for every convolution of Lotter's KITTI PredNet (its shapes at the given batch
and frame size), the time of nt separate wgrads summed against one wgrad over the stacked batch, each in its
own jitted program, inputs on the device, medians of --repeats timed calls after a warm-up.

    KERAS_BACKEND=jax python3 scripts/wgrad_batching_probe.py --batch-size 16 --json wgrad.json

Prints a table per convolution and the totals; the JSON holds every timing. Only JAX (and so no Keras) is used:
the question is about the convolution kernels XLA picks, not about the model.
"""
import argparse
import json
import platform
import statistics
import time


def conv_shapes(stack_sizes, height, width):
    """(name, spatial H, W, input channels, output channels) of every convolution of Lotter's PredNet.

    The four gates of a layer's ConvLSTM are one convolution (as prednet_keras.layers.lotter computes them);
    every kernel is 3x3, as in Lotter's KITTI configuration.
    """
    layers = len(stack_sizes)
    shapes = []
    for l in range(layers):
        h, w = height >> l, width >> l
        gate_in = stack_sizes[l] + 2 * stack_sizes[l] + (stack_sizes[l + 1] if l < layers - 1 else 0)
        shapes.append((f"gates{l}", h, w, gate_in, 4 * stack_sizes[l]))
        shapes.append((f"ahat{l}", h, w, stack_sizes[l], stack_sizes[l]))
        if l < layers - 1:
            shapes.append((f"a{l}", h, w, 2 * stack_sizes[l], stack_sizes[l + 1]))
    return shapes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--nt", type=int, default=10)
    parser.add_argument("--size", default="128x160")
    parser.add_argument("--stack-sizes", default="3,48,96,192")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    import jax
    import jax.numpy as jnp

    height, width = (int(part) for part in args.size.split("x"))
    stack_sizes = [int(part) for part in args.stack_sizes.split(",")]
    nt, batch = args.nt, args.batch_size

    def wgrad(x, dy, kernel_shape):
        def conv(kernel):
            return jax.lax.conv_general_dilated(x, kernel, (1, 1), "SAME",
                                                dimension_numbers=("NHWC", "HWIO", "NHWC"))
        _, pullback = jax.vjp(conv, jnp.zeros(kernel_shape, x.dtype))
        return pullback(dy)[0]

    def per_step(xs, dys, kernel_shape):  # nt wgrads, summed as autodiff of the unrolled loop sums them
        total = wgrad(xs[0], dys[0], kernel_shape)
        for t in range(1, nt):
            total = total + wgrad(xs[t], dys[t], kernel_shape)
        return total

    def stacked(xs, dys, kernel_shape):  # one wgrad over the nt steps stacked along the batch axis
        return wgrad(xs.reshape((-1,) + xs.shape[2:]), dys.reshape((-1,) + dys.shape[2:]), kernel_shape)

    def timed(function, *operands):
        function(*operands).block_until_ready()
        seconds = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            function(*operands).block_until_ready()
            seconds.append(time.perf_counter() - started)
        return statistics.median(seconds) * 1000

    rows = []
    key = jax.random.PRNGKey(0)
    for dtype in args.dtypes.split(","):
        for name, h, w, cin, cout in conv_shapes(stack_sizes, height, width):
            key, kx, kd = jax.random.split(key, 3)
            xs = jax.random.normal(kx, (nt, batch, h, w, cin), dtype)
            dys = jax.random.normal(kd, (nt, batch, h, w, cout), dtype)
            shape = (3, 3, cin, cout)
            one_by_one = jax.jit(lambda a, b, s=shape: per_step(a, b, s))
            together = jax.jit(lambda a, b, s=shape: stacked(a, b, s))
            difference = float(jnp.max(jnp.abs(one_by_one(xs, dys).astype(jnp.float32)
                                               - together(xs, dys).astype(jnp.float32))))
            scale = float(jnp.max(jnp.abs(one_by_one(xs, dys).astype(jnp.float32))))
            row = {"dtype": dtype, "conv": name, "spatial": [h, w], "in": cin, "out": cout,
                   "per_step_ms": timed(one_by_one, xs, dys), "stacked_ms": timed(together, xs, dys),
                   "max_difference_relative": difference / scale if scale else 0.0}
            rows.append(row)
            print(f"{dtype:<9}{name:<8}{h:>4}x{w:<4}{cin:>5}->{cout:<5}{row['per_step_ms']:>9.3f} ms"
                  f"{row['stacked_ms']:>9.3f} ms{row['per_step_ms'] / row['stacked_ms']:>7.2f}x", flush=True)
        chosen = [row for row in rows if row["dtype"] == dtype]
        per, together_ms = sum(r["per_step_ms"] for r in chosen), sum(r["stacked_ms"] for r in chosen)
        print(f"{dtype}: every wgrad of one training step: {per:.2f} ms one step at a time, {together_ms:.2f} ms "
              f"stacked ({per / together_ms:.2f}x)", flush=True)
    device = jax.devices()[0]
    document = {
        "what": "nt weight-gradient convolutions summed against one over the nt steps stacked along the batch",
        "config": {"batch_size": batch, "nt": nt, "size": [height, width], "stack_sizes": stack_sizes,
                   "repeats": args.repeats, "kernel": [3, 3]},
        "environment": {"jax": jax.__version__, "device": device.device_kind, "platform": device.platform,
                        "python": platform.python_version()},
        "rows": rows,
    }
    with open(args.json, "x") as handle:
        json.dump(document, handle, indent=1)


if __name__ == "__main__":
    main()
