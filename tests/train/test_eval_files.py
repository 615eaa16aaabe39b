"""prednet-eval's files replaced all or nothing (issue 39): an evaluation stopped while drawing its grids
leaves the earlier scores and plots as they were; one that finishes leaves only its own."""

import json

import numpy as np
import pytest

from prednet_keras.evaluate import files
from prednet_keras.evaluate.scoring import compute_scores


def _scores(X, Xhat, scale):
    """Real scores of predictions `scale` of the way from the frames (another evaluation: another scale)."""
    return compute_scores(X, X + scale * (Xhat - X))


def _frames(sequences):
    rng = np.random.default_rng(0)
    return rng.random((sequences, 4, 8, 8, 3)).astype("float32"), rng.random((sequences, 4, 8, 8, 3)).astype("float32")


def _snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_stopped_evaluation_leaves_the_earlier_results_as_they_were(tmp_path, monkeypatch):
    X, Xhat = _frames(6)
    files.write_scores(tmp_path, _scores(X, Xhat, 0.5), X, Xhat, plots=4, name="before")
    before = _snapshot(tmp_path)
    assert len([n for n in before if n.startswith("prediction_plots/")]) == 4
    drawn = []
    real = files.plot_grid

    def stopped_on_the_third(*args, **kwargs):
        drawn.append(args[2])
        if len(drawn) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(files, "plot_grid", stopped_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        files.write_scores(tmp_path, _scores(X, Xhat, 0.2), X, Xhat, plots=3, name="after")
    assert _snapshot(tmp_path) == before  # nothing of the new evaluation, nothing of the old lost
    assert sorted(p.name for p in tmp_path.iterdir()) == ["per_step.png", "prediction_plots", "prediction_scores.json",
                                                         "prediction_scores.txt"]


def test_a_finished_evaluation_leaves_only_its_own_plots(tmp_path):
    X, Xhat = _frames(6)
    files.write_scores(tmp_path, _scores(X, Xhat, 0.5), X, Xhat, plots=4)
    written = files.write_scores(tmp_path, _scores(X, Xhat, 0.2), X, Xhat, plots=2)
    plots = sorted(p.name for p in (tmp_path / "prediction_plots").iterdir())
    assert plots == [files.plot_name(1, 0), files.plot_name(2, 5)]
    assert json.loads((tmp_path / "prediction_scores.json").read_text())["mse_model"] == pytest.approx(
        _scores(X, Xhat, 0.2)["mse_model"])
    assert all(p.is_file() for p in written) and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
