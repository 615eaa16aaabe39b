"""The MNIST autoencoders: architectures, one-image-per-update training, .keras round trip."""

import numpy as np
import pytest

import keras
from prednet_keras.models import starting_point
from prednet_keras.models.autoencoder import (
    autoencoder_mse,
    build_autoencoder,
    mean_image_mse,
    mnist_images,
    reconstruction_grid,
)
from prednet_keras.data import load_mnist
from prednet_keras.models.autoencoder_protocol import TORCH_CPU_BATCH_1_BUG, autoencoder_order, train_autoencoder
from prednet_keras.models.protocols import AutoencoderProtocol, BackendCannotTrainThis


@pytest.fixture(scope="module")
def mnist():
    return load_mnist()


def test_architectures():
    conv = build_autoencoder("conv")
    dense = build_autoencoder("dense")
    assert conv.count_params() == 3217 and dense.count_params() == 101200
    assert conv.get_layer("code").output.shape == (None, 7, 7, 8)
    assert dense.get_layer("code").output.shape == (None, 64)
    for model in (conv, dense):
        assert model.output.shape == (None, 28, 28, 1)
        starting_point.initial_weights(model, 0)  # every weight has a numpy equivalent
    with pytest.raises(ValueError, match="Unknown autoencoder"):
        build_autoencoder("vae")


def test_image_order_is_seeded_and_chains_passes():
    order = autoencoder_order(10, 25, seed=3)
    assert len(order) == 25
    np.testing.assert_array_equal(order[:10], starting_point.data_order(10, 3))
    np.testing.assert_array_equal(order[10:20], starting_point.data_order(10, 3, epoch=1))
    assert sorted(order[:10]) == list(range(10))


@pytest.mark.parametrize("kind, images, ratio", [("conv", 1000, 0.4), ("dense", 1500, 0.6)])
def test_short_training_beats_the_mean_image(mnist, kind, images, ratio, tmp_path):
    protocol = AutoencoderProtocol("short", images=images, metric_images=200, eval_images=1000)
    seen = []
    try:
        result = train_autoencoder(kind, protocol=protocol, mnist=mnist, seed=0, on_update=seen.append)
    except BackendCannotTrainThis as refusal:
        if TORCH_CPU_BATCH_1_BUG not in str(refusal):
            raise
        pytest.skip(f"refused as documented: {refusal}")  # KERAS_BACKEND=torch on a CPU
    summary = result.summary
    assert len(result.records) == images == summary["updates"] and seen == result.records
    assert [r["image"] for r in result.records] == autoencoder_order(60000, images, 0).tolist()
    assert result.metric["name"] == "mean_last_200_images"
    assert result.metric["value"] == pytest.approx(np.mean(result.logged[-200:]))
    # Clearly below always answering the mean training image, on held-out digits.
    assert summary["test_mse"] < ratio * summary["mean_image_test_mse"], summary
    assert summary["mean_image_test_mse"] == pytest.approx(mean_image_mse(mnist[0][0], mnist[1][0][:1000]))
    assert summary["eval_images"] == {"train": 1000, "test": 1000}

    path = tmp_path / "ae.keras"
    result.model.save(path)
    loaded = keras.saving.load_model(path)
    test = mnist[1][0][:50]
    assert autoencoder_mse(loaded, test) == pytest.approx(autoencoder_mse(result.model, test), rel=1e-6)
    grid = reconstruction_grid(loaded, test, count=5)
    assert grid.shape == (56, 140) and 0 <= grid.min() and grid.max() <= 1


def test_logged_loss_is_the_images_own(mnist):
    """Each logged value is the MSE of that image under the weights before its update."""
    model = build_autoencoder("dense")
    for variable, value in zip(model.weights, starting_point.initial_weights(model, 5).values()):
        variable.assign(value)
    order = autoencoder_order(60000, 2, 5)
    expected = autoencoder_mse(model, mnist[0][0][order[:1]])
    result = train_autoencoder("dense", protocol=AutoencoderProtocol("two", images=2, metric_images=1, eval_images=10),
                               mnist=mnist, seed=5)
    assert result.records[0]["loss"] == pytest.approx(expected, rel=1e-5)
    assert result.records[1]["image"] == order[1]
    assert mnist_images(mnist[0][0][:2]).dtype == np.float32
