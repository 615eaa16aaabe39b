"""Importing the study's Chainer model files (npz layout of serializers.save_npz) and prednet-import --from chainer."""

import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import keras
from prednet_keras.cli.imports import main as import_main
from prednet_keras.formats.chainer import (
    ChainerFormatError,
    import_chainer_model,
    load_chainer_weights,
    read_chainer_arrays,
    save_chainer_npz,
)
from prednet_keras.layers.chainer import ChainerPredNet

from tests.study_models import numpy_chainer as ref

STACK, R_STACK, FRAME = (3, 4, 6), (3, 5, 6), (8, 12)


@pytest.fixture(scope="module")
def chainer_file(tmp_path_factory):
    """A file laid out as `serializers.save_npz(path, L.Classifier(PredNet(12, 8, (3, 4, 6), (3, 5, 6))))`."""
    folder = tmp_path_factory.mktemp("chainer")
    rng = np.random.default_rng(7)
    w = ref.random_weights(STACK, R_STACK, 3, FRAME[0], FRAME[1], rng)
    path = folder / "prednet_8x12.model"
    with open(path, "wb") as handle:  # main.py's names have no .npz suffix
        np.savez(handle, **{f"predictor/{key}": value for key, value in w.items()})
    frames = rng.random((2, 5) + FRAME + (3,)).astype("float32")
    want = np.stack([ref.run(seq, w, STACK, R_STACK)[0] for seq in frames])
    return dict(path=path, w=w, frames=frames, want=want, folder=folder)


def test_layout_is_the_original_one(chainer_file):
    arrays = read_chainer_arrays(chainer_file["path"])
    assert arrays["ConvLSTM0/c_i/W"].shape == (1, 3, 8, 12)
    assert arrays["ConvLSTM1/x_o1/W"].shape == (5, 6, 3, 3)  # up(r_2) into layer 1's LSTM
    assert arrays["ConvA2/W"].shape == (6, 8, 3, 3) and "ConvA0/W" not in arrays
    assert "ConvLSTM0/x_i0/b" not in arrays and "ConvLSTM0/h_i/b" in arrays


def test_import_matches_numpy(chainer_file):
    model = import_chainer_model(chainer_file["path"])
    layer = model.layers[-1]
    assert layer.frame_size == FRAME and layer.stack_sizes == list(STACK) and layer.R_stack_sizes == list(R_STACK)
    np.testing.assert_allclose(model.predict(chainer_file["frames"], verbose=0), chainer_file["want"], atol=2e-5)


def test_save_chainer_npz_round_trip(chainer_file, tmp_path):
    model = import_chainer_model(chainer_file["path"])
    out = tmp_path / "again.npz"
    save_chainer_npz(model, out)
    with np.load(out) as saved, np.load(chainer_file["path"]) as original:
        assert sorted(saved.files) == sorted(original.files)
        for key in original.files:
            np.testing.assert_array_equal(saved[key], original[key], err_msg=key)


def test_mismatches_are_explained_and_assign_nothing(chainer_file):
    path = chainer_file["path"]
    other_size = ChainerPredNet(STACK, R_stack_sizes=R_STACK)
    other_size.build((1, None, 16, 24, 3))
    with pytest.raises(ValueError, match=r"trained on 8x12 frames .* this layer is for 16x24 .*--size 8x12"):
        load_chainer_weights(other_size, path)
    other_channels = ChainerPredNet((3, 4, 7))
    other_channels.build((1, None) + FRAME + (3,))
    before = [keras.ops.convert_to_numpy(v).copy() for v in other_channels.weights]
    with pytest.raises(ValueError, match=r"stack_sizes \(3, 4, 6\) but this layer has \(3, 4, 7\)"):
        load_chainer_weights(other_channels, path)
    assert all(np.array_equal(a, keras.ops.convert_to_numpy(b)) for a, b in zip(before, other_channels.weights))
    with pytest.raises(ValueError, match=r"trained on 8x12 frames .* cannot run on 16x24"):
        import_chainer_model(path, size=(16, 24))


def test_bad_files(chainer_file, tmp_path):
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ChainerFormatError, match="not a NumPy .npz archive"):
        import_chainer_model(junk)
    state = tmp_path / "100.state"
    np.savez(open(state, "wb"), **{"predictor/ConvP0/W/m": np.zeros(3), "predictor/ConvP0/W/v": np.zeros(3), "t": 1})
    with pytest.raises(ChainerFormatError, match="optimizer state"):
        import_chainer_model(state)
    missing = tmp_path / "missing.npz"
    with np.load(chainer_file["path"]) as original:
        np.savez(missing, **{k: original[k] for k in original.files if k != "predictor/ConvLSTM1/h_f/b"})
    with pytest.raises(ValueError, match="missing in the file: ConvLSTM1/h_f/b"):
        import_chainer_model(missing)
    with pytest.raises(FileNotFoundError):
        import_chainer_model(tmp_path / "absent.model")


def test_prednet_import_from_chainer(chainer_file, tmp_path):
    output = tmp_path / "study.keras"
    args = ["--from", "chainer", str(chainer_file["path"]), "-o", str(output), "--size", "8x12"]
    result = CliRunner().invoke(import_main, args)
    assert result.exit_code == 0, result.output
    assert "ChainerPredNet [3, 4, 6], frames 8x12" in result.output
    np.save(tmp_path / "frames.npy", chainer_file["frames"])
    # A fresh process, as a user would (the layer module registers ChainerPredNet).
    script = (
        "import sys, numpy as np, prednet_keras.layers.chainer, keras;"
        "m = keras.saving.load_model(sys.argv[1]);"
        "np.save(sys.argv[3], keras.ops.convert_to_numpy(m(np.load(sys.argv[2]))))"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(output), str(tmp_path / "frames.npy"), str(tmp_path / "out.npy")], check=True
    )
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), chainer_file["want"], atol=2e-5)


def test_prednet_import_from_chainer_user_errors(chainer_file, tmp_path):
    runner = CliRunner()
    path = str(chainer_file["path"])
    result = runner.invoke(import_main, ["--from", "chainer", path, "-o", str(tmp_path / "a.keras"), "--size", "16x24"])
    assert result.exit_code == 1 and "trained on 8x12 frames" in result.output and "Traceback" not in result.output
    result = runner.invoke(import_main, ["--from", "chainer", path, "extra.h5", "-o", str(tmp_path / "b.keras")])
    assert result.exit_code == 2 and "takes one file" in result.output
    result = runner.invoke(import_main, [path, "-o", str(tmp_path / "c.keras")])
    assert result.exit_code == 2 and "WEIGHTS_H5" in result.output
    args = ["--from", "chainer", path, "-o", str(tmp_path / "d.keras"), "--output-mode", "Q"]
    result = runner.invoke(import_main, args)
    assert result.exit_code == 1 and "Unknown output_mode 'Q'" in result.output
    assert not any(p.name.endswith(".keras") for p in tmp_path.iterdir())
