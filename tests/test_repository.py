"""The repository itself: small enough to clone and to carry to the GPU machine."""

import subprocess
import sys
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


def test_the_code_passes_the_linter():
    # The rules are pyproject.toml's [tool.ruff]; ruff comes with the test extra (setup.cfg).
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True)
    assert "No module named ruff" not in result.stderr, "ruff is missing: pip install -e '.[test]'"
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_linter_finds_what_its_rules_name(tmp_path):
    # The rule set is live: a file with an unused import, an undefined name and a mutable default fails it.
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "bad.py").write_text("import os\n\n\ndef f(x=[]):\n    return undefined_name\n")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                            cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 1
    for rule in ("F401", "F821", "B006"):
        assert rule in result.stdout, result.stdout
