"""The evaluation's metrics are one table (evaluate/metrics.py, issue 38): a metric added to it is scored,
written and compared with no other change, and the modules that score and write name no metric themselves."""

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

from prednet_keras.evaluate import files
from prednet_keras.evaluate.metrics import METRICS, Metric, headline
from prednet_keras.evaluate.scoring import compute_scores

PACKAGE = Path(__file__).parents[2] / "prednet_keras"


def absolute_error(actual, predicted):
    """The throwaway metric: mean absolute error, over pixels as the MSE is."""
    return np.abs(actual.astype(np.float64) - predicted)


WITH_MAE = METRICS + (Metric("mae", "MAE", absolute_error, ".6g"),)


def _frames():
    rng = np.random.default_rng(7)
    X = rng.random((3, 5, 16, 16, 3)).astype(np.float32)
    X[:, 1:] = 0.7 * X[:, :1] + 0.3 * X[:, 1:]
    near = np.clip(X + 0.05 * (rng.random(X.shape).astype(np.float32) - 0.5), 0, 1)
    far = np.clip(X + 0.6 * (rng.random(X.shape).astype(np.float32) - 0.5), 0, 1)
    return X, near, far


def _without_mae(value):
    if isinstance(value, dict):
        return {k: _without_mae(v) for k, v in value.items() if not k.startswith("mae_")}
    return value


def test_a_metric_added_to_the_table_is_scored_against_the_model_and_each_baseline():
    X, near, _ = _frames()
    scores = compute_scores(X, near, extrap_start=3, metrics=WITH_MAE)
    assert scores["mae_model"] == pytest.approx(np.mean(np.abs(X[:, 1:] - near[:, 1:])), rel=1e-6)
    assert scores["mae_prev"] == pytest.approx(np.mean(np.abs(X[:, 1:] - X[:, :-1])), rel=1e-6)
    assert scores["per_step"]["mae_model"] == pytest.approx(np.abs(X - near).mean(axis=(0, 2, 3, 4)), rel=1e-6)
    assert scores["per_step"]["mae_prev"][0] is None and len(scores["per_step"]["mae_prev"]) == 5
    extrapolation = scores["extrapolation"]
    assert extrapolation["mae_model"] == pytest.approx(np.mean(np.abs(X[:, 3:] - near[:, 3:])), rel=1e-6)
    assert extrapolation["mae_last_seen"] == pytest.approx(np.mean(np.abs(X[:, 3:] - X[:, 2:3])), rel=1e-6)
    # Everything else is what the table without it gives, keys in the same order.
    plain = compute_scores(X, near, extrap_start=3)
    assert json.dumps(_without_mae(scores)) == json.dumps(plain)


def test_a_metric_added_to_the_table_appears_in_every_file_and_line(tmp_path):
    X, near, far = _frames()
    near_scores = compute_scores(X, near, extrap_start=3, metrics=WITH_MAE)
    far_scores = compute_scores(X, far, extrap_start=3, metrics=WITH_MAE)
    files.write_scores(tmp_path / "near", near_scores, name="near", extrap_start=3, metrics=WITH_MAE)

    written = json.loads((tmp_path / "near" / files.SCORES_JSON).read_text())
    assert written["mae_model"] == near_scores["mae_model"] and "mae_last_seen" in written["extrapolation"]
    text = (tmp_path / "near" / files.SCORES_TXT).read_text().splitlines()
    mae = f"{near_scores['mae_model']:.6g}"
    assert f"MAE   model {mae}   previous frame {near_scores['mae_prev']:.6g}" in text
    assert (f"MAE   model {near_scores['extrapolation']['mae_model']:.6g}   last seen frame "
            f"{near_scores['extrapolation']['mae_last_seen']:.6g}") in text
    header = text[text.index("per time step:") + 1]
    assert header.split("PSNR model")[1].strip() == "MAE model"
    # The table's other lines are those of the table without it.
    plain = files.scores_text(compute_scores(X, near, extrap_start=3), "near").splitlines()
    assert [line for line in text if not line.startswith("MAE")][: plain.index("per time step:") + 1] == \
        plain[: plain.index("per time step:") + 1]

    rows, _ = files.write_comparison(tmp_path / "comparison", [("far", far_scores), ("near", near_scores)],
                                     metrics=WITH_MAE)
    assert [row["model"] for row in rows] == ["near", "far"]
    assert list(rows[0])[-4:] == ["mae_model", "mae_prev", "extrap_mse_model", "extrap_mse_last_seen"]
    assert json.loads((tmp_path / "comparison" / "comparison.json").read_text()) == rows
    csv_header = (tmp_path / "comparison" / "comparison.csv").read_text().splitlines()[0]
    assert csv_header.endswith("psnr_prev,mae_model,mae_prev,extrap_mse_model,extrap_mse_last_seen")
    table_header = (tmp_path / "comparison" / "comparison.txt").read_text().splitlines()[0].split()
    assert table_header[-4:] == ["mae_model", "mae_prev", "extrap_mse_model", "extrap_mse_last_seen"]

    assert files.summary_line(near_scores, WITH_MAE) == files.summary_line(near_scores) + f", MAE {mae}"


def test_the_headline_metric_is_an_error():
    """Its ratio to the previous frame's is worded as an error's, so a similarity cannot be first."""
    assert headline() is METRICS[0] and not METRICS[0].higher_is_better
    with pytest.raises(ValueError, match="must be an error"):
        headline(METRICS[1:])


# A metric's key as the scores hold it: the table's names are the only source of these.
_METRIC_KEY = re.compile(r"\b(?:mse|ssim|psnr)(?:_(?:model|prev|last_seen|ratio))?\b", re.IGNORECASE)


@pytest.mark.parametrize("module", ["evaluate/scoring.py", "evaluate/files.py", "cli/eval.py"])
def test_scoring_files_and_the_command_name_no_metric(module):
    """Outside metrics.py, a metric is named in prose (docstrings, comments) only, never in code."""
    tree = ast.parse((PACKAGE / module).read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    named = [node.value for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
             and _METRIC_KEY.search(node.value) and "autoencoder" not in node.value]
    assert named == []
