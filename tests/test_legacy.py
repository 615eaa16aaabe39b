"""Loading the authors' released Keras 2 files: load_legacy_weights and prednet-import."""

import subprocess
import sys

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

import keras
from prednet_keras import PredNet, load_legacy_weights
from prednet_keras.cli.imports import main as import_main
from prednet_keras.formats.keras2 import LegacyFormatError

from tests.layers.numpy_prednet import prednet_reference, random_weights
from tests.legacy_files import write_model_json, write_weights_h5

STACK, R_STACK, FILT, FRAME = (3, 4, 6), (3, 5, 6), 3, (8, 12)
NT = 5


@pytest.fixture()
def released(tmp_path):
    rng = np.random.default_rng(3)
    weights = random_weights(STACK, R_STACK, FILT, rng)
    frames = rng.random((2, NT) + FRAME + (3,)).astype("float32")
    json_path = tmp_path / "prednet_model.json"
    write_model_json(json_path, STACK, R_STACK, FILT, NT, FRAME)
    full = tmp_path / "prednet_weights.hdf5"
    write_weights_h5(full, weights, full_model=True, nt=NT)
    weights_only = tmp_path / "prednet_weights_only.h5"
    write_weights_h5(weights_only, weights, full_model=False, nt=NT)
    return dict(weights=weights, frames=frames, json=json_path, full=full, weights_only=weights_only, dir=tmp_path)


def new_layer(output_mode="prediction"):
    layer = PredNet(STACK, R_STACK, [FILT] * 2, [FILT] * 3, [FILT] * 3, output_mode=output_mode, return_sequences=True)
    layer.build((None, NT) + FRAME + (3,))
    return layer


@pytest.mark.parametrize("variant", ["full", "weights_only"])
def test_load_legacy_weights_into_layer_matches_numpy(released, variant):
    layer = new_layer()
    load_legacy_weights(layer, str(released[variant]))
    expected = prednet_reference(released["frames"], released["weights"], STACK, R_STACK, output_mode="prediction")
    got = keras.ops.convert_to_numpy(layer(released["frames"]))
    np.testing.assert_allclose(got, expected, atol=2e-5)


def test_load_legacy_weights_into_model(released):
    inputs = keras.Input((NT,) + FRAME + (3,))
    model = keras.Model(inputs, PredNet(STACK, R_STACK, [FILT] * 2, [FILT] * 3, [FILT] * 3, return_sequences=True)(inputs))
    load_legacy_weights(model, str(released["full"]))
    expected = prednet_reference(released["frames"], released["weights"], STACK, R_STACK, output_mode="error")
    np.testing.assert_allclose(model.predict(released["frames"], verbose=0), expected, atol=2e-5)


def test_shape_mismatch_names_the_array_and_assigns_nothing(released):
    layer = PredNet(STACK, (3, 5, 7), [FILT] * 2, [FILT] * 3, [FILT] * 3)
    layer.build((None, NT) + FRAME + (3,))
    before = [w.numpy().copy() if hasattr(w, "numpy") else keras.ops.convert_to_numpy(w) for w in layer.weights]
    with pytest.raises(ValueError, match=r"layer_c_2/kernel: file \(3, 3, 18, 6\) vs layer \(3, 3, 19, 7\)"):
        load_legacy_weights(layer, str(released["full"]))
    after = [keras.ops.convert_to_numpy(w) for w in layer.weights]
    assert all(np.array_equal(a, b) for a, b in zip(before, after))


def test_layer_count_mismatch_lists_missing_arrays(released):
    layer = PredNet((3, 4), (3, 5), [FILT], [FILT] * 2, [FILT] * 2)
    layer.build((None, NT) + FRAME + (3,))
    with pytest.raises(ValueError, match="not in the layer: layer_a_1/bias"):
        load_legacy_weights(layer, str(released["full"]))


