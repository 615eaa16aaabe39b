"""Model files that cannot be loaded: the message names the file and keeps the cause whole."""

import zipfile

import pytest

from prednet_keras import pretrained
from prednet_keras.formats.keras_files import ModelFileError, load_model


def test_unknown_class_names_the_cause_without_the_config_dump(tmp_path):
    # A .keras file naming a layer class nobody registered (a file from a newer version, or edited).
    broken = tmp_path / "unknown-layer.keras"
    with zipfile.ZipFile(pretrained.path() / "model.keras") as source, zipfile.ZipFile(broken, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "config.json":
                data = data.replace(b'PredNet"', b'PredNetFromTheFuture"')
            target.writestr(item, data)
    with pytest.raises(ModelFileError) as caught:
        load_model(broken)
    message = str(caught.value)
    assert message.startswith(f"{broken} could not be loaded: ")
    assert "Cause: Could not locate class 'PredNetFromTheFuture'" in message
    assert message.endswith("so that the decorator is run before trying to load them.")
    assert "stack_sizes" not in message and "{" not in message  # no object config dumped


def test_a_model_with_nan_weights_is_refused_and_nan_predictions_have_no_score(tmp_path):
    """A diverged or corrupted model: prednet-eval fails with one line and writes no scores. (NaN weights
    can still give finite frames through the clipping layers; NaN predictions used to score a perfect PSNR,
    min(cap, nan) being the cap.)"""
    import numpy as np
    from click.testing import CliRunner

    import prednet_keras
    from prednet_keras.cli.eval import main as eval_main
    from prednet_keras.evaluate import EvalError
    from prednet_keras.evaluate.scoring import compute_scores
    from prednet_keras.formats.keras_files import save_model_atomically

    model = prednet_keras.build_training_model(nt=4, frame_shape=(16, 16, 3), stack_sizes=(3, 4),
                                               R_stack_sizes=(3, 4), A_filt_sizes=(3,), Ahat_filt_sizes=(3, 3),
                                               R_filt_sizes=(3, 3))
    kernel = next(w for w in model.weights if "layer_ahat_0" in w.path and "kernel" in w.path)
    kernel.assign(np.full(kernel.shape, np.nan, dtype="float32"))
    save_model_atomically(model, tmp_path / "nan.keras")
    frames = (np.random.default_rng(0).random((8, 16, 16, 3)) * 255).astype("uint8")
    np.savez(tmp_path / "frames.npz", frames=frames)
    result = CliRunner().invoke(eval_main, [str(tmp_path / "nan.keras"), "--data", str(tmp_path / "frames.npz"),
                                            "--nt", "4", "-o", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert f"{tmp_path / 'nan.keras'}: weight " in result.output and "layer_ahat_0" in result.output
    assert "NaN or infinite values" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()

    actual = np.zeros((2, 4, 16, 16, 3), "float32")
    predicted = actual.copy()
    predicted[1, 2, 0, 0, 0] = np.nan
    with pytest.raises(EvalError, match=r"predicts NaN or infinite values \(1 of 6,144; first in sequence 1, step 2\)"):
        compute_scores(actual, predicted)
