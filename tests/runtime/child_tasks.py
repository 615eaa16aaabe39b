"""Work done in child processes for the runtime tests (a process configures once).

    python child_tasks.py TASK RESULT_JSON [ARGS...]

Each task writes a JSON object to RESULT_JSON: {"ok": true, ...} or
{"ok": false, "error_type", "error", "traceback"}. The process environment comes
from runtime.environment_for, except where a task tests a badly prepared process.
"""

import json
import sys
import traceback

SEED = 3


def small_conv_dense():
    """Conv2D + Dense: the small model of the cross-backend starting-point test."""
    import keras

    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 3, activation="relu", name="conv")(inputs)
    x = keras.layers.Flatten()(x)
    outputs = keras.layers.Dense(5, name="dense")(x)
    return keras.Model(inputs, outputs, name="conv_dense")


def small_prednet():
    import keras

    from prednet_keras import PredNet

    layer = PredNet(
        stack_sizes=(3, 4, 8), R_stack_sizes=(3, 4, 8), A_filt_sizes=(3, 3),
        Ahat_filt_sizes=(3, 3, 3), R_filt_sizes=(3, 3, 3), return_sequences=True,
    )
    inputs = keras.Input((2, 16, 16, 3))
    return keras.Model(inputs, layer(inputs), name="prednet_small")


def conv_autoencoder():
    """The tiny conv model trained twice by the determinism tests."""
    import keras

    inputs = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="enc1")(inputs)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="enc2")(x)
    x = keras.layers.UpSampling2D(2)(x)
    outputs = keras.layers.Conv2D(3, 3, padding="same", name="dec")(x)
    return keras.Model(inputs, outputs, name="autoencoder")


MODELS = {"conv_dense": small_conv_dense, "prednet": small_prednet, "autoencoder": conv_autoencoder}


def task_readback():
    from prednet_keras import runtime

    config, effective = runtime.configure_from_environment()
    return {"effective": effective, "fingerprint": runtime.fingerprint()}


def task_load(*pairs):
    """For each MODEL=PATH: load PATH into a fresh MODEL and report checksums."""
    from prednet_keras import runtime
    from prednet_keras.models import starting_point

    config, effective = runtime.configure_from_environment()
    out = {"backend": effective["backend"]}
    for pair in pairs:
        name, path = pair.split("=", 1)
        model = MODELS[name]()
        generated = starting_point.weights_checksum(starting_point.initial_weights(model, SEED))
        loaded = starting_point.load_initial_weights(model, path)
        out[name] = {
            "load": loaded,
            "model_checksum": starting_point.weights_checksum(model),
            "generated_here": generated,
        }
    return out


def task_train(init_path, seed):
    """Trains the conv autoencoder from a saved start; returns the loss curve and
    the final weights' checksum (bit-level)."""
    import keras
    import numpy as np

    from prednet_keras import runtime
    from prednet_keras.models import starting_point

    config, effective = runtime.configure_from_environment()
    model = conv_autoencoder()
    init = starting_point.load_initial_weights(model, init_path)
    frames = np.random.default_rng(0).random((24, 16, 16, 3), dtype=np.float32)
    order = starting_point.data_order(len(frames), int(seed))
    losses = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            losses.append(float(logs["loss"]).hex())

    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse", jit_compile=effective["jit_compile"])
    model.fit(frames[order], frames[order], batch_size=4, epochs=2, shuffle=False, verbose=0,
              callbacks=[Record()])
    return {
        "init": init["checksum"],
        "order": starting_point.order_checksum(order),
        "losses": losses,
        "weights": starting_point.weights_checksum(model),
        "jit_compile": effective["jit_compile"],
    }


def task_train_then_load(init_path, seed, *pairs):
    """task_train, then task_load in the same process (under "loaded"): a framework's start costs seconds."""
    return {**task_train(init_path, seed), "loaded": task_load(*pairs)}


def task_late_tensorflow():
    """A process that started TensorFlow before configure: both refusals."""
    import tensorflow as tf

    from prednet_keras import runtime

    errors = {}
    # 1. oneDNN is read when TensorFlow loads: changing it now must be refused.
    try:
        runtime.configure(runtime.RuntimeConfig(backend="tensorflow", threads=1, onednn=False))
    except runtime.RuntimeSetupError as error:
        errors["env"] = str(error)
    # 2. The environment is right, but TensorFlow's runtime already started.
    tf.constant(1.0) + 1.0
    try:
        runtime.configure(runtime.RuntimeConfig(backend="tensorflow", threads=1))
    except runtime.RuntimeSetupError as error:
        errors["started"] = str(error)
    return {"errors": errors}


def task_late_jax():
    """A process whose JAX devices exist before configure asks for CPU pinning."""
    import jax

    jax.devices()
    from prednet_keras import runtime

    try:
        runtime.configure(runtime.RuntimeConfig(backend="jax", threads=1))
    except runtime.RuntimeSetupError as error:
        return {"errors": {"started": str(error)}}
    return {"errors": {}}


def task_configure_twice():
    from prednet_keras import runtime

    config, first = runtime.configure_from_environment()
    again = runtime.configure(config)
    try:
        runtime.configure(runtime.RuntimeConfig(backend=config.backend, threads=2))
        error = None
    except runtime.RuntimeSetupError as err:
        error = str(err)
    return {"same": again == first, "error": error}


def task_seed_train_save_load(path, configure):
    """Seeds Keras, trains a step, saves to PATH and loads it again, after runtime.configure ("1") or in the
    same environment with Keras alone ("0"): the loss, whether the load gave the weights back, and whether
    TensorFlow was imported."""
    if configure == "1":
        from prednet_keras import runtime

        runtime.configure_from_environment()
    import keras
    import numpy as np

    keras.utils.set_random_seed(SEED)
    model = small_conv_dense()
    model.compile(optimizer="adam", loss="mse")
    images = np.random.default_rng(0).random((4, 8, 8, 3), dtype=np.float32)
    loss = model.fit(images, np.zeros((4, 5), np.float32), verbose=0).history["loss"][0]
    model.save(path)
    again = keras.saving.load_model(path)
    return {
        "loss": float(loss),
        "weights_back": all(np.array_equal(a, b) for a, b in zip(model.get_weights(), again.get_weights())),
        "tensorflow_imported": "tensorflow" in sys.modules,
    }


TASKS = {name[len("task_"):]: fn for name, fn in globals().items() if name.startswith("task_")}


def main():
    task, result_path, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    try:
        result = TASKS[task](*args)
        result["ok"] = True
    except Exception as error:
        result = {
            "ok": False,
            "error_type": type(error).__name__,
            "error": str(error),
            "traceback": traceback.format_exc(),
        }
    with open(result_path, "w") as handle:
        json.dump(result, handle, default=str)


if __name__ == "__main__":
    main()
