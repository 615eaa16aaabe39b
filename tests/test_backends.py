"""The same weights give the same outputs and gradients on every installed backend,
`.keras` files move between backends, and the model compiles under XLA."""


import numpy as np
import pytest

import keras
import prednet_keras
from prednet_keras import PredNet

from tests import backend_processes
from tests.layers.numpy_prednet import prednet_reference, random_weights

# Slow (a process per backend): in the full suite, not in the fast loop (pytest -m "not slow").
pytestmark = pytest.mark.slow

STACK, R_STACK, FILT, FRAME, NT = (3, 4, 8), (3, 6, 8), 3, (8, 16), 4
BACKENDS = backend_processes.INSTALLED


def build_small_model(output_mode):
    inputs = keras.Input((NT,) + FRAME + (3,))
    layer = PredNet(**build_small_model.prednet_kwargs, output_mode=output_mode, return_sequences=True)
    return keras.Model(inputs, layer(inputs))


build_small_model.prednet_kwargs = dict(
    stack_sizes=STACK, R_stack_sizes=R_STACK, A_filt_sizes=[FILT] * 2, Ahat_filt_sizes=[FILT] * 3, R_filt_sizes=[FILT] * 3
)


def set_weights_from_npz(model, path):
    arrays = np.load(path)
    layer = prednet_keras.find_prednet(model)
    for conv in layer.cell.conv_layers:
        conv.kernel.assign(arrays[f"{conv.name}/kernel"])
        conv.bias.assign(arrays[f"{conv.name}/bias"])


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    folder = tmp_path_factory.mktemp("backends")
    rng = np.random.default_rng(11)
    weights = random_weights(STACK, R_STACK, FILT, rng)
    frames = rng.random((2, NT) + FRAME + (3,)).astype("float32")
    np.save(folder / "frames.npy", frames)
    flat = {}
    for name, (kernel, bias) in weights.items():
        flat[f"{name}/kernel"], flat[f"{name}/bias"] = kernel, bias
    np.savez(folder / "weights.npz", **flat)
    return dict(folder=folder, weights=weights, frames=frames)


def run_on(backend, tasks, folder):
    """Runs `tasks` (comma-separated, tests/backend_worker.py) in one fresh process on `backend`."""
    backend_processes.run_module(backend, "tests.backend_worker", tasks, folder)


@pytest.fixture(scope="module")
def worked(shared):
    """The folder after one process per backend, side by side, loaded the model saved here and predicted,
    trained one step, and (the other backends) saved the model built there. A process per backend, not per
    task: each start of a framework costs seconds on 2 cores."""
    folder = shared["folder"]
    model = build_small_model("prediction")
    set_weights_from_npz(model, folder / "weights.npz")
    model.save(folder / "model.keras")  # saved here, on the test's own backend
    here = keras.backend.backend()
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda b: run_on(b, "predict,train" if b == here else "predict,train,save", folder), BACKENDS))
    return folder


@pytest.mark.parametrize("backend", BACKENDS)
def test_saved_model_gives_reference_outputs_on_every_backend(shared, worked, backend):
    expected = prednet_reference(shared["frames"], shared["weights"], STACK, R_STACK, output_mode="prediction")
    np.testing.assert_allclose(np.load(worked / f"out_{backend}.npy"), expected, atol=2e-5)


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != keras.backend.backend()])
def test_model_saved_on_another_backend_loads_here(shared, worked, backend):
    model = keras.saving.load_model(worked / f"model_{backend}.keras")
    expected = prednet_reference(shared["frames"], shared["weights"], STACK, R_STACK, output_mode="prediction")
    np.testing.assert_allclose(model.predict(shared["frames"], verbose=0), expected, atol=2e-5)


@pytest.mark.skipif(len(BACKENDS) < 2, reason="needs two backends")
def test_one_training_step_agrees_across_backends(shared, worked):
    results = {b: np.load(worked / f"trained_{b}.npz") for b in BACKENDS}
    first = results[BACKENDS[0]]
    start = np.load(worked / "weights.npz")
    moved = max(np.abs(first[k] - start[k]).max() for k in start.files)
    assert moved > 1e-3  # the step really changed the weights
    for backend in BACKENDS[1:]:
        other = results[backend]
        np.testing.assert_allclose(other["loss"], first["loss"], rtol=1e-5)
        for key in start.files:
            np.testing.assert_allclose(other[key], first[key], atol=2e-5, err_msg=f"{backend} {key}")


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="XLA through TensorFlow")
def test_compiles_under_xla_on_tensorflow(shared):
    import tensorflow as tf

    model = build_small_model("prediction")
    set_weights_from_npz(model, shared["folder"] / "weights.npz")
    compiled = tf.function(lambda x: model(x), jit_compile=True)
    expected = prednet_reference(shared["frames"], shared["weights"], STACK, R_STACK, output_mode="prediction")
    np.testing.assert_allclose(compiled(shared["frames"]).numpy(), expected, atol=2e-5)

    training = prednet_keras.build_training_model(nt=NT, frame_shape=FRAME + (3,), **build_small_model.prednet_kwargs)
    training.compile(optimizer="adam", loss="mean_absolute_error", jit_compile=True)
    loss = training.train_on_batch(shared["frames"], np.zeros((2, 1), "float32"))
    assert np.isfinite(loss) and loss > 0
