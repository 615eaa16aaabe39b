"""Shared set-up for the prednet-train / prednet-eval tests: tiny data, tiny runs."""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# Small enough for 2 CPU cores: 3 layers of 3/4/8 channels, 32x32 frames, 4-frame
# sequences, 2 steps of 2 sequences per epoch, 2 epochs, deterministic kernels.
TINY = [
    "--stack-sizes", "3,4,8",
    "--nt", "4",
    "--batch-size", "2",
    "--steps-per-epoch", "2",
    "--epochs", "2",
    "--val-sequences", "4",
    "--val-fraction", "0.25",
    "--deterministic",
]


# Every run of `stop_after` samples its weights' trajectory at this many points, as a study's runs do.
TRAJECTORY_POINTS = 5


def moving_squares(count=48, size=32, sources=2, seed=0):
    """Frames of a bright square drifting over a gradient, split into sources."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size]
    frames, ids = [], []
    per_source = count // sources
    for s in range(sources):
        top, left = rng.integers(0, size // 2, 2)
        dy, dx = rng.choice([-1, 1], 2)
        background = np.stack([x * 4, y * 4, (x + y) * 2], axis=-1).astype(np.float64)
        for t in range(per_source):
            frame = background.copy()
            r, c = (top + dy * t) % (size - 8), (left + dx * t) % (size - 8)
            frame[r : r + 8, c : c + 8] = (250, 240, 60 + 60 * s)
            frames.append(frame)
            ids.append(f"clip{s}")
    return np.clip(frames, 0, 255).astype(np.uint8), np.array(ids)


@pytest.fixture(scope="session")
def tiny_npz(tmp_path_factory):
    """An .npz of 48 frames (32x32 RGB) from 2 sources."""
    frames, sources = moving_squares()
    path = tmp_path_factory.mktemp("data") / "squares.npz"
    np.savez(path, frames=frames, sources=sources)
    return path


def run_cli(module, args, env=None, timeout=400):
    """Runs `python -m <module> args` as a user would run the console script."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


def train(args, env=None):
    return run_cli("prednet_keras.cli.train", args, env)


@pytest.fixture(scope="session")
def weights_dir(tmp_path_factory):
    """A weights/ folder that the session's runs are trained into."""
    return tmp_path_factory.mktemp("weights")


@pytest.fixture(scope="session")
def trained_run(weights_dir, tiny_npz):
    """One complete tiny run (the uninterrupted reference for --resume)."""
    folder = weights_dir / "tiny"
    result = train(TINY + ["--data", tiny_npz, "--quiet", "-o", folder])
    assert result.returncode == 0, result.stdout + result.stderr
    return Path(folder), result


@pytest.fixture
def copy_of_run(trained_run, tmp_path):
    """A copy of the session's complete tiny run (2 of 2 epochs), for tests that damage or write it."""
    folder, _ = trained_run
    copy = tmp_path / "run"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("eval*"))
    return copy


def folder_hash(path):
    """{relative path: sha256 of its bytes} for every file, plus every folder (as None)."""
    path = Path(path)
    out = {}
    for item in sorted(path.rglob("*")):
        key = str(item.relative_to(path))
        out[key] = hashlib.sha256(item.read_bytes()).hexdigest() if item.is_file() else None
    return out


@pytest.fixture
def stop_after(monkeypatch):
    """Runs prednet-train's training process in this process; `stop_after[0] = k` stops the next run once its
    k-th update is recorded, through the session's stop request (StopOnRequest), as SIGINT does. Every run
    samples its weights' trajectory at TRAJECTORY_POINTS points, as a study's runs do."""
    from prednet_keras.session import bookkeeping, training, worker
    from prednet_keras.session.folder import RunFolder

    stop = [None]

    def launch(run_dir, runtime_config, quiet=False, resume=None, **_):
        history = run_dir / "history.csv"
        if resume is None:
            folder = RunFolder(run_dir)
            folder.update_manifest(study={"trajectory_points": TRAJECTORY_POINTS})

        def should_stop():
            return stop[0] is not None and history.is_file() and row_count(history) >= stop[0]

        try:
            training.train(run_dir, quiet=quiet, resume=resume, should_stop=should_stop)
        except KeyboardInterrupt:
            bookkeeping.mark_stopped(run_dir, "interrupted")
            return worker.EXIT_INTERRUPTED
        return 0

    monkeypatch.setattr(worker, "launch", launch)
    return stop


def row_count(path):
    """history.csv's rows (its lines less the header)."""
    with open(path, encoding="utf-8") as handle:
        return sum(1 for _ in handle) - 1
