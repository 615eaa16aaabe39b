"""prednet-eval end to end: scores equal a direct computation, files, comparisons, refusals."""

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from prednet_keras.cli.eval import main as eval_main

# Slow (a trained run and prednet-eval in subprocesses): in the full suite, not in the fast loop (pytest -m "not slow").
pytestmark = pytest.mark.slow


def _invoke(args):
    return CliRunner().invoke(eval_main, [str(a) for a in args])


def _direct_predictions(model_path, nt, size, extrap_start=None, data=None):
    """Predictions and frames computed without prednet-eval's code paths."""
    import keras

    import prednet_keras
    from prednet_keras import data as pdata

    frames = pdata.load_frames(data or pdata.embedded_dataset("test"), size=size)
    X = pdata.SequenceGenerator(frames, nt, sequence_start_mode="unique", output_mode="prediction").create_all()
    trained = keras.saving.load_model(model_path)
    predictor = prednet_keras.build_prediction_model(trained, nt=nt, extrap_start_time=extrap_start)
    return X, np.asarray(predictor.predict(X, verbose=0))


def test_scores_match_a_direct_computation(trained_run):
    folder, _ = trained_run
    result = _invoke([folder])
    assert result.exit_code == 0, result.output
    out = folder / "eval"
    scores = json.loads((out / "prediction_scores.json").read_text())

    X, Xhat = _direct_predictions(folder / "model.keras", 4, (32, 32))
    mse_model = np.mean((X[:, 1:] - Xhat[:, 1:]) ** 2)
    mse_prev = np.mean((X[:, :-1] - X[:, 1:]) ** 2)
    assert scores["sequences"] == len(X) == 120 // 4
    assert scores["mse_model"] == pytest.approx(mse_model, rel=1e-5)
    assert scores["mse_prev"] == pytest.approx(mse_prev, rel=1e-6)
    per_step = [np.mean((X[:, t] - Xhat[:, t]) ** 2) for t in range(4)]
    assert scores["per_step"]["mse_model"] == pytest.approx(per_step, rel=1e-5)
    assert scores["per_step"]["mse_prev"][0] is None

    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    ssim = np.mean([structural_similarity(X[i, t], Xhat[i, t], data_range=1.0, channel_axis=-1)
                    for i in range(len(X)) for t in range(1, 4)])
    psnr = np.mean([peak_signal_noise_ratio(X[i, t], Xhat[i, t], data_range=1.0)
                    for i in range(len(X)) for t in range(1, 4)])
    assert scores["ssim_model"] == pytest.approx(ssim, rel=1e-4)
    assert scores["psnr_model"] == pytest.approx(psnr, rel=1e-4)

    text = (out / "prediction_scores.txt").read_text().splitlines()
    assert text[0] == f"Model MSE: {scores['mse_model']:f}"
    assert text[1] == f"Previous Frame MSE: {scores['mse_prev']:f}"
    plots = sorted(p.name for p in (out / "prediction_plots").iterdir())
    # Numbered 01..10, each naming the test sequence it draws (evenly spread over the 30).
    assert plots == [f"plot_{n + 1:02d}_sequence_{i:03d}.png"
                     for n, i in enumerate([0, 3, 6, 10, 13, 16, 19, 23, 26, 29])]
    assert scores["plots"] == [0, 3, 6, 10, 13, 16, 19, 23, 26, 29]
    assert "plot_NN_sequence_III.png is plot NN, of test sequence III" in (out / "prediction_scores.txt").read_text()
    assert (out / "per_step.png").stat().st_size > 0
    assert scores["model"]["checksum"].startswith("sha256:")
    assert "MSE" in result.output and str(out) in result.output
    # The summary says in words how the model compares with copying the last frame.
    verdict = "better than copying the last frame" if scores["mse_ratio"] < 1 else "worse than copying the last frame"
    assert "x the previous frame's error" in result.output and verdict in result.output

    again = _invoke([folder])
    assert again.exit_code != 0 and "exists; pass --overwrite" in again.output
    assert json.loads((out / "prediction_scores.json").read_text()) == scores


def test_precision_of_the_evaluation(trained_run, tmp_path):
    folder, _ = trained_run
    result = _invoke([folder, "--precision", "mixed_bfloat16", "--plots", "0", "-o", tmp_path / "bf16"])
    assert result.exit_code == 0, result.output
    assert "mixed_bfloat16" in result.output
    scores = json.loads((tmp_path / "bf16" / "prediction_scores.json").read_text())
    assert scores["environment"]["precision"] == "mixed_bfloat16"
    X, Xhat = _direct_predictions(folder / "model.keras", 4, (32, 32))
    mse_model = np.mean((X[:, 1:] - Xhat[:, 1:]) ** 2)
    # bfloat16 convolutions: close to the float32 score, not equal to it.
    assert scores["mse_model"] == pytest.approx(mse_model, rel=2e-2) and scores["mse_model"] != pytest.approx(mse_model, rel=1e-6)
    assert scores["mse_prev"] == pytest.approx(np.mean((X[:, :-1] - X[:, 1:]) ** 2), rel=1e-6)


