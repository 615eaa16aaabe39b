"""prednet-eval's outputs byte for byte: the files and lines an evaluation writes stay what they were, so that
records already kept (docs/shipped-model/) and any reader of them keep reading the same text.

The expected files in eval_outputs/ were written by the code as it stood before the metrics became one table
(issue 38); a change that alters a key, a column, a number format or a word fails here."""

import json
from pathlib import Path

import numpy as np
import pytest

from prednet_keras.files import diskwrite
from prednet_keras.evaluate import files
from prednet_keras.evaluate.scoring import compute_scores

EXPECTED = Path(__file__).parent / "eval_outputs"
DOCS = Path(__file__).parents[2] / "docs"


def _frames_and_predictions():
    """3 sequences of 5 frames (16x16, RGB) in steps of 1/255 as real frames are, and two predictions of them:
    one near the frames (better than copying the last frame), one far (worse)."""
    rng = np.random.default_rng(38)
    X = (rng.integers(0, 256, (3, 5, 16, 16, 3)) / 255).astype(np.float32)
    X[:, 1:] = 0.7 * X[:, :1] + 0.3 * X[:, 1:]  # frames that resemble the one before, as video does
    noise = rng.random(X.shape).astype(np.float32)
    near = np.clip(X + 0.05 * (noise - 0.5), 0, 1)
    far = np.clip(X + 0.6 * (noise - 0.5), 0, 1)
    return X, near, far


def _outputs(folder):
    """Writes every output of the small case into `folder`; returns the scores of the near prediction."""
    X, near, far = _frames_and_predictions()
    near_scores = compute_scores(X, near, extrap_start=3)
    far_scores = compute_scores(X, far, extrap_start=3)
    files.write_scores(folder / "near", near_scores, name="near", extrap_start=3)
    files.write_comparison(folder / "comparison", [("far", far_scores), ("near", near_scores)])
    diskwrite.atomic_write(folder / "summary.txt", f"{files.summary_line(near_scores)}\n"
                                                   f"{files.summary_line(far_scores)}\n")
    return near_scores


@pytest.mark.parametrize("name", [
    "near/prediction_scores.json", "near/prediction_scores.txt",
    "comparison/comparison.json", "comparison/comparison.csv", "comparison/comparison.txt",
    "summary.txt",
])
def test_an_evaluation_writes_what_it_always_wrote(tmp_path, name):
    _outputs(tmp_path)
    assert (tmp_path / name).read_bytes() == (EXPECTED / name).read_bytes()


def _kept_records():
    return sorted((DOCS / "shipped-model").rglob(files.SCORES_JSON))


@pytest.mark.parametrize("record", _kept_records(), ids=lambda p: p.parent.relative_to(DOCS).as_posix())
def test_kept_records_are_what_the_code_writes(record, tmp_path):
    """Each committed prediction_scores.json holds today's keys in today's order and layout, and its
    prediction_scores.txt is the text written from it."""
    X, near, _ = _frames_and_predictions()
    scores = json.loads(record.read_text())
    fresh = compute_scores(X, near)
    assert list(scores)[: len(fresh)] == list(fresh)
    assert list(scores["per_step"]) == list(fresh["per_step"])
    diskwrite.atomic_write_json(tmp_path / "again.json", scores)
    assert (tmp_path / "again.json").read_bytes() == record.read_bytes()
    text = record.with_name(files.SCORES_TXT).read_text()
    assert files.scores_text(scores, scores["model"]["name"]) == text
