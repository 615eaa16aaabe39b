"""The authors' released models by name (pretrained.load("prednet-kitti"), prednet-eval prednet-kitti): the
zip of download_models.sh fetched from a local server, converted by the importer, cached as a .keras file,
and later loaded from the cache with no network."""

import os
import socket

import keras
import numpy as np
import pytest
from click.testing import CliRunner

from prednet_keras import pretrained
from prednet_keras.cli.eval import main as eval_main
from prednet_keras.files.records import ChecksumError
from prednet_keras.pretrained import released
from tests.kitti_files import FILT, R_STACK, STACK, model_zip
from tests.layers.numpy_prednet import prednet_reference, random_weights
from tests.loopback_server import LoopbackServer

ZIP = "prednet_kitti_model.zip"
EXTRAP_ZIP = "prednet_kitti_model-extrapfinetuned.zip"


@pytest.fixture
def authors(tmp_path, monkeypatch):
    weights = random_weights(STACK, R_STACK, FILT, np.random.default_rng(7))
    (tmp_path / "made").mkdir()
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with LoopbackServer() as server:
        server.files[ZIP] = model_zip(tmp_path / "made", weights)
        server.files[EXTRAP_ZIP] = model_zip(
            tmp_path / "made", weights, json_name="prednet_kitti_model-extrapfinetuned.json",
            weights_name="prednet_kitti_weights-extrapfinetuned.hdf5", nt=15, extrap_start_time=10,
            output_mode="prediction", theano_copy=False)
        monkeypatch.setenv("PREDNET_MIRROR_URL", server.url)
        server.weights = weights
        yield server


def closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_fetched_once_converted_cached_then_loaded_offline(authors, monkeypatch):
    model = pretrained.load("prednet-kitti", progress=False)
    folder = released.model_folder()
    assert sorted(os.listdir(folder)) == [".lock", "checksums.json", "prednet-kitti.keras"]
    assert tuple(model.inputs[0].shape[1:]) == (10, 8, 8, 3)
    # The TensorFlow-backend weights were taken (the Theano copy beside them has flipped kernels).
    frames = np.random.default_rng(1).random((2, 10, 8, 8, 3)).astype("float32")
    expected = prednet_reference(frames, authors.weights, STACK, R_STACK, output_mode="prediction")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(frames)), expected, atol=2e-5)
    # Later loads read the cache: with every host unreachable.
    monkeypatch.setenv("PREDNET_MIRROR_URL", f"http://127.0.0.1:{closed_port()}")
    again = pretrained.load("prednet-kitti")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(again(frames)), expected, atol=2e-5)
    assert authors.requests == [(ZIP, None)]


def test_the_extrapolation_model_keeps_its_15_steps_from_step_10(authors):
    model = pretrained.load("prednet-kitti-extrapolation", progress=False)
    layer = model.layers[-1]
    assert tuple(model.inputs[0].shape[1:]) == (15, 8, 8, 3)
    assert (layer.output_mode, layer.extrap_start_time) == ("prediction", 10)
    assert set(released.names()) == set(pretrained.released_names()) == {"prednet-kitti",
                                                                         "prednet-kitti-extrapolation"}


def test_prednet_eval_scores_a_released_model_by_name(authors, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(eval_main, ["prednet-kitti", "--plots", "1"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "prednet-kitti: MSE " in result.output
    assert (tmp_path / "prednet-kitti-eval" / "prediction_scores.txt").is_file()  # not in the cache folder
    assert not [name for name in os.listdir(released.model_folder()) if "eval" in name]


def test_a_changed_cached_model_is_refused(authors):
    path = released.model_path("prednet-kitti", progress=False)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.with_suffix(".new").write_bytes(bytes(data))
    os.replace(path.with_suffix(".new"), path)
    with pytest.raises(ChecksumError, match="prednet-kitti.keras: SHA-256 .* delete it to fetch and convert"):
        pretrained.load("prednet-kitti")
    result = CliRunner().invoke(eval_main, ["prednet-kitti"], catch_exceptions=False)
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert result.output.startswith(f"Error: {path}: SHA-256 ")
    # Deleted: fetched and converted again.
    path.unlink()
    assert released.model_path("prednet-kitti", progress=False).is_file()
    assert [name for name, _ in authors.requests] == [ZIP, ZIP]


def test_an_archive_without_the_model_is_refused_and_removed(authors):
    authors.files[ZIP] = authors.files[EXTRAP_ZIP]  # another model's files
    with pytest.raises(ValueError, match=r"prednet_kitti_model.zip: not the authors' model archive "
                                         r"\(prednet_kitti_model.json missing\); removed."):
        released.model_path("prednet-kitti", progress=False)
    assert sorted(os.listdir(released.model_folder())) == [".lock", "checksums.json"]
    authors.faults[ZIP] = ("silent",)
    with pytest.raises(ValueError, match="no answer from 127.0.0.1:.* within 0.3 s"):
        released.model_path("prednet-kitti", timeout=0.3, progress=False)
    assert sorted(os.listdir(released.model_folder())) == [".lock", "checksums.json"]
