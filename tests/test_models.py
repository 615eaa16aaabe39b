"""The KITTI training model (loss weighting) and the prediction model built from it."""

import subprocess
import sys

import numpy as np
import pytest

import keras
import prednet_keras
from prednet_keras.models.lotter import layer_loss_weights_for, time_loss_weights_for

from tests.layers.numpy_prednet import prednet_reference, random_weights
from tests.layers.test_lotter import set_named_weights

STACK, R_STACK, FILT, FRAME, NT = (3, 4, 6), (3, 5, 6), 3, (8, 12), 5
KWARGS = dict(stack_sizes=STACK, R_stack_sizes=R_STACK, A_filt_sizes=[FILT] * 2, Ahat_filt_sizes=[FILT] * 3,
              R_filt_sizes=[FILT] * 3)


@pytest.fixture()
def trained():
    rng = np.random.default_rng(5)
    weights = random_weights(STACK, R_STACK, FILT, rng)
    frames = rng.random((3, NT) + FRAME + (3,)).astype("float32")
    model = prednet_keras.build_training_model(nt=NT, frame_shape=FRAME + (3,), layer_loss_weights="L_all", **KWARGS)
    set_named_weights(prednet_keras.find_prednet(model), weights)
    return model, weights, frames


def test_weights_of_the_recipe():
    assert layer_loss_weights_for("L_0", 4) == [1, 0, 0, 0]
    assert layer_loss_weights_for("L_all", 4) == [1, 0.1, 0.1, 0.1]
    assert layer_loss_weights_for([1, 2], 2) == [1, 2]
    assert time_loss_weights_for(5) == [0, 0.25, 0.25, 0.25, 0.25]
    with pytest.raises(ValueError, match="3 values but the model has 4 layers"):
        layer_loss_weights_for([1, 2, 3], 4)
    with pytest.raises(ValueError, match="'L_0', 'L_all'"):
        layer_loss_weights_for("L_1", 4)


def test_training_model_output_is_the_weighted_error(trained):
    model, weights, frames = trained
    errors = prednet_reference(frames, weights, STACK, R_STACK, output_mode="error")  # (batch, nt, L)
    layer_w = np.array([1, 0.1, 0.1])
    time_w = np.array([0] + [1 / (NT - 1)] * (NT - 1))
    expected = (errors * layer_w).sum(-1) @ time_w
    got = model.predict(frames, verbose=0)
    assert got.shape == (3, 1)
    np.testing.assert_allclose(got[:, 0], expected, rtol=1e-5)
    # With MAE against zeros (non-negative errors), Keras' loss is the batch mean.
    model.compile(optimizer="adam", loss="mean_absolute_error")
    np.testing.assert_allclose(model.evaluate(frames, np.zeros((3, 1)), verbose=0), expected.mean(), rtol=1e-5)


def test_prediction_model_shares_weights_and_modes(trained):
    model, weights, frames = trained
    predictor = prednet_keras.build_prediction_model(model)
    expected = prednet_reference(frames, weights, STACK, R_STACK, output_mode="prediction")
    np.testing.assert_allclose(predictor.predict(frames, verbose=0), expected, atol=2e-5)
    longer = np.concatenate([frames, frames[:, :3]], axis=1)
    extrap = prednet_keras.build_prediction_model(model, nt=8, extrap_start_time=5)
    expected = prednet_reference(longer, weights, STACK, R_STACK, output_mode="prediction", extrap_start_time=5)
    np.testing.assert_allclose(extrap.predict(longer, verbose=0), expected, atol=2e-5)
    r1 = prednet_keras.build_prediction_model(model, output_mode="R1")
    assert r1.output_shape == (None, NT, 4, 6, 5)


@pytest.mark.slow  # a fresh process or a training: the full suite, not the fast loop
def test_training_model_round_trips_through_a_keras_file_in_a_fresh_process(trained, tmp_path):
    model, weights, frames = trained
    model.compile(optimizer="adam", loss="mean_absolute_error")
    path = tmp_path / "train.keras"
    model.save(path)
    np.save(tmp_path / "frames.npy", frames)
    script = (
        "import sys, numpy as np, prednet_keras, keras;"
        "m = keras.saving.load_model(sys.argv[1]);"
        "np.save(sys.argv[3], m.predict(np.load(sys.argv[2]), verbose=0))"
    )
    subprocess.run([sys.executable, "-c", script, str(path), str(tmp_path / "frames.npy"), str(tmp_path / "o.npy")],
                   check=True)
    # Same weights and graph; another process may pick other CPU kernels, so round-off is allowed.
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"), model.predict(frames, verbose=0), rtol=1e-6, atol=1e-7)


def test_find_prednet_errors():
    inputs = keras.Input((4,))
    with pytest.raises(ValueError, match="found 0"):
        prednet_keras.find_prednet(keras.Model(inputs, keras.layers.Dense(1)(inputs)))


def test_the_models_face_offers_the_public_names_of_models_lotter_and_the_starting_points():
    from prednet_keras import models
    from prednet_keras.models import lotter, starting_point

    documented = ["data_order", "initial_weights", "load_initial_weights", "order_checksum", "save_initial_weights",
                  "weights_checksum"]  # docs/runtime.md, "Identical starting points"
    assert sorted(models.__all__) == sorted(lotter.__all__ + documented)
    assert all(getattr(models, name) is getattr(lotter, name) for name in lotter.__all__)
    assert all(getattr(models, name) is getattr(starting_point, name) for name in documented)
    assert prednet_keras.build_training_model is models.build_training_model
    with pytest.raises(AttributeError):
        models.count_parameters  # noqa: B018 (public in lotter's module only)


def test_the_models_face_offers_exactly_the_public_names_of_its_modules():
    # The face names them as literals (it loads nothing until a name is used, and the public-API test reads
    # faces from source), so its list is checked against the modules' own __all__ here.
    from prednet_keras import models
    from prednet_keras.models import lotter, starting_point

    lotter_names = set(lotter.__all__)
    assert lotter_names <= set(models.__all__)
    assert set(models.__all__) - lotter_names <= set(starting_point.__all__)
    assert all(getattr(models, name) is getattr(lotter if name in lotter_names else starting_point, name)
               for name in models.__all__)
