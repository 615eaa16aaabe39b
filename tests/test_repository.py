"""The repository itself: small enough to clone and to carry to the GPU machine."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACKED_LIMIT_BYTES = 40 * 1024 * 1024


def tracked_files():
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in listed.decode().split("\0") if name]


def test_tracked_tree_is_at_most_40_mib():
    # What `git ls-files -z | xargs -0 du -cb | tail -1` adds up (a symlink counts as itself).
    sizes = {path.relative_to(ROOT).as_posix(): path.lstat().st_size for path in tracked_files() if path.exists()}
    total = sum(sizes.values())
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:5]
    assert total <= TRACKED_LIMIT_BYTES, f"{total / 2**20:.1f} MiB tracked; largest: {largest}"
