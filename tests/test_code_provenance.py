"""code_provenance: the commit, the changes and the checksum of the code a run is made with, from git where
the package is tracked, from PREDNET_SOURCE_COMMIT where it is not, and None where neither says."""

import hashlib
import subprocess
from pathlib import Path

import pytest

from prednet_keras.runtime import code_provenance as provenance
from prednet_keras.runtime.code_provenance import COMMIT_ENV, DIRTY_ENV, code_provenance, package_sha256

ROOT = Path(__file__).resolve().parents[1]
COMMIT = "0123456789abcdef0123456789ABCDEF01234567"


def _git(folder, *args):
    return subprocess.run(["git", "-C", str(folder), "-c", "user.name=test", "-c", "user.email=test@example.com",
                           "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(autouse=True)
def no_source_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(COMMIT_ENV, raising=False)
    monkeypatch.delenv(DIRTY_ENV, raising=False)
    # git never looks above the test's folder (whatever tree /tmp lies in).
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))


@pytest.fixture
def checkout(tmp_path):
    """A repository holding a package `pkg` and a file beside it, committed."""
    repo = tmp_path / "repo"
    (repo / "pkg" / "sub").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("VERSION = 1\n")
    (repo / "pkg" / "sub" / "model.py").write_text("def model():\n    return 1\n")
    (repo / "notes.txt").write_text("a run folder's notes\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first")
    return repo


def test_a_clean_checkout_gives_its_commit(checkout):
    code = code_provenance(checkout / "pkg")
    assert code["commit"] == _git(checkout, "rev-parse", "HEAD").strip()
    assert (code["dirty"], code["source"]) == (False, "git")
    assert code["package_sha256"] == package_sha256(checkout / "pkg") and code["version"]


def test_changes_to_the_package_make_it_dirty_and_changes_elsewhere_do_not(checkout):
    (checkout / "notes.txt").write_text("edited\n")
    (checkout / "untracked-run-folder").mkdir()
    assert code_provenance(checkout / "pkg")["dirty"] is False
    before = code_provenance(checkout / "pkg")["package_sha256"]
    (checkout / "pkg" / "sub" / "model.py").write_text("def model():\n    return 2\n")
    code = code_provenance(checkout / "pkg")
    assert code["dirty"] is True and code["source"] == "git"
    assert code["package_sha256"] != before
    _git(checkout, "checkout", "--", "pkg")
    # A module not committed yet is code that runs too.
    (checkout / "pkg" / "new.py").write_text("X = 1\n")
    assert code_provenance(checkout / "pkg")["dirty"] is True


def test_an_installed_copy_inside_another_repository_is_not_its_code(checkout):
    (checkout / ".gitignore").write_text(".venv/\n")
    installed = checkout / ".venv" / "site-packages" / "pkg"
    installed.mkdir(parents=True)
    (installed / "__init__.py").write_text("VERSION = 1\n")
    code = code_provenance(installed)
    assert (code["commit"], code["dirty"], code["source"]) == (None, None, "unknown")
    assert code["package_sha256"] == package_sha256(installed)


def test_outside_any_checkout_the_environment_tells(tmp_path, monkeypatch):
    package = tmp_path / "copy" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VERSION = 1\n")
    assert {k: v for k, v in code_provenance(package).items() if k in ("commit", "dirty", "source")} == {
        "commit": None, "dirty": None, "source": "unknown"}
    monkeypatch.setenv(COMMIT_ENV, COMMIT)
    monkeypatch.setenv(DIRTY_ENV, "1")
    code = code_provenance(package)
    assert (code["commit"], code["dirty"], code["source"]) == (COMMIT.lower(), True, "environment")
    monkeypatch.setenv(DIRTY_ENV, "0")
    assert code_provenance(package)["dirty"] is False
    monkeypatch.setenv(DIRTY_ENV, "yes")
    code = code_provenance(package)
    assert code["dirty"] is None and code["source"].startswith("environment (PREDNET_SOURCE_DIRTY='yes'")
    monkeypatch.setenv(COMMIT_ENV, "HEAD")
    code = code_provenance(package)
    assert (code["commit"], code["dirty"]) == (None, None)
    assert code["source"] == "unknown: PREDNET_SOURCE_COMMIT='HEAD' is not a 40-hex-digit commit; ignored"


def test_git_missing_is_no_failure(checkout, monkeypatch):
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv(COMMIT_ENV, COMMIT)
    code = code_provenance(checkout / "pkg")
    assert (code["commit"], code["source"]) == (COMMIT.lower(), "environment")


def test_the_environment_says_it_where_a_copy_carries_an_older_head(checkout, monkeypatch):
    """The GPU machine's copy of the tree has a .git whose HEAD can be older than its files: the commit the
    copier names wins over git's."""
    assert code_provenance(checkout / "pkg")["source"] == "git"
    monkeypatch.setenv(COMMIT_ENV, COMMIT)
    monkeypatch.setenv(DIRTY_ENV, "0")
    code = code_provenance(checkout / "pkg")
    assert (code["commit"], code["dirty"], code["source"]) == (COMMIT.lower(), False, "environment")


def test_git_too_slow_is_no_failure(checkout, monkeypatch):
    def slow(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs.get("timeout"))

    monkeypatch.setattr(provenance.subprocess, "run", slow)
    code = code_provenance(checkout / "pkg")
    assert (code["commit"], code["dirty"], code["source"]) == (None, None, "unknown")


def test_the_package_checksum_follows_its_documented_recipe(checkout):
    folder = checkout / "pkg"
    (folder / "data.json").write_text("{}")  # not code: not hashed
    digest = hashlib.sha256()
    for name in ("__init__.py", "sub/model.py"):
        data = (folder / name).read_bytes()
        digest.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    assert package_sha256(folder) == digest.hexdigest()


def test_this_checkout_gives_its_head():
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0 or provenance.PACKAGE_DIR != ROOT / "prednet_keras":
        pytest.skip("the package is not imported from this git checkout")
    code = code_provenance()
    assert (code["commit"], code["source"]) == (head.stdout.strip(), "git")
    assert code["package_sha256"] == package_sha256(ROOT / "prednet_keras")


def test_a_short_commit_in_the_environment_is_not_replaced_by_gits_answer(checkout, monkeypatch):
    # Seen on the GPU machine: a 7-digit commit, refused as malformed, gave way to the copy's .git, whose HEAD
    # was an older commit with the newer files: the runs recorded the wrong commit, "dirty", from "git".
    monkeypatch.setenv(COMMIT_ENV, COMMIT[:7])
    monkeypatch.setenv(DIRTY_ENV, "0")
    code = code_provenance(checkout / "pkg")
    assert (code["commit"], code["dirty"]) == (None, None)
    assert code["source"] == f"unknown: PREDNET_SOURCE_COMMIT={COMMIT[:7]!r} is not a 40-hex-digit commit; ignored"
    monkeypatch.delenv(COMMIT_ENV)
    assert code_provenance(checkout / "pkg")["source"] == "git"
