"""A loss that becomes NaN or infinite stops training with one line; it is never recorded as a result."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.reliability.test_training_full_disk import snapshot
from tests.train.conftest import TINY, moving_squares
import pytest

# Slow (a real prednet-train run): in the full suite, not in the fast loop (pytest -m "not slow").
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_a_diverging_loss_stops_training_with_one_line(tmp_path):
    frames, sources = moving_squares()
    np.savez(tmp_path / "squares.npz", frames=frames, sources=sources)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "earlier.txt").write_text("kept")
    before = snapshot(tmp_path / "runs")
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    # Adam steps of 1e30 send the weights, then the loss, to inf and NaN within an epoch.
    result = subprocess.run([sys.executable, "-m", "prednet_keras.cli.train", *TINY, "--lr", "1e30", "--data",
                             tmp_path / "squares.npz", "--quiet", "-o", tmp_path / "runs" / "new"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert ("Error: The loss became NaN or infinite at epoch 1, step " in result.stderr
            and "so training stopped; no epoch was completed before it. A new run with a lower --lr (this one: 1e+30) "
                "may train." in result.stderr), result.stderr
    # Nothing was kept as a result: the new run is gone, the folder as it was.
    assert snapshot(tmp_path / "runs") == before
