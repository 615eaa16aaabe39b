"""Times the most used PyTorch port of PredNet (github.com/leido/pytorch-prednet) training, on the CPU or a GPU.

Issue 25 asks for our figures side by side with the port's. The port is not a dependency and none of
its code is in this repository: pass a checkout of it (`--port-dir`); its files' sha256 go into the JSON so
that the measured code is named exactly. The port's training step is the one in its `kitti_train.py`:
`PredNet(R, A, output_mode="error")`, the errors weighted over time (first frame 0, the rest 1/(nt-1)) and
over layers (1, 0, 0, 0), their mean, Adam at lr 0.001, zero_grad, backward, step.

The port calls `.cuda()` on its state and casts frames to `torch.cuda.FloatTensor`; to run it unchanged on
a CPU (`--device cpu`), this script makes `Tensor.cuda` return the tensor itself and `torch.cuda.FloatTensor`
name the CPU type, before the port is imported. On a GPU (`--device gpu`) the port runs as its
`kitti_train.py` runs it: the model moved to the GPU, each batch copied there from host memory in the step,
PyTorch's defaults otherwise (TF32 convolutions). Its model differs from Lotter's in ways that change the arithmetic, not
the shape of the work: its ConvLSTM has convolutional peepholes (a third 3x3 convolution per layer and time
step), and sigmoid, not hard sigmoid, gates.

    python scripts/port_bench.py --port-dir /tmp/port --threads 2 --batch-size 4 --steps 3 --warmup 1 \
        --json port.json
    python3 scripts/port_bench.py --port-dir .port --device gpu --batch-size 16 --steps 20 --warmup 3 \
        --json port-b16.json

frames/s = batch * nt * steps / (sum of the timed steps' seconds), as prednet-bench counts it.
"""
import argparse
import hashlib
import json
import os
import platform
import statistics
import sys
import time

PORT_FILES = ("prednet.py", "convlstmcell.py", "debug.py")
REPOSITORY = "https://github.com/leido/pytorch-prednet"


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-dir", required=True, help="a checkout of leido/pytorch-prednet")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (torch's intra- and inter-op pools); default: torch's own choice")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--size", default="128x160", help="HxW of the frames")
    parser.add_argument("--nt", type=int, default=10)
    parser.add_argument("--stack-sizes", default="3,48,96,192",
                        help="channels per layer (A and R alike, as kitti_train.py); small ones leave the host's "
                             "work per operation, as prednet-bench --stack-sizes does")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", required=True, help="where the result goes (must not exist)")
    parser.add_argument("--cudnn-benchmark", action="store_true",
                        help="torch.backends.cudnn.benchmark on (cuDNN's algorithms picked by timing them, as our "
                             "--autotune does on torch); kitti_train.py leaves it off")
    parser.add_argument("--profile", metavar="FOLDER",
                        help="after the timed steps, trace 5 more with torch.profiler into FOLDER (trace.json) and "
                             "put where their time went into the JSON, as prednet-bench --profile does; not timed")
    return parser.parse_args(argv)


def port_files(port_dir):
    """sha256 of each file of the port that the model is made of; a missing one is an error."""
    digests = {}
    for name in PORT_FILES:
        path = os.path.join(port_dir, name)
        if not os.path.isfile(path):
            sys.exit(f"port_bench: {path}: not found; --port-dir must be a checkout of {REPOSITORY}")
        with open(path, "rb") as handle:
            digests[name] = hashlib.sha256(handle.read()).hexdigest()
    return digests


