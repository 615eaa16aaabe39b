"""Where a compiled torch training step's first call spends its time: torch.compile's own phase timings.

Builds Lotter's PredNet (3 layers 3,4,8 at 16x16, nt 4, batch 2 by default), compiles its Keras training step
(`jit_compile=True`) and times its first two `train_on_batch` calls, then writes what
`torch._dynamo.utils.compile_times` shows, summed per phase (TorchDynamo's tracing of Python, AOT autograd,
Inductor's code generation and loading), and the seconds of TorchDynamo's five largest frames. Run it twice with one TORCHINDUCTOR_CACHE_DIR: the second run shows what a later
process still spends when every graph comes from Inductor's cache (docs/benchmarks.md).

    TORCHINDUCTOR_CACHE_DIR=DIR KERAS_BACKEND=torch python scripts/torch_compile_times.py --json first.json
    TORCHINDUCTOR_CACHE_DIR=DIR KERAS_BACKEND=torch python scripts/torch_compile_times.py --json later.json
"""

import argparse
import json
import os
import sys
import time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="where the timings go (must not exist)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    if os.environ.get("KERAS_BACKEND") != "torch":
        parser.error("set KERAS_BACKEND=torch")
    if os.path.exists(args.json):
        parser.error(f"{args.json}: already exists; not overwritten")
    import keras
    import numpy as np
    import torch

    import prednet_keras

    torch.set_num_threads(args.threads)
    stack = (3, 4, 8)
    model = prednet_keras.build_training_model(
        nt=4, frame_shape=(16, 16, 3), layer_loss_weights="L_0", stack_sizes=stack, R_stack_sizes=stack,
        A_filt_sizes=(3,) * 2, Ahat_filt_sizes=(3,) * 3, R_filt_sizes=(3,) * 3, unroll=True)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3), loss="mean_absolute_error", jit_compile=True)
    frames = np.random.default_rng(0).random((2, 4, 16, 16, 3), dtype=np.float32)
    zeros = np.zeros((2, 1), np.float32)
    calls = []
    for _ in range(2):
        started = time.perf_counter()
        model.train_on_batch(frames, zeros)
        calls.append(time.perf_counter() - started)
    # What compile_times() prints: per phase (functions torch marks dynamo_timed), the seconds of each call.
    metrics = torch._dynamo.utils.compilation_time_metrics
    phases = {name: (len(times), sum(times)) for name, times in metrics.items()}
    result = {"torch": torch.__version__, "keras": keras.__version__,
              "inductor_cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
              "first_call_seconds": round(calls[0], 3), "second_call_seconds": round(calls[1], 3),
              # TorchDynamo's frames by time, largest first: the model's forward is one frame.
              "largest_frames_seconds": sorted((round(t, 3) for t in metrics.get("_compile.compile_inner", [])),
                                               reverse=True)[:5],
              "phases": {name: {"calls": n, "seconds": round(s, 3)} for name, (n, s) in
                         sorted(phases.items(), key=lambda item: -item[1][1])}}
    with open(args.json, "x") as handle:
        json.dump(result, handle, indent=1)
    print(f"first call {calls[0]:.1f} s, second {calls[1]:.3f} s")
    for name, found in list(result["phases"].items())[:8]:
        print(f"  {found['seconds']:8.2f} s  {found['calls']:4d} calls  {name}")


if __name__ == "__main__":
    sys.exit(main())