def test_file_without_prednet_is_refused(tmp_path):
    path = tmp_path / "other.h5"
    with h5py.File(path, "w") as handle:
        handle.create_dataset("model_weights/dense_1/dense_1/kernel:0", data=np.ones((2, 2)))
    with pytest.raises(LegacyFormatError, match="does not hold a PredNet"):
        load_legacy_weights(new_layer(), str(path))


def test_unreadable_and_missing_files(tmp_path):
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"not hdf5 at all")
    with pytest.raises(LegacyFormatError, match="not a readable HDF5 file"):
        load_legacy_weights(new_layer(), str(junk))
    with pytest.raises(FileNotFoundError):
        load_legacy_weights(new_layer(), str(tmp_path / "absent.h5"))


def test_theano_weights_are_refused(released, tmp_path):
    path = tmp_path / "theano.h5"
    write_weights_h5(path, released["weights"], backend="theano", nt=NT)
    with pytest.raises(LegacyFormatError, match="Theano"):
        load_legacy_weights(new_layer(), str(path))


@pytest.mark.slow  # a fresh process or a training: the full suite, not the fast loop
def test_prednet_import_writes_a_loadable_keras_file(released, tmp_path):
    output = tmp_path / "imported.keras"
    result = CliRunner().invoke(import_main, [str(released["json"]), str(released["full"]), "-o", str(output)])
    assert result.exit_code == 0, result.output
    assert "output_mode=prediction" in result.output
    # A fresh process, as a user would: import prednet_keras registers the layers.
    np.save(tmp_path / "frames.npy", released["frames"])
    script = (
        "import sys, numpy as np, prednet_keras, keras;"
        "m = keras.saving.load_model(sys.argv[1]);"
        "np.save(sys.argv[3], keras.ops.convert_to_numpy(m(np.load(sys.argv[2]))))"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(output), str(tmp_path / "frames.npy"), str(tmp_path / "out.npy")],
        check=True,
    )
    expected = prednet_reference(released["frames"], released["weights"], STACK, R_STACK, output_mode="prediction")
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, atol=2e-5)


def test_prednet_import_legacy_keys_nt_and_extrapolation(released, tmp_path):
    json_path = tmp_path / "keras1.json"
    write_model_json(json_path, STACK, R_STACK, FILT, NT, FRAME, legacy_ordering=True, consume_less="gpu")
    output = tmp_path / "extrap.keras"
    args = [str(json_path), str(released["weights_only"]), "-o", str(output), "--nt", "7", "--extrap-start", "4"]
    result = CliRunner().invoke(import_main, args)
    assert result.exit_code == 0, result.output
    model = keras.saving.load_model(output)
    frames = np.random.default_rng(0).random((1, 7) + FRAME + (3,)).astype("float32")
    expected = prednet_reference(frames, released["weights"], STACK, R_STACK, "prediction", extrap_start_time=4)
    np.testing.assert_allclose(model.predict(frames, verbose=0), expected, atol=2e-5)


def test_prednet_import_user_errors(released, tmp_path):
    runner = CliRunner()
    existing = tmp_path / "exists.keras"
    existing.write_bytes(b"precious")
    result = runner.invoke(import_main, [str(released["json"]), str(released["full"]), "-o", str(existing)])
    assert result.exit_code != 0 and "--overwrite" in result.output
    assert existing.read_bytes() == b"precious"

    result = runner.invoke(import_main, [str(tmp_path / "nope.json"), str(released["full"]), "-o", str(tmp_path / "a.keras")])
    assert result.exit_code == 1 and "Model JSON not found" in result.output and "Traceback" not in result.output

    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    result = runner.invoke(import_main, [str(bad_json), str(released["full"]), "-o", str(tmp_path / "b.keras")])
    assert result.exit_code == 1 and "not valid JSON" in result.output

    result = runner.invoke(
        import_main, [str(released["json"]), str(released["full"]), "-o", str(tmp_path / "c.keras"), "--output-mode", "Q3"]
    )
    assert result.exit_code == 1 and "Unknown output_mode 'Q3'" in result.output
    assert not any(p.name.startswith(("b.", "c.", ".tmp")) for p in tmp_path.iterdir())
