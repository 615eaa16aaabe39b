"""How close training on this CPU is to the CPU's own arithmetic limit (issue 25's 2-core targets).

Counts the convolution arithmetic of one training frame of Lotter's KITTI model and of the PyTorch port
(github.com/leido/pytorch-prednet, whose ConvLSTM adds a 3x3 convolution of the cell state), measures what
this CPU's best matrix products reach with the same thread count (torch, oneDNN/MKL: float32 and
bfloat16), and, given side-by-side results (scripts/cpu_port.sh's cpu-port.json, scripts/cpu_backends.sh's
cpu-backends.json), says what share of that limit each run used.

    python scripts/cpu_roofline.py --threads 2 --results cpu-port.json --json roofline.json
    python scripts/cpu_roofline.py --xla-check       # the analytic count against XLA's cost analysis

A training frame costs three times its forward convolutions (the forward, the input gradients and the
weight gradients each multiply the same shapes); the elementwise work (gates, errors, pooling) is left out
and is under 1% of the arithmetic (the --xla-check line shows XLA's whole count beside the analytic one).
"""
import argparse
import json
import lzma
import os
import sys
import time

KITTI_STACK = (3, 48, 96, 192)
KITTI_FRAME = (128, 160)


def conv_flops(height, width, channels_in, channels_out):
    """Multiply-adds of one same-padded 3x3 convolution, counted as 2 FLOPs each.

    Taps that fall on the zero padding are not counted (as XLA counts them): along a side of n pixels a
    3-tap kernel has 3n - 2 taps inside.
    """
    return 2 * channels_in * channels_out * (3 * height - 2) * (3 * width - 2)


def forward_flops_per_frame(stack=KITTI_STACK, frame=KITTI_FRAME, cell_peephole_conv=False):
    """Forward convolution FLOPs of one time step of PredNet with A and R channels `stack`.

    Per layer l (pixels halve in each dimension per layer): the ConvLSTM's gate convolution of
    [E_l (2 A_l), R_l, upsampled R_{l+1}] to 4 R_l, the prediction A_hat = conv(R_l) to A_l, and (below
    the top) the next layer's target A_{l+1} = pool(conv(E_l)), the convolution at layer l's size.
    `cell_peephole_conv`: the port's ConvLSTM adds conv(c, 3 R_l) for the input, forget and output gates.
    """
    total = 0
    for layer, channels in enumerate(stack):
        size = (frame[0] >> layer, frame[1] >> layer)
        above = stack[layer + 1] if layer + 1 < len(stack) else 0
        total += conv_flops(*size, 2 * channels + channels + above, 4 * channels)
        if cell_peephole_conv:
            total += conv_flops(*size, channels, 3 * channels)
        total += conv_flops(*size, channels, channels)
        if above:
            total += conv_flops(*size, 2 * channels, above)
    return total


def training_flops_per_frame(**kwargs):
    return 3 * forward_flops_per_frame(**kwargs)


def gemm_gflops(dtype_name, threads, size=4096, repeats=5):
    """Best GFLOP/s of a size x size matrix product with torch on `threads` threads."""
    import torch

    torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    generator = torch.Generator().manual_seed(0)
    a = torch.rand(size, size, generator=generator).to(dtype)
    b = torch.rand(size, size, generator=generator).to(dtype)
    torch.matmul(a, b)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - started)
    return 2 * size ** 3 / best / 1e9


def xla_forward_flops(batch=1):
    """XLA's count (jax, cost analysis of the lowered forward) of Lotter's KITTI model, per frame.

    The time loop is unrolled: XLA counts a loop's body once, not once per step.
    """
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import jax
    import numpy as np

    from prednet_keras import models

    model = models.build_training_model(**models.kitti_prednet_kwargs(unroll=True))
    frames = np.zeros((batch, 10) + KITTI_FRAME + (3,), "float32")
    trainable = [v.value for v in model.trainable_variables]
    fixed = [v.value for v in model.non_trainable_variables]

    def forward(trainable, fixed, frames):
        return model.stateless_call(trainable, fixed, frames)[0]

    cost = jax.jit(forward).lower(trainable, fixed, frames).cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return cost["flops"] / (batch * 10)


def _results_fps(path):
    """(label, frames/s) of every run in a cpu-port.json or a prednet-bench document."""
    with (lzma.open if path.endswith(".xz") else open)(path, "rt") as handle:
        document = json.load(handle)
    found = []
    if "runs" in document:
        for name, run in sorted(document["runs"].items()):
            fps = run["fps"] if "port" in run else run["results"][0]["train"]["fps"]
            found.append((name[:-len(".json")], fps))
    else:
        for result in document["results"]:
            requested = result["runtime"]["requested"]
            found.append((f"{requested['backend']}-{requested['precision']}-r{result.get('round', '')}",
                          result["train"]["fps"]))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--results", action="append", default=[], help="cpu-port.json or cpu-backends.json")
    parser.add_argument("--json", help="write the figures here (must not exist)")
    parser.add_argument("--xla-check", action="store_true", help="compare the analytic count with XLA's")
    args = parser.parse_args(argv)
    if args.json and os.path.exists(args.json):
        sys.exit(f"cpu_roofline: {args.json}: already exists; not overwritten")
    # Read first: a bad results file is told before a minute of measuring.
    results = []
    for path in args.results:
        try:
            results.append((path, _results_fps(path)))
        except (OSError, ValueError, KeyError, IndexError, TypeError) as error:
            sys.exit(f"cpu_roofline: {path}: not a cpu-port.json or prednet-bench document ({error!r})")
    ours = training_flops_per_frame()
    port = training_flops_per_frame(cell_peephole_conv=True)
    report = {"training_gflop_per_frame": {"lotter": ours / 1e9, "port": port / 1e9}}
    print(f"training GFLOP per frame (convolutions): Lotter's model {ours / 1e9:.2f}, the port {port / 1e9:.2f}")
    if args.xla_check:
        xla = xla_forward_flops()
        analytic = forward_flops_per_frame()
        report["forward_gflop_per_frame"] = {"analytic": analytic / 1e9, "xla": xla / 1e9}
        print(f"forward GFLOP per frame: analytic {analytic / 1e9:.3f}, XLA {xla / 1e9:.3f} "
              f"({xla / analytic:.4f}x)")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    peaks = {name: gemm_gflops(name, args.threads) for name in ("float32", "bfloat16")}
    report["gemm_gflops"] = peaks
    report["threads"] = args.threads
    print(f"matrix product, {args.threads} threads: float32 {peaks['float32']:.0f} GFLOP/s, "
          f"bfloat16 {peaks['bfloat16']:.0f} GFLOP/s ({peaks['bfloat16'] / peaks['float32']:.2f}x)")
    runs = []
    for path, found in results:
        for label, fps in found:
            flops = (port if label.startswith("port") else ours) * fps / 1e9
            peak = peaks["bfloat16" if "bfloat16" in label else "float32"]
            runs.append({"source": path, "run": label, "fps": fps, "gflops": flops, "share_of_gemm": flops / peak})
            print(f"  {label}: {fps:.2f} frames/s = {flops:.0f} GFLOP/s, {100 * flops / peak:.0f}% of the "
                  f"{'bfloat16' if 'bfloat16' in label else 'float32'} matrix product")
    report["runs"] = runs
    report["command"] = ["python", "scripts/cpu_roofline.py"] + (sys.argv[1:] if argv is None else list(argv))
    if args.json:
        with open(args.json, "x") as handle:
            json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
