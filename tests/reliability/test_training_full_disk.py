"""A full disk during `prednet-train`: one line, exit 1, no traceback or crash, nothing already written lost,
and advice to resume only when resuming can help.

The disk fills for real: a file size limit on the command (RLIMIT_FSIZE, SIGXFSZ ignored, so a write past
it fails with EFBIG as a full disk fails with ENOSPC), and, where user namespaces allow it, a private tmpfs
that a filler file leaves almost no room in. Before, a full disk gave some 26 tracebacks from HDF5's
finalizers, a crash with signal 11 and the advice to `--resume` a run that had no epoch to resume from.
"""

import hashlib
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.train.conftest import TINY, moving_squares

# Slow (real prednet-train runs on a full disk): in the full suite, not in the fast loop (pytest -m "not slow").
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tiny_npz(tmp_path):
    import numpy as np

    frames, sources = moving_squares()
    np.savez(tmp_path / "squares.npz", frames=frames, sources=sources)
    return tmp_path / "squares.npz"


def snapshot(folder):
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(folder).rglob("*")) if p.is_file() and ".prednet-locks" not in p.parts}


def _environment():
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def _train(*args):
    return [sys.executable, "-m", "prednet_keras.cli.train", *map(str, args)]


def _file_size_limit(limit):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_file_size_limit_at_the_first_checkpoint(tmp_path, tiny_npz):
    kept = tmp_path / "runs" / "earlier"
    kept.mkdir(parents=True)
    (kept / "notes.txt").write_text("an earlier run the user wants to keep")
    before = snapshot(tmp_path / "runs")
    # Room for the initial weights (72 KB here), not for the checkpoint (weights and Adam's two moments: 245 KB).
    result = subprocess.run(_train(*TINY, "--data", tiny_npz, "--quiet", "-o", tmp_path / "runs" / "new"),
                            env=_environment(), capture_output=True, text=True, timeout=300,
                            preexec_fn=_file_size_limit(150_000))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "signal" not in result.stderr and "--resume" not in result.stderr
    assert re.search(r"Error: file size limit reached writing \S+/checkpoints/epoch-0001\.weights\.h5: about [\d.]+ "
                     r"KiB needed, files may hold 146\.5 KiB \(ulimit -f\); no file was written", result.stderr), \
        result.stderr
    # The new run had nothing worth keeping; everything else is as it was.
    assert snapshot(tmp_path / "runs") == before
    assert sorted(p.name for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")) == ["earlier"]


def _can_mount_tmpfs():
    if shutil.which("unshare") is None or not sys.platform.startswith("linux"):
        return False
    probe = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _can_mount_tmpfs(), reason="needs a private tmpfs (unshare -Urm: user and mount namespaces)")
def test_full_disk_after_an_epoch_keeps_it_and_resumes(tmp_path, tiny_npz):
    disk = tmp_path / "disk"
    disk.mkdir()
    run = disk / "run"
    epochs_2 = [a if a != "2" or TINY[i - 1] != "--epochs" else "1" for i, a in enumerate(TINY)]
    first = " ".join(_train(*epochs_2, "--data", tiny_npz, "--quiet", "-o", run))
    resume = " ".join(_train("--resume", "--epochs", "2", "--quiet", "-o", run))
    # Epoch 1 completes; a filler leaves 64 KiB (room for the records, not for epoch 2's 245 KB checkpoint); the filler goes and the
    # run resumes. Each step's output and the folder's hashes are separated by markers.
    script = f"""
mount -t tmpfs -o size=8m tmpfs {disk} || exit 99
{first} >/dev/null 2>&1 || exit 98
echo ==before; cd {run} && find . -path ./.prednet-locks -prune -o -type f ! -name manifest.json -print0 | sort -z | xargs -0 sha256sum; cd /
free=$(df --output=avail -B1 {disk} | tail -1); dd if=/dev/zero of={disk}/filler bs=4096 count=$(( (free - 65536) / 4096 )) status=none
echo ==full; {resume} 2>&1; echo "==status $?"
echo ==after; cd {run} && find . -path ./.prednet-locks -prune -o -type f ! -name manifest.json -print0 | sort -z | xargs -0 sha256sum; cd /
rm {disk}/filler
echo ==resumed; {resume} 2>&1; echo "==status $?"
"""
    result = subprocess.run(["unshare", "-Urm", "sh", "-c", script], capture_output=True, text=True,
                            env=_environment(), timeout=600, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    parts = dict(re.findall(r"==(\w+)\n(.*?)(?===|\Z)", result.stdout, flags=re.S))
    full, resumed = parts["full"], parts["resumed"]
    assert "==status 1" in result.stdout.split("==after")[0]
    assert "Traceback" not in full and "signal" not in full
    # Whichever of epoch 2's files meets the full disk first (the checkpoint or the best model), the message names it.
    assert re.search(r"Error: no space left on device writing \S+/(checkpoints/epoch-0002\.weights\.h5|model\.keras): "
                     r"about [\d.]+ KiB needed, [\d.]+ KiB free; (no file was written|the existing model\.keras is "
                     r"unchanged)", full), full
    # Resuming can help here (epoch 1 is kept), so it is what the command advises.
    assert "The run keeps its 1 completed epoch; free space, then continue with:" in full
    # Epoch 1's files (checkpoint, model, history, initial weights) are as they were.
    before, after = ({name: digest for digest, name in (line.split() for line in parts[key].splitlines())}
                     for key in ("before", "after"))
    assert {"./checkpoints/epoch-0001.weights.h5", "./model.keras", "./history.csv"} <= set(before)
    assert {name: after.get(name) for name in before} == before
    assert "Resuming after epoch 1 of 2" in resumed and "Done: 2 epochs completed" in resumed
    assert result.stdout.rstrip().endswith("==status 0")
