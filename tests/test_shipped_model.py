"""The shipped model (prednet_keras/pretrained/prednet-embedded/, documented in weights/README.md): it
loads with keras.saving.load_model, beats the
previous-frame baseline on the embedded held-out clip with the scores weights/README.md gives, and
gives the same predictions in a fresh process on another backend (it was saved on JAX, on a GPU)."""

import hashlib
import json
import os

import numpy as np
import pytest

import keras
import prednet_keras
from prednet_keras.evaluate.prediction import load_sequences

from tests.backend_processes import ROOT
from tests.test_backends import BACKENDS, run_on

# Slow (the 128x160 shipped model on the held-out clip, and a torch process): in the full suite, not in the fast loop (pytest -m "not slow").
pytestmark = pytest.mark.slow

RUN = prednet_keras.pretrained.path("prednet-embedded")
MODEL = os.path.join(RUN, "model.keras")
# Scored on the H200 with JAX when it was trained, and again here with TensorFlow (weights/README.md).
MODEL_MSE, PREVIOUS_FRAME_MSE = 0.000792, 0.000830


@pytest.fixture(scope="module")
def held_out():
    """The embedded test clip as prednet-eval reads it: 12 non-overlapping 10-frame sequences."""
    return load_sequences(None, nt=10)[0]


@pytest.fixture(scope="module")
def model():
    return keras.saving.load_model(MODEL)


@pytest.fixture(scope="module")
def predictions(model, held_out):
    return prednet_keras.build_prediction_model(model).predict(held_out, batch_size=4, verbose=0)


def test_shipped_model_beats_the_previous_frame_on_the_held_out_clip(held_out, predictions):
    assert held_out.shape == (12, 10, 128, 160, 3)
    # The authors' metric, computed here directly: every step but the first, which has nothing to go on.
    model_mse = float(np.mean((held_out[:, 1:] - predictions[:, 1:]) ** 2))
    previous_mse = float(np.mean((held_out[:, 1:] - held_out[:, :-1]) ** 2))
    assert previous_mse == pytest.approx(PREVIOUS_FRAME_MSE, abs=5e-7)
    assert model_mse == pytest.approx(MODEL_MSE, abs=2e-6)
    assert model_mse < 0.97 * previous_mse


def test_public_api_loads_the_same_model(model):
    loaded = prednet_keras.pretrained.load("embedded")
    assert [w.shape for w in loaded.weights] == [w.shape for w in model.weights]
    for ours, theirs in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(ours, theirs)


def test_shipped_run_folder_describes_the_model(model):
    with open(os.path.join(RUN, "manifest.json")) as handle:
        manifest = json.load(handle)
    # The record of a completed run, as it was trained: no later resume attempt in it.
    assert manifest["status"] == "complete" and "resumes" not in manifest and "error" not in manifest
    assert manifest["options"]["epochs"] == manifest["result"]["epochs_completed"] == 80
    assert [s["end_epoch"] for s in manifest["sessions"]] == [80]
    layer = prednet_keras.find_prednet(model)
    assert list(layer.stack_sizes) == manifest["options"]["stack_sizes"]
    assert list(layer.R_stack_sizes) == manifest["options"]["r_stack_sizes"]
    assert manifest["options"]["augment"] == ["flip"]
    with open(os.path.join(ROOT, "weights", "README.md")) as handle:
        readme = handle.read()
    with open(MODEL, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    assert digest in readme, "weights/README.md must give the shipped model's sha256"


# JAX is the backend it was saved on, and the tests above run it on this process's backend (TensorFlow in CI);
# a fresh torch process is the third. (tests/test_backends.py moves files between every pair of backends.)
@pytest.mark.parametrize("backend", [b for b in BACKENDS if b not in (keras.backend.backend(), "jax")])
def test_shipped_model_predicts_the_same_in_a_fresh_process_on_another_backend(tmp_path, held_out, predictions, backend):
    # Four steps keep the other backends' compilation short; predictions are causal, so the first four steps
    # of the ten-step run here are what a four-step run gives.
    np.save(tmp_path / "frames.npy", held_out[:1, :4])
    os.symlink(MODEL, tmp_path / "model.keras")
    run_on(backend, "frames", tmp_path)
    np.testing.assert_allclose(np.load(tmp_path / f"frames_{backend}.npy"), predictions[:1, :4], atol=1e-4)


@pytest.mark.parametrize("name", prednet_keras.pretrained.names())
def test_every_shipped_manifest_is_complete_and_matches_its_model_file(name, model):
    from prednet_keras.formats.keras_files import load_model
    from prednet_keras.session import folder as run_folders
    from prednet_keras.models.starting_point import weights_checksum

    folder = run_folders.RunFolder(prednet_keras.pretrained.path(name))
    assert folder.read_manifest()["status"] == "complete"
    recorded, where = folder.recorded_model_checksum()
    assert where.endswith("result.model_weights_checksum")
    shipped = model if name == "prednet-embedded" else load_model(folder.model_path, compile=False)
    assert weights_checksum(shipped) == recorded