def main(argv=None):
    args = parse_arguments(argv)
    if os.path.exists(args.json):
        sys.exit(f"port_bench: {args.json}: already exists; not overwritten")
    height, width = (int(part) for part in args.size.split("x"))
    digests = port_files(args.port_dir)
    if args.threads is not None:
        # Fixed before torch starts its pools, as prednet-bench's runtime fixes them for our torch runs.
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(args.threads)
    on_gpu = args.device == "gpu"
    if on_gpu and not torch.cuda.is_available():
        sys.exit("port_bench: --device gpu: torch sees no CUDA device")
    if args.cudnn_benchmark and not on_gpu:
        sys.exit("port_bench: --cudnn-benchmark needs --device gpu (a CPU run has no cuDNN algorithms to time)")
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    channels = tuple(int(c) for c in args.stack_sizes.split(","))
    nt = args.nt
    model, optimizer, port_loss = port_training(args.port_dir, channels, nt, on_gpu, args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    frames = torch.rand(args.batch_size, nt, 3, height, width, generator=generator)

    def step():
        loss = port_loss(frames.cuda())  # a copy from host memory per step on a GPU, as in kitti_train.py
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return float(loss.detach())  # waits for the GPU
    warmup_seconds, step_seconds, losses = [], [], []
    for index in range(args.warmup + args.steps):
        started = time.perf_counter()
        losses.append(step())
        seconds = time.perf_counter() - started
        (warmup_seconds if index < args.warmup else step_seconds).append(seconds)
        print(f"port step {index + 1}/{args.warmup + args.steps}: {seconds:.3f} s, loss {losses[-1]:.6f}",
              flush=True)
    profile = _profile(step, args.profile) if args.profile else None
    frames_per_step = args.batch_size * nt
    result = {
        "what": "the PyTorch port's training step, float32, synthetic frames in [0, 1)",
        "port": {"repository": REPOSITORY, "sha256": digests},
        "config": {"device": args.device, "threads": args.threads, "batch_size": args.batch_size, "size": [height, width],
                   "nt": nt, "channels": list(channels), "steps": args.steps, "warmup": args.warmup,
                   "seed": args.seed, "cudnn_benchmark": args.cudnn_benchmark},
        "fps": frames_per_step * args.steps / sum(step_seconds),
        "frames_per_step": frames_per_step,
        "step_seconds": [round(s, 6) for s in step_seconds],
        "step_ms_median": round(statistics.median(step_seconds) * 1000, 3),
        "warmup_seconds": [round(s, 6) for s in warmup_seconds],
        "losses": losses,
        "parameters": sum(p.numel() for p in model.parameters()),
        **({"profile": profile} if profile else {}),
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "machine": platform.machine(), "processor": _processor(),
                        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
                        **(_gpu(torch) if on_gpu else {})},
    }
    if not all(map(_finite, losses)):
        sys.exit(f"port_bench: a loss is not finite ({losses}); no figure written")
    with open(args.json, "x") as handle:
        json.dump(result, handle, indent=1)
    print(f"port: {result['fps']:.2f} frames/s (median step {result['step_ms_median']:.0f} ms)")


def port_training(port_dir, channels, nt, on_gpu, seed):
    """The port's model (A and R channels alike), its Adam at lr 0.001 and its loss of a frame batch, as its
    kitti_train.py sets them up: the errors weighted over time (first frame 0, the rest 1/(nt-1)) and over layers
    (1, 0, ...), their mean. Off the GPU, `Tensor.cuda` is made to return the tensor itself first, so that the
    port's own `.cuda()` calls run unchanged on a CPU."""
    import torch

    if not on_gpu:
        torch.Tensor.cuda = lambda self, *args, **kwargs: self
        torch.cuda.FloatTensor = torch.FloatTensor
    sys.path.insert(0, os.path.abspath(port_dir))
    from prednet import PredNet  # noqa: E402  (the port's module, found through --port-dir)

    torch.manual_seed(seed)
    model = PredNet(channels, channels, output_mode="error")
    if on_gpu:
        model.cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    time_weights = torch.full((nt, 1), 1.0 / (nt - 1))
    time_weights[0] = 0
    layer_weights = torch.tensor([[1.0]] + [[0.0]] * (len(channels) - 1))
    if on_gpu:
        time_weights, layer_weights = time_weights.cuda(), layer_weights.cuda()

    def loss(frames):
        errors = model(frames)
        batch = errors.size(0)
        errors = torch.mm(errors.view(-1, nt), time_weights)
        return torch.mean(torch.mm(errors.view(batch, -1), layer_weights))

    return model, optimizer, loss


PROFILED_STEPS = 5


def _profile(step, folder):
    """PROFILED_STEPS more steps under torch.profiler, traced and summarised as prednet-bench --profile does
    ours (FOLDER/trace.json, the busiest timelines), so that the two read alike."""
    from prednet_keras.bench import format_profile_summary, summarize_profile, trace_torch

    os.makedirs(folder, exist_ok=True)
    with trace_torch(folder):
        for _ in range(PROFILED_STEPS):
            step()
    summary = summarize_profile(folder)
    print(format_profile_summary(summary, steps=PROFILED_STEPS), end="")
    return {"steps": PROFILED_STEPS, "folder": folder, "summary": summary}


def _gpu(torch):
    """What a GPU figure depends on: the card, CUDA and cuDNN, TF32, and the memory the step took."""
    return {"gpu": torch.cuda.get_device_name(0), "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "device_peak_bytes": torch.cuda.max_memory_allocated()}


def _finite(value):
    return value == value and abs(value) != float("inf")


def _processor():
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()
