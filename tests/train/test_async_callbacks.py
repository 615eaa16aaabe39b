"""The run recorder under Keras' asynchronous callback dispatch (JAX): Keras reads each batch's logs in its
thread pool, in any order; the rows are written in fit's thread, in order, with the losses the synchronous
path writes, and a non-finite loss stops training at a step fixed in advance."""

import importlib.util
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from prednet_keras.session.callbacks import StepLosses

REPO = Path(__file__).resolve().parents[2]


def test_losses_arriving_from_other_threads_in_any_order_are_read_in_dispatch_order_one_step_late():
    losses = StepLosses(model=None, lag=1)
    assert losses.begin(1) == [] and losses.begin(2) == []
    # Step 3 is about to be dispatched: step 1 is read, waiting for it; step 2's arrives first.
    arrivals = [threading.Timer(0.05, losses.arrive, (2, {"loss": 2.0})),
                threading.Timer(0.2, losses.arrive, (1, {"batch_loss": 1.0, "loss": 9.0}))]
    for arrival in arrivals:
        arrival.start()
    assert losses.begin(3) == [(1, 1.0)]
    losses.arrive(3, {"loss": 3.0})
    assert losses.flush() == [(2, 2.0), (3, 3.0)]
    assert losses.flush() == []


def _child(tmp_path, lr):
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p))
    result = subprocess.run([sys.executable, str(Path(__file__).with_name("async_recorder_child.py")),
                             str(tmp_path), str(lr)], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    runs = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return {run["run"]: run for run in runs}


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")
def test_on_jax_the_rows_come_in_order_with_the_synchronous_paths_values(tmp_path):
    runs = _child(tmp_path, 0.01)
    pooled, synchronous = runs["as-is"], runs["synchronous"]
    assert pooled["async_safe"] and not synchronous["async_safe"]
    # Keras took the asynchronous path (every batch's logs came through its pool), the other run did not.
    assert not any(pooled["in_fit_thread"]) and all(synchronous["in_fit_thread"])
    assert len(pooled["in_fit_thread"]) == 24
    steps = [(int(row["epoch"]), int(row["step"])) for row in pooled["rows"] if row["kind"] == "step"]
    assert steps == [(epoch, step) for epoch in (1, 2) for step in range(1, 13)]
    assert [row["kind"] for row in pooled["rows"]] == ["step"] * 12 + ["epoch"] + ["step"] * 12 + ["epoch"]
    # Every column but seconds, character for character.
    assert pooled["rows"] == synchronous["rows"]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")
def test_on_jax_a_non_finite_loss_at_step_n_stops_training_after_step_n_plus_2(tmp_path):
    # Adam steps of 1e30: the second step's loss is infinite.
    runs = _child(tmp_path, 1e30)
    pooled, synchronous = runs["as-is"], runs["synchronous"]
    assert pooled["diverged"] == synchronous["diverged"] == [1, 2]
    # Fit checks stop_training after a step: the asynchronous recorder reads step 2 before step 4 is
    # dispatched; the synchronous one after step 3 ran.
    assert len(pooled["in_fit_thread"]) == 4 and len(synchronous["in_fit_thread"]) == 3
    assert [row["step"] for row in pooled["rows"]] == ["1", "2", "3", "4"]
    assert pooled["rows"][:3] == synchronous["rows"]
