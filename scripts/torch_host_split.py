"""Where an eager PyTorch training step's time goes, ours against the port's: forward, backward, the rest.

At sizes where the arithmetic is small (the default: channels 3,4,8,16 at 16x16, nt 10, batch 1, one thread),
a step's time on the CPU is the host's work per operation, which is what sets the pace of eager torch on a GPU at
small batches. This times, each as the median of STEPS calls after 5 warm-up calls:

- `forward`: the model's forward pass with autograd recording, and the loss;
- `forward_backward`: the same, the gradients cleared, and the backward pass;
- `step`: a whole training step as each trains: ours `model.train_on_batch` (Keras' torch trainer: forward,
  backward, Adam, the loss tracker), the port's as its kitti_train.py (forward, zero_grad, backward, Adam).

`step - forward_backward` is the optimizer's and the trainer's share; `forward_backward - forward` the backward's.
Ours is Lotter's training model as prednet-train and prednet-bench build it (`build_training_model`: 3x3 filters,
the time loop unrolled, the loss on layer 0); the port (github.com/leido/pytorch-prednet, a checkout passed with
--port-dir, not a dependency) as scripts/port_bench.py builds it. One process per model (the port's runs with
`Tensor.cuda` made a no-op, as port_bench.py does on a CPU):

    KERAS_BACKEND=torch python scripts/torch_host_split.py ours --json ours.json
    python scripts/torch_host_split.py port --port-dir .port --json port.json
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time


def timed(function, steps):
    for _ in range(5):
        function()
    seconds = []
    for _ in range(steps):
        started = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - started)
    return round(statistics.median(seconds) * 1000, 3)


def port_functions(args, stack, height, width):
    import torch

    from port_bench import port_training  # scripts/port_bench.py, beside this file

    _, optimizer, loss = port_training(args.port_dir, stack, args.nt, False, args.seed)
    frames = torch.rand(args.batch_size, args.nt, stack[0], height, width,
                        generator=torch.Generator().manual_seed(args.seed))

    def forward():
        return loss(frames)

    def forward_backward():
        loss = forward()
        optimizer.zero_grad()
        loss.backward()

    def step():
        forward_backward()
        optimizer.step()

    return forward, forward_backward, step


def our_functions(args, stack, height, width):
    import keras
    import numpy as np
    import torch

    from lotter_training import compiled_training_model  # scripts/lotter_training.py, beside this file

    if keras.backend.backend() != "torch":
        sys.exit("torch_host_split.py ours: set KERAS_BACKEND=torch")
    model = compiled_training_model(stack, args.nt, height, width)
    rng = np.random.default_rng(args.seed)
    frames = torch.tensor(rng.random((args.batch_size, args.nt, height, width, stack[0]), dtype=np.float32))
    zeros = torch.zeros((args.batch_size, 1))

    def forward():
        return torch.abs(model(frames, training=True) - zeros).mean()

    def forward_backward():
        loss = forward()
        for variable in model.trainable_weights:
            variable.value.grad = None
        loss.backward()

    def step():
        model.train_on_batch(frames, zeros)

    return forward, forward_backward, step


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=("ours", "port"))
    parser.add_argument("--port-dir", help="a checkout of leido/pytorch-prednet (for `port`)")
    parser.add_argument("--stack-sizes", default="3,4,8,16")
    parser.add_argument("--size", default="16x16")
    parser.add_argument("--nt", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the result here (must not exist)")
    args = parser.parse_args(argv)
    if args.model == "port" and not args.port_dir:
        parser.error("port: --port-dir is needed")
    stack = tuple(int(v) for v in args.stack_sizes.split(","))
    height, width = (int(v) for v in args.size.split("x"))
    if args.model == "ours":
        from prednet_keras import runtime

        runtime.configure(runtime.RuntimeConfig(backend="torch", device="cpu", threads=args.threads))
    import torch

    torch.set_num_threads(args.threads)
    from prednet_keras.runtime import fingerprint  # imports no framework

    make = our_functions if args.model == "ours" else port_functions
    forward, forward_backward, step = make(args, stack, height, width)
    milliseconds = {"forward": timed(forward, args.steps), "forward_backward": timed(forward_backward, args.steps),
                    "step": timed(step, args.steps)}
    result = {"model": args.model, "config": {k: v for k, v in vars(args).items() if k not in ("json", "model")},
              "median_ms": milliseconds,
              "backward_ms": round(milliseconds["forward_backward"] - milliseconds["forward"], 3),
              "rest_ms": round(milliseconds["step"] - milliseconds["forward_backward"], 3),
              "command": [os.path.basename(sys.argv[0]), *(argv if argv is not None else sys.argv[1:])],
              "environment": {"python": platform.python_version(), "torch": torch.__version__,
                              "machine": fingerprint()}}
    if args.model == "ours":
        import keras

        import prednet_keras

        result["environment"]["keras"] = keras.__version__
        result["prednet_keras"] = os.path.dirname(prednet_keras.__file__)
    print(f"{args.model}: forward {milliseconds['forward']:.2f} ms, backward {result['backward_ms']:.2f} ms, "
          f"the rest {result['rest_ms']:.2f} ms, step {milliseconds['step']:.2f} ms")
    if args.json:
        with open(args.json, "x") as handle:
            json.dump(result, handle, indent=1)


if __name__ == "__main__":
    main()
