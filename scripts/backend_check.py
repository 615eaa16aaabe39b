"""Checks one backend against the NumPy reference and times training (run once per backend).

    KERAS_BACKEND=jax python scripts/backend_check.py --out DIR [--tf32 off|default] [--device gpu|cpu]

Writes DIR/check_<backend>_<tf32>.json (max abs differences per output mode,
timings) and DIR/step_<backend>_<tf32>.npz (weights after one SGD step), to be
compared across backends. Used for the issue-2 cross-backend report; see
docs/backend-check.md.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def set_precision(tf32):
    import keras

    backend = keras.backend.backend()
    if tf32 == "off":
        if backend == "torch":
            import torch

            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
        elif backend == "jax":
            import jax

            jax.config.update("jax_default_matmul_precision", "highest")
        elif backend == "tensorflow":
            import tensorflow as tf

            tf.config.experimental.enable_tensor_float_32_execution(False)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--tf32", choices=["off", "default"], default="off")
    parser.add_argument("--time-steps", type=int, default=20)
    parser.add_argument("--batches", default="4,16")
    parser.add_argument("--skip-kitti-reference", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    import numpy as np
    import keras

    set_precision(args.tf32)
    import prednet_keras
    from prednet_keras import PredNet
    from tests.layers.numpy_prednet import prednet_reference, random_weights

    backend = keras.backend.backend()
    report = {"backend": backend, "tf32": args.tf32, "keras": keras.__version__, "devices": _devices(backend)}

    def set_weights(layer, weights):
        for conv in layer.cell.conv_layers:
            conv.kernel.assign(weights[conv.name][0])
            conv.bias.assign(weights[conv.name][1])

    # 1. Small configuration, every output mode, with and without extrapolation.
    stack, R_stack = (3, 4, 8), (3, 6, 8)
    rng = np.random.default_rng(0)
    weights = random_weights(stack, R_stack, 3, rng)
    frames = rng.random((2, 6, 16, 32, 3)).astype("float32")
    diffs = {}
    modes = ["prediction", "error", "all"] + [f"{k}{l}" for l in range(3) for k in ("R", "E", "A", "Ahat")]
    for extrap in (None, 3):
        for mode in modes:
            layer = PredNet(stack, R_stack, [3, 3], [3] * 3, [3] * 3, output_mode=mode, return_sequences=True,
                            extrap_start_time=extrap)
            layer.build((None, None, 16, 32, 3))
            set_weights(layer, weights)
            got = keras.ops.convert_to_numpy(layer(frames))
            expected = prednet_reference(frames, weights, stack, R_stack, output_mode=mode, extrap_start_time=extrap)
            diffs[f"{mode}{'' if extrap is None else '/extrap3'}"] = float(np.abs(got - expected).max())
    report["small_max_abs_diff"] = diffs
    report["small_worst"] = max(diffs.values())

    # 2. One SGD step of the training model from the same weights (compared across backends offline).
    model = prednet_keras.build_training_model(nt=6, frame_shape=(16, 32, 3), layer_loss_weights="L_all",
                                               stack_sizes=stack, R_stack_sizes=R_stack, A_filt_sizes=[3, 3],
                                               Ahat_filt_sizes=[3] * 3, R_filt_sizes=[3] * 3)
    set_weights(prednet_keras.find_prednet(model), weights)
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mean_absolute_error")
    loss = model.train_on_batch(frames, np.zeros((2, 1), "float32"))
    arrays = {f"{c.name}/{p}": keras.ops.convert_to_numpy(getattr(c, p))
              for c in prednet_keras.find_prednet(model).cell.conv_layers for p in ("kernel", "bias")}
    np.savez(os.path.join(args.out, f"step_{backend}_{args.tf32}.npz"), loss=np.asarray(loss), **arrays)
    report["sgd_step_loss"] = float(loss)

    # 3. KITTI configuration against the reference (one sequence) and training throughput.
    kitti = prednet_keras.kitti_prednet_kwargs()
    kw = random_weights(kitti["stack_sizes"], kitti["R_stack_sizes"], 3, np.random.default_rng(1), scale=1.0)
    kframes = np.random.default_rng(2).random((1, 10, 128, 160, 3)).astype("float32")
    layer = PredNet(**kitti, output_mode="prediction", return_sequences=True)
    layer.build((None, None, 128, 160, 3))
    set_weights(layer, kw)
    got = keras.ops.convert_to_numpy(layer(kframes))
    if not args.skip_kitti_reference:
        t = time.time()
        expected = prednet_reference(kframes, kw, kitti["stack_sizes"], kitti["R_stack_sizes"], "prediction")
        report["kitti_reference_seconds"] = time.time() - t
        report["kitti_prediction_max_abs_diff"] = float(np.abs(got - expected).max())

    timings = {}
    for batch in [int(b) for b in args.batches.split(",")]:
        train = prednet_keras.build_training_model(nt=10, frame_shape=(128, 160, 3))
        train.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mean_absolute_error")
        x = np.random.default_rng(3).random((batch, 10, 128, 160, 3)).astype("float32")
        y = np.zeros((batch, 1), "float32")
        t = time.time()
        train.train_on_batch(x, y)
        compile_s = time.time() - t
        for _ in range(2):
            train.train_on_batch(x, y)
        _sync(train.train_on_batch(x, y))
        t = time.time()
        for _ in range(args.time_steps):
            loss = train.train_on_batch(x, y)
        _sync(loss)
        seconds = (time.time() - t) / args.time_steps
        timings[str(batch)] = {"step_s": seconds, "frames_per_s": batch * 10 / seconds, "first_step_s": compile_s}
    report["kitti_training"] = timings
    path = os.path.join(args.out, f"check_{backend}_{args.tf32}.json")
    with open(path, "w") as handle:
        json.dump(report, handle, indent=2)
    print(json.dumps(report, indent=2))


def _sync(value):
    import numpy as np

    return float(np.asarray(value))


def _devices(backend):
    if backend == "jax":
        import jax

        return [str(d) for d in jax.devices()]
    if backend == "torch":
        import torch

        return [torch.cuda.get_device_name(0)] if torch.cuda.is_available() else ["cpu"]
    return []


if __name__ == "__main__":
    main()
