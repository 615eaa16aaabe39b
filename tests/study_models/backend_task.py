"""Run in a subprocess with KERAS_BACKEND set: the study-model checks of one backend.

Usage: python -m tests.study_models.backend_task FOLDER
Reads FOLDER/weights.npz (Chainer layout), FOLDER/frames.npy (sequences, uint8) and
writes FOLDER/result_<backend>.npz: the imported model's predictions, the logged
values of a short training (chainer truncation, CPU aliasing, SGD) and the weights after it.
"""

import sys

import numpy as np


def run(folder):
    import keras

    from prednet_keras.formats.chainer import import_chainer_model, save_chainer_npz
    from prednet_keras.models.chainer_protocol import train_chainer_prednet
    from prednet_keras.models.protocols import ChainerProtocol

    backend = keras.backend.backend()
    sequences = np.load(f"{folder}/frames.npy")
    model = import_chainer_model(f"{folder}/weights.npz")
    predictions = keras.ops.convert_to_numpy(model(sequences[:, :5].astype("float32") / 255))
    config = {k: model.layers[-1].get_config()[k] for k in ("stack_sizes", "R_stack_sizes")}
    result = train_chainer_prednet(
        list(sequences),
        model_config=config,
        protocol=ChainerProtocol("backends", period=2 * (len(sequences[0]) - 1), bprop=3, metric_updates=2),
        tbptt="chainer",
        emulate_cpu_aliasing=True,
        initial_weights=f"{folder}/weights.npz",
        optimizer=keras.optimizers.SGD(learning_rate=0.5),
    )
    save_chainer_npz(result.model, f"{folder}/trained_{backend}.npz")
    np.savez(
        f"{folder}/result_{backend}.npz",
        predictions=predictions,
        logged=np.array(result.logged),
        window_loss=np.array([r["window_loss"] for r in result.records]),
    )


if __name__ == "__main__":
    run(sys.argv[1])