def test_extrapolation_and_other_data(trained_run, tiny_npz, tmp_path):
    folder, _ = trained_run
    result = _invoke([folder / "model.keras", "--extrap-start", "2", "--data", tiny_npz, "--plots", "2", "-o", tmp_path / "ex"])
    assert result.exit_code == 0, result.output
    scores = json.loads((tmp_path / "ex" / "prediction_scores.json").read_text())
    X, Xhat = _direct_predictions(folder / "model.keras", 4, (32, 32), extrap_start=2, data=tiny_npz)
    extrap = scores["extrapolation"]
    assert extrap["start"] == 2 and extrap["steps"] == 2
    assert extrap["mse_model"] == pytest.approx(np.mean((X[:, 2:] - Xhat[:, 2:]) ** 2), rel=1e-5)
    assert extrap["mse_last_seen"] == pytest.approx(np.mean((X[:, 2:] - X[:, 1:2]) ** 2), rel=1e-6)
    assert scores["data"]["source"] == str(tiny_npz)
    assert len(list((tmp_path / "ex" / "prediction_plots").iterdir())) == 2

    bad = _invoke([folder, "--extrap-start", "4", "-o", tmp_path / "bad"])
    assert bad.exit_code != 0 and "--extrap-start 4 leaves nothing to extrapolate" in bad.output


def test_folder_of_runs_gives_a_comparison(trained_run, tmp_path):
    folder, _ = trained_run
    weights = tmp_path / "weights"
    for name in ("first", "second"):
        shutil.copytree(folder, weights / name, ignore=shutil.ignore_patterns("eval*"))
    (weights / "notes").mkdir()
    result = _invoke([weights, "--plots", "1"])
    assert result.exit_code == 0, result.output
    comparison = weights / "eval-comparison"
    rows = json.loads((comparison / "comparison.json").read_text())
    assert sorted(r["model"] for r in rows) == ["first", "second"]
    assert rows[0]["mse_model"] == pytest.approx(rows[1]["mse_model"])
    for name in ("comparison.txt", "comparison.csv", "comparison.png"):
        assert (comparison / name).stat().st_size > 0
    for name in ("first", "second"):
        assert (weights / name / "eval" / "prediction_scores.json").is_file()
    assert "mse_model" in result.output and "first" in result.output


def _file(path, content):
    path.write_bytes(content)
    return path


def _folder(path):
    path.mkdir()
    return path


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p / "missing", "no such file or folder"),
        (lambda p: _file(p / "notes.txt", b"x"), "not a .keras model file"),
        (lambda p: _folder(p / "empty"), "neither a run folder"),
        (lambda p: _file(p / "broken.keras", b"truncated"), "not a Keras 3 .keras file"),
    ],
)
def test_bad_model_arguments_are_one_clear_line(tmp_path, make, message):
    result = _invoke([make(tmp_path)])
    assert result.exit_code != 0
    assert message in result.output, result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_backend_and_device_follow_the_rule_every_command_follows(trained_run, tmp_path):
    # Issue 39: the README's one rule for --backend/--device did not hold for prednet-eval, which had neither.
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "CUDA_VISIBLE_DEVICES")}
    env["CUDA_VISIBLE_DEVICES"] = ""  # no GPU here, whatever the machine has

    def evaluate(*args):
        return subprocess.run([sys.executable, "-m", "prednet_keras.cli.eval", trained_run[0], "--plots", "0",
                               "-o", tmp_path / "eval", "--overwrite", *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300)

    done = evaluate("--backend", "jax")
    assert done.returncode == 0, done.stdout + done.stderr
    scores = json.loads((tmp_path / "eval" / "prediction_scores.json").read_text())
    assert scores["environment"]["backend"] == "jax"
    before = (tmp_path / "eval" / "prediction_scores.json").read_bytes()
    refused = evaluate("--backend", "jax", "--device", "gpu")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith("Error: ") and "for device gpu" in refused.stderr and refused.stderr.count("\n") == 1
    assert (tmp_path / "eval" / "prediction_scores.json").read_bytes() == before


def test_an_output_that_cannot_be_written_is_refused_before_any_model_is_scored(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "afile").write_text("x")
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    result = subprocess.run([sys.executable, "-m", "prednet_keras.cli.eval", "prednet-embedded", "-o", "afile/eval"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 1 and result.stderr == "Error: afile/eval cannot be made: afile is a file, not a folder.\n"
    assert "MSE" not in result.stdout and sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_the_embedded_video_path_is_data_as_any_dataset_file(copy_of_run):
    """embedded_video_path gives video_val.h5.xz; the evaluation on it is named eval-video_val, as it was for
    the video_val.h5 it replaced, and records the path and the frames' checksum."""
    from prednet_keras import data as pdata
    from prednet_keras import datasets
    from prednet_keras.data import dataset_checksum

    path = datasets.embedded_video_path("val")
    result = _invoke([copy_of_run, "--data", path])
    assert result.exit_code == 0, result.output
    scores = json.loads((copy_of_run / "eval-video_val" / "prediction_scores.json").read_text())
    assert scores["data"]["source"] == str(path) and scores["data"]["frames"] == 50
    size = tuple(scores["data"]["frame_shape"][:2])
    assert scores["data"]["checksum"] == dataset_checksum(pdata.load_frames(path, size=size))
