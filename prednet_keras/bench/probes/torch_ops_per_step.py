"""The operations one eager training step of Lotter's PredNet dispatches on torch, counted by name.

On eager torch every operation is dispatched from Python, so their count is the host's work per step; on a
GPU at a small batch the host sets the pace (docs/benchmarks.md). Counts ATen operations (forward,
backward and Adam's update) with a TorchDispatchMode over one `train_on_batch` after a first one, for
4 layers (3,4,8,16), 16x16 frames, nt 10, batch 4, the time loop unrolled.

    KERAS_BACKEND=torch python -m prednet_keras.bench.probes.torch_ops_per_step --json ops.json

`--model chainer-window` counts instead one update of the study's Chainer PredNet window (4 layers 3,4,8,16,
16x16, a window of 20 frames, batch 1: `ChainerPredNetTrainer.update`, the third, so that the state carried
between windows is there), in float32. Until this move it was scripts/torch_ops_per_step.py (last changed in
946c741), the name docs/benchmarks.md's records give; it counted another checkout's code with
`PYTHONPATH=CHECKOUT python scripts/torch_ops_per_step.py`, which `git show 946c741:scripts/torch_ops_per_step.py`
still gives.
"""

import argparse
import collections
import json
import os
import sys


def operation_counter():
    """A TorchDispatchMode whose `ops` counts, by name, the ATen operations run inside it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class OperationCounter(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    return OperationCounter()


def count(policy):
    import keras
    import numpy as np

    import prednet_keras

    keras.config.set_dtype_policy(policy)
    stack = (3, 4, 8, 16)
    model = prednet_keras.build_training_model(
        nt=10, frame_shape=(16, 16, 3), layer_loss_weights="L_0", stack_sizes=stack, R_stack_sizes=stack,
        A_filt_sizes=(3,) * 3, Ahat_filt_sizes=(3,) * 4, R_filt_sizes=(3,) * 4, unroll=True)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3), loss="mean_absolute_error")
    frames = np.random.default_rng(0).random((4, 10, 16, 16, 3), dtype=np.float32)
    zeros = np.zeros((4, 1), np.float32)
    model.train_on_batch(frames, zeros)  # the first step builds the optimizer's state
    return counted(lambda: model.train_on_batch(frames, zeros))


def count_chainer_window():
    import numpy as np

    from prednet_keras.models.chainer_protocol import ChainerPredNetTrainer

    trainer = ChainerPredNetTrainer((16, 16, 3), dict(stack_sizes=(3, 4, 8, 16)), bprop=20)
    trainer.build_window()
    frames = np.random.default_rng(0).random((21, 16, 16, 3), dtype=np.float32)
    trainer.update(frames, starts_sequence=True)  # builds the optimizer's state
    trainer.update(frames, starts_sequence=False)
    return counted(lambda: trainer.update(frames, starts_sequence=False))


def counted(step):
    """The operations `step()` dispatches: their total and their count by name, most first."""
    with operation_counter() as counter:
        step()
    return {"total": sum(counter.ops.values()), "by_operation": dict(counter.ops.most_common())}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="where the counts go")
    parser.add_argument("--model", choices=("lotter", "chainer-window"), default="lotter",
                        help="Lotter's training step (default) or the Chainer window's update")
    args = parser.parse_args(argv)
    folder = os.path.dirname(os.path.abspath(args.json))
    if not os.path.isdir(folder):
        parser.error(f"--json {args.json}: the folder {folder} does not exist")
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras

    import prednet_keras
    from prednet_keras import backends

    if backends.find(keras.backend.backend()) is not backends.TORCH:
        parser.error("set KERAS_BACKEND=torch")

    if args.model == "chainer-window":
        policies = {"float32": count_chainer_window()}
    else:
        policies = {policy: count(policy) for policy in ("float32", "mixed_bfloat16")}
    result = {"prednet_keras": os.path.dirname(prednet_keras.__file__), "model": args.model, "policies": policies}
    with open(args.json, "w") as handle:
        json.dump(result, handle, indent=1)
    for policy, found in result["policies"].items():
        print(f"{policy}: {found['total']} operations per step, of which cat {found['by_operation'].get('aten.cat', 0)}")


if __name__ == "__main__":
    sys.exit(main())
