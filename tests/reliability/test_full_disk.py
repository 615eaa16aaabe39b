"""A full disk during `prednet-data prepare`: one line, exit 1, nothing lost, nothing left behind.

The disk fills for real, in a child process: a file size limit
(RLIMIT_FSIZE, with SIGXFSZ ignored so that a write past it fails with
EFBIG as a write to a full disk fails with ENOSPC), or, where user
namespaces allow it, a 256 KiB tmpfs. The file-size-limit child is forked
from this process (see faults.run_prednet_data); the tmpfs child is the
real command in a fresh process.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from prednet_keras.data import prepare
from prednet_keras.data.atomic import temp_path_for
from tests.reliability.faults import EARLIER_OUTPUT, run_prednet_data, snapshot

REPO = Path(__file__).resolve().parents[2]
FRAMES = np.random.default_rng(0).integers(0, 256, (200, 32, 32, 3), dtype=np.uint8)  # 600 KiB, incompressible


def _child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    # The data command uses no backend; Keras' numpy backend starts fastest.
    env["KERAS_BACKEND"] = "numpy"
    return env


def _prednet_data(*args):
    return [sys.executable, "-m", "prednet_keras.cli.data", *map(str, args)]


@pytest.mark.parametrize(
    "compression, needed",
    [
        # Compressed: the size is unknown ahead, so the limit is met mid-write.
        ("lzf", r"about [\d.]+ KiB needed"),
        # Uncompressed with a known frame count: refused at the first frame.
        ("none", r"about 664\.0 KiB needed"),
    ],
    ids=["lzf", "none"],
)
def test_file_size_limit_during_prepare(tmp_path, compression, needed):
    np.save(tmp_path / "clip.npy", FRAMES)
    output = tmp_path / "out.h5"
    output.write_bytes(EARLIER_OUTPUT)
    before = snapshot(tmp_path)
    status, text = run_prednet_data(
        ["prepare", tmp_path / "clip.npy", "-o", output, "--overwrite", "-q", "--compression", compression],
        file_size_limit=200_000,
    )
    assert status == 1, text
    assert re.fullmatch(
        rf"Error: file size limit reached writing {re.escape(str(output))}: {needed}, files may hold "
        r"195\.3 KiB \(ulimit -f\); the existing out\.h5 is unchanged\n",
        text,
    ), text
    assert snapshot(tmp_path) == before  # the earlier output as it was; no temp file


def _can_mount_tmpfs():
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _can_mount_tmpfs(),
                    reason="needs a private tmpfs (unshare -Urm: user and mount namespaces)")
def test_full_tmpfs_during_prepare(tmp_path):
    # The tmpfs lives in the child's mount namespace only, so the child also
    # reports what the disk holds before and after.
    np.save(tmp_path / "clip.npy", FRAMES)
    disk = tmp_path / "disk"
    disk.mkdir()
    command = _prednet_data(
        "prepare", tmp_path / "clip.npy", "-o", disk / "out.h5", "--overwrite", "-q", "--compression", "lzf"
    )
    script = (
        f"mount -t tmpfs -o size=256k tmpfs {disk} && cd {disk} && printf '{EARLIER_OUTPUT.decode()}' > out.h5 "
        f"&& sha256sum out.h5 >&2 && {' '.join(command)}; status=$?; sha256sum out.h5 >&2; ls -A >&2; exit $status"
    )
    result = subprocess.run(["unshare", "-Urm", "sh", "-c", script], capture_output=True, text=True,
                            env=_child_env(), timeout=300, check=False)
    before_hash, message, after_hash, *listing = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr and "resume" not in result.stderr
    assert re.fullmatch(
        rf"Error: no space left on device writing {re.escape(str(disk / 'out.h5'))}: about [\d.]+ KiB needed, "
        r"[\d.]+ KiB free; the existing out\.h5 is unchanged",
        message,
    ), result.stderr
    assert before_hash == after_hash
    assert listing == ["out.h5"]  # no temporary file


def test_stale_temporary_files_are_swept(tmp_path):
    np.save(tmp_path / "clip.npy", FRAMES[:4])
    output = tmp_path / "out.h5"
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    gone = int(finished.stdout)  # a pid no process has now
    stale = temp_path_for(output).with_name(temp_path_for(output).name.replace(f"-{os.getpid()}-", f"-{gone}-"))
    old_style = tmp_path / f".out.h5.{gone}.tmp"  # what earlier versions left
    live = temp_path_for(tmp_path / "other.h5")  # this process is running: not stale
    foreign = tmp_path / f".prednet-tmp-otherhost-{gone}-out.h5"  # another machine's: cannot tell
    for path in (stale, old_style, live, foreign):
        path.write_bytes(b"partial")
    prepare(tmp_path / "clip.npy", output, None)
    assert not stale.exists() and not old_style.exists()
    assert live.exists() and foreign.exists()
    assert output.exists()
