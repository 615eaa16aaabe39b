"""Run in a subprocess with KERAS_BACKEND set: one task on one backend, results to .npy/.npz files.

Usage: python -m tests.backend_worker TASK[,TASK...] FOLDER   (the tasks in order, in this one process)
  predict  - load FOLDER/model.keras, run it on FOLDER/frames.npy -> FOLDER/out_<backend>.npy
  frames   - load FOLDER/model.keras (a training model), predict the frames of FOLDER/frames.npy
             (over its own number of steps)
             -> FOLDER/frames_<backend>.npy
  save     - build the small PredNet with FOLDER/weights.npz, save FOLDER/model_<backend>.keras
  train    - one SGD step of the training model from FOLDER/weights.npz on FOLDER/frames.npy
             -> FOLDER/trained_<backend>.npz (loss and every weight)
"""

import sys

import numpy as np


def main(task, folder):
    import keras

    import prednet_keras
    from tests.test_backends import build_small_model, set_weights_from_npz

    backend = keras.backend.backend()
    if task == "predict":
        model = keras.saving.load_model(f"{folder}/model.keras")
        out = model.predict(np.load(f"{folder}/frames.npy"), verbose=0)
        np.save(f"{folder}/out_{backend}.npy", out)
    elif task == "frames":
        model = keras.saving.load_model(f"{folder}/model.keras")
        frames = np.load(f"{folder}/frames.npy")
        predictor = prednet_keras.build_prediction_model(model, nt=frames.shape[1])
        np.save(f"{folder}/frames_{backend}.npy", predictor.predict(frames, verbose=0))
    elif task == "save":
        model = build_small_model("prediction")
        set_weights_from_npz(model, f"{folder}/weights.npz")
        model.save(f"{folder}/model_{backend}.keras")
    elif task == "train":
        frames = np.load(f"{folder}/frames.npy")
        model = prednet_keras.build_training_model(
            nt=frames.shape[1], frame_shape=frames.shape[2:], layer_loss_weights="L_all",
            **build_small_model.prednet_kwargs,
        )
        set_weights_from_npz(model, f"{folder}/weights.npz")
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5), loss="mean_absolute_error")
        loss = model.train_on_batch(frames, np.zeros((frames.shape[0], 1), "float32"))
        layer = prednet_keras.find_prednet(model)
        arrays = {}
        for conv in layer.cell.conv_layers:
            arrays[f"{conv.name}/kernel"] = keras.ops.convert_to_numpy(conv.kernel)
            arrays[f"{conv.name}/bias"] = keras.ops.convert_to_numpy(conv.bias)
        np.savez(f"{folder}/trained_{backend}.npz", loss=np.asarray(loss), **arrays)
    else:
        raise SystemExit(f"unknown task {task}")


if __name__ == "__main__":
    tasks, folder = sys.argv[1:]
    for task in tasks.split(","):
        main(task, folder)
