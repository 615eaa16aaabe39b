"""Child of test_async_callbacks: a tiny Keras model trained under fit with the run recorder, on the
backend KERAS_BACKEND names, once as the recorder is (async-safe on JAX) and once with it made synchronous
(as it is on every backend without asynchronous steps). Prints one JSON line per run."""

import csv
import json
import sys
import threading
import types
from pathlib import Path

import keras
import numpy as np

from prednet_keras.session.callbacks import RunRecorder
from prednet_keras.session.folder import RunFolder

STEPS, EPOCHS = 12, 2


def run(folder, synchronous, lr):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(lr), loss="mean_squared_error")
    rng = np.random.default_rng(0)
    x = rng.random((STEPS * 2, 4), dtype=np.float32)
    y = rng.random((STEPS * 2, 1), dtype=np.float32)
    folder.mkdir(parents=True)
    config = types.SimpleNamespace(lr=lr, lr_drop_epoch=EPOCHS, lr_drop_factor=0.1)
    recorder = RunRecorder(RunFolder(folder), model, "loss", None, STEPS, config)
    declared = recorder.async_safe
    if synchronous:
        recorder.async_safe = False  # read by fit's CallbackList when fit starts
    threads = []
    hand_over = recorder.on_train_batch_end

    def on_train_batch_end(batch, logs=None):
        threads.append(threading.current_thread() is threading.main_thread())
        hand_over(batch, logs)

    recorder.on_train_batch_end = on_train_batch_end
    model.fit(x, y, batch_size=2, epochs=EPOCHS, shuffle=False, verbose=0, callbacks=[recorder])
    with open(folder / "history.csv", newline="") as handle:
        rows = [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(handle)]
    return {"declared_async_safe": declared, "async_safe": recorder.async_safe, "rows": rows,
            "in_fit_thread": threads, "diverged": recorder.diverged}


if __name__ == "__main__":
    out, lr = Path(sys.argv[1]), float(sys.argv[2])
    for name, synchronous in (("as-is", False), ("synchronous", True)):
        print(json.dumps({"run": name, **run(out / name, synchronous, lr)}), flush=True)
