"""Which code ran: the git commit of the checkout the package is imported from, whether the package's own
files differed from it, and a checksum of those files (recorded as `code` in every run manifest and every
study invocation).

The commit comes first from `PREDNET_SOURCE_COMMIT` and `PREDNET_SOURCE_DIRTY`, which whoever copies a
working tree to another machine sets from the checkout it copied (scripts/device/): the GPU machine's copy
carries a `.git` whose HEAD can be an older commit than the files it holds, so there git's answer is wrong.
Otherwise it comes from git, and only when the package's `__init__.py` is tracked by the work tree around
it: an installed copy (site-packages, a virtual environment inside some repository) is not that
repository's code, whatever its HEAD.

`package_sha256` needs no git: a reader checks a run against a commit by computing
`package_sha256(<that commit's prednet_keras folder>)`.

Git is asked with a short timeout and without taking the index lock; a missing or slow git, or an odd
environment variable, gives None fields and never fails a run. Imports no framework.
"""

import hashlib
import os
import re
import subprocess
from pathlib import Path

__all__ = ["COMMIT_ENV", "DIRTY_ENV", "code_provenance", "package_sha256"]

COMMIT_ENV = "PREDNET_SOURCE_COMMIT"
DIRTY_ENV = "PREDNET_SOURCE_DIRTY"

PACKAGE_DIR = Path(__file__).resolve().parents[1]
_COMMIT = re.compile(r"^[0-9a-fA-F]{40}$")
_GIT_TIMEOUT_S = 5
# A caller's GIT_DIR or GIT_WORK_TREE would point git at another repository than the one around the package.
_GIT_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")
# {package dir: (the .py files' (path, mtime, size), digest)}: hashed once per process unless a file changes.
_DIGESTS = {}


def _git(folder, *args):
    """git's stdout in `folder`, or None when git is missing, slow or fails."""
    env = {key: value for key, value in os.environ.items() if key not in _GIT_REDIRECTS}
    # git status refreshes the index and may write it; another process working in the tree must not meet
    # our lock.
    env["GIT_OPTIONAL_LOCKS"] = "0"
    try:
        result = subprocess.run(["git", "-C", os.fspath(folder), *args], capture_output=True, text=True,
                                timeout=_GIT_TIMEOUT_S, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def _from_git(package_dir):
    """(commit, dirty) of the checkout `package_dir` is tracked in, or None when it is not tracked."""
    if _git(package_dir, "ls-files", "--error-unmatch", "--", "__init__.py") is None:
        return None
    head = (_git(package_dir, "rev-parse", "--verify", "HEAD") or "").strip()
    if not _COMMIT.match(head):
        return None
    # The package's folder only: run folders and notes elsewhere in the tree do not change the code that ran.
    # A new module not yet committed does, so files git does not track (and does not ignore) count too.
    status = _git(package_dir, "status", "--porcelain", "--untracked-files=all", "--", ".")
    return head.lower(), (None if status is None else bool(status.strip()))


def _from_environment():
    """(commit, dirty, source) from PREDNET_SOURCE_COMMIT / PREDNET_SOURCE_DIRTY."""
    commit = os.environ.get(COMMIT_ENV)
    if commit is None:
        return None, None, "unknown"
    if not _COMMIT.match(commit.strip()):
        return None, None, f"unknown: {COMMIT_ENV}={commit!r} is not a 40-hex-digit commit; ignored"
    dirty = os.environ.get(DIRTY_ENV)
    flag = {"0": False, "1": True}.get((dirty or "").strip())
    source = "environment"
    if flag is None and dirty is not None:
        source += f" ({DIRTY_ENV}={dirty!r} is not 0 or 1: dirty not known)"
    return commit.strip().lower(), flag, source


def package_sha256(package_dir=None):
    """sha256 over a package folder's `.py` files: for each, in the order of their paths relative to the
    folder (POSIX, sorted), the path in UTF-8, a NUL, the file's size in decimal, a NUL, its bytes.

    Args:
        package_dir: the folder (default: this installed prednet_keras).

    Returns:
        the hex digest, or None when the folder cannot be read.
    """
    folder = Path(package_dir or PACKAGE_DIR).resolve()
    try:
        files = sorted((path.relative_to(folder).as_posix(), path) for path in folder.rglob("*.py"))
        stats = [path.stat() for _, path in files]
        signature = tuple((name, stat.st_mtime_ns, stat.st_size) for (name, _), stat in zip(files, stats))
        cached = _DIGESTS.get(folder)
        if cached is not None and cached[0] == signature:
            return cached[1]
        digest = hashlib.sha256()
        for name, path in files:
            data = path.read_bytes()
            digest.update(name.encode("utf-8") + b"\0" + str(len(data)).encode("ascii") + b"\0")
            digest.update(data)
    except OSError:
        return None
    _DIGESTS[folder] = (signature, digest.hexdigest())
    return _DIGESTS[folder][1]


def code_provenance(package_dir=None):
    """The code a run is made with, for its manifest's `code`.

    Args:
        package_dir: the package folder (default: this installed prednet_keras; tests pass another).

    Returns:
        a JSON-ready dict: commit (40 hex digits or None), dirty (True when the package's folder differs
        from the commit: a tracked file changed, or a file git neither tracks nor ignores; None when not
        known), source ("git", "environment" or "unknown", with the
        reason after it when an environment variable was ignored), package_sha256 (`package_sha256`),
        version (the package's version).
    """
    from prednet_keras import __version__

    folder = Path(package_dir or PACKAGE_DIR).resolve()
    commit, dirty, source = _from_environment()
    # A variable set but malformed says the copy's git is not to be trusted (a device copy's HEAD can be older
    # than its files): its reason is recorded, never git's answer in its place.
    if commit is None and os.environ.get(COMMIT_ENV) is None:
        found = _from_git(folder)
        if found is not None:
            commit, dirty, source = *found, "git"
    return {"commit": commit, "dirty": dirty, "source": source, "package_sha256": package_sha256(folder),
            "version": __version__}
