"""A study's finished run folders in one compressed archive, and back.

    DIR/runs.tar.xz      runs/<configuration>/seed-NNNN-rK/... as `prednet-study run` wrote them

A study is hundreds of small manifests, histories and logs; packed into one
xz archive they take a fifth to a tenth of the space, which is how the
published studies in docs/ are kept. `prednet-study report` reads an archive
wherever it reads a folder of runs (`opened`); `pack` and `unpack` turn a
study folder's runs/ into its archive and back, so a packed study can be
resumed or extended.

Archives are extracted with tarfile's "data" filter: a member that would land
outside the destination (an absolute path, "..", a link pointing out) or is
not a plain file, folder or inner link stops the extraction with an error.
"""

import contextlib
import filecmp
import lzma
import os
import shutil
import tarfile
import tempfile
import zlib
from pathlib import Path

from prednet_keras.session import folder as run_folders

__all__ = ["ARCHIVE", "ArchiveError", "archived_runs", "is_archive", "missing_runs", "opened", "pack", "unpack"]

ARCHIVE = "runs.tar.xz"
RUNS = "runs"
SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2")
# Folders of runs that did not finish (one_run.PARTIAL) or were being unpacked.
_HIDDEN = "."


class ArchiveError(ValueError):
    """An archive that cannot be read, or packing or unpacking that would lose runs."""


def is_archive(path):
    """True when `path` is a file named like a tar archive (.tar, .tar.gz, .tar.xz, ...)."""
    path = Path(path)
    return path.is_file() and path.name.endswith(SUFFIXES)


def _open(path):
    try:
        return tarfile.open(path, "r:*")
    except (tarfile.TarError, lzma.LZMAError, zlib.error, EOFError) as error:
        raise ArchiveError(f"{path}: not a readable tar archive ({error}).") from None


def _extract(path, destination):
    with _open(path) as tar:
        try:
            tar.extractall(destination, filter="data")
        except tarfile.FilterError as error:
            raise ArchiveError(f"{path}: member {error.tarinfo.name!r} is refused ({error}); nothing of it is "
                               "used.") from None
        except (tarfile.TarError, lzma.LZMAError, zlib.error, EOFError) as error:
            raise ArchiveError(f"{path}: damaged archive ({error}).") from None


@contextlib.contextmanager
def opened(path):
    """The archive's contents in a temporary folder, removed on exit.

    Args:
        path: a tar archive (any compression tarfile reads).

    Yields:
        the Path of the folder the members were extracted into.
    """
    with tempfile.TemporaryDirectory(prefix="prednet-study-archive-") as folder:
        _extract(path, folder)
        yield Path(folder)


def archived_runs(path):
    """The run folders an archive holds, as member paths ("runs/<configuration>/<run>"), sorted."""
    with _open(path) as tar:
        try:
            names = tar.getnames()
        except (tarfile.TarError, lzma.LZMAError, zlib.error, EOFError) as error:
            raise ArchiveError(f"{path}: damaged archive ({error}).") from None
    suffix = "/" + run_folders.MANIFEST
    return sorted(name[: -len(suffix)] for name in names if name.endswith(suffix))


def missing_runs(study_dir):
    """Runs in DIR/runs.tar.xz that DIR/runs/ lacks ([] without an archive)."""
    study_dir = Path(study_dir)
    archive = study_dir / ARCHIVE
    if not archive.is_file():
        return []
    return [name for name in archived_runs(archive) if not run_folders.is_run_folder(study_dir / name)]


def _finished_runs(runs_dir):
    """(finished run folders, unfinished ones) under runs/<configuration>/."""
    finished, unfinished = [], []
    for config in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        for run in sorted(p for p in config.iterdir() if p.is_dir()):
            if run.name.startswith(_HIDDEN) or not run_folders.is_run_folder(run):
                unfinished.append(run)
            else:
                finished.append(run)
    return finished, unfinished


def _members(study_dir, folders):
    """(archive name, path) of every folder and file to pack, parents first, in a fixed order."""
    out = [(RUNS, study_dir / RUNS)]
    for config in sorted({f.parent for f in folders}):
        out.append((f"{RUNS}/{config.name}", config))
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            dirs.sort()
            root = Path(root)
            out.append((root.relative_to(study_dir).as_posix(), root))
            out += [((root / name).relative_to(study_dir).as_posix(), root / name) for name in sorted(files)]
    return out


def _tarinfo(name, path):
    # Owner, permissions and times are normalised so that packing the same runs
    # again gives the same bytes (no churn where archives are tracked by git).
    info = tarfile.TarInfo(name)
    info.mtime = 0
    if path.is_symlink() or not (path.is_dir() or path.is_file()):
        raise ArchiveError(f"{path}: not a plain file or folder; a run folder holds only those.")
    if path.is_dir():
        info.type, info.mode = tarfile.DIRTYPE, 0o755
    else:
        info.size, info.mode = path.stat().st_size, 0o644
    return info


def pack(study_dir, remove=False):
    """Packs the finished runs of DIR/runs/ into DIR/runs.tar.xz.

    An existing archive is replaced, but only when every run it holds is in
    runs/ too (unpack it first), so that packing never drops a run.

    Args:
        study_dir: a study folder (`prednet-study run -o DIR`).
        remove: delete the packed run folders once the archive is written and
            read back (folders of unfinished runs stay).

    Returns:
        dict: archive (path), runs (count), bytes, left_out (unfinished run folders, not packed).
    """
    study_dir = Path(study_dir)
    runs_dir = study_dir / RUNS
    if not runs_dir.is_dir():
        raise ArchiveError(f"{runs_dir}: no such folder; nothing to pack.")
    finished, unfinished = _finished_runs(runs_dir)
    if not finished:
        raise ArchiveError(f"{runs_dir} holds no finished run; nothing to pack.")
    archive = study_dir / ARCHIVE
    missing = missing_runs(study_dir)
    if missing:
        raise ArchiveError(f"{archive} holds {len(missing)} run(s) that {runs_dir} lacks (e.g. {missing[0]}); "
                           f"unpack it first (prednet-study unpack {study_dir}) so that packing keeps them.")
    members = _members(study_dir, finished)
    temporary = study_dir / f".{ARCHIVE}.tmp"
    try:
        with tarfile.open(temporary, "w:xz", preset=9 | lzma.PRESET_EXTREME, format=tarfile.PAX_FORMAT) as tar:
            for name, path in members:
                info = _tarinfo(name, path)
                if info.isdir():
                    tar.addfile(info)
                else:
                    with open(path, "rb") as handle:
                        tar.addfile(info, handle)
        with _open(temporary) as tar:
            if tar.getnames() != [name for name, _ in members]:
                raise ArchiveError(f"{temporary}: the archive does not read back as written; {archive} unchanged.")
        os.replace(temporary, archive)
    finally:
        if temporary.exists():
            temporary.unlink()
    if remove:
        for folder in finished:
            shutil.rmtree(folder)
        for config in sorted({f.parent for f in finished}):
            with contextlib.suppress(OSError):
                config.rmdir()  # only when empty: unfinished runs stay
        with contextlib.suppress(OSError):
            runs_dir.rmdir()
    return {"archive": archive, "runs": len(finished), "bytes": archive.stat().st_size,
            "left_out": [str(p) for p in unfinished]}


def _same_folder(first, second):
    compared = filecmp.dircmp(first, second)
    if compared.left_only or compared.right_only or compared.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(first, second, compared.common_files, shallow=False)
    return not mismatch and not errors and all(
        _same_folder(first / name, second / name) for name in compared.common_dirs)


def unpack(study_dir):
    """Unpacks DIR/runs.tar.xz into DIR/runs/, to resume or extend the study.

    Runs already in runs/ stay as they are when they equal the archived ones;
    a run that differs stops the unpacking before anything is moved.

    Args:
        study_dir: a study folder holding runs.tar.xz.

    Returns:
        dict: unpacked (runs moved into runs/), present (runs already there).
    """
    study_dir = Path(study_dir)
    archive = study_dir / ARCHIVE
    if not archive.is_file():
        raise ArchiveError(f"{archive}: no such archive; nothing to unpack.")
    staging = Path(tempfile.mkdtemp(prefix=_HIDDEN + "unpack-", dir=study_dir))  # same file system: moves are renames
    try:
        _extract(archive, staging)
        outside = sorted(p.name for p in staging.iterdir() if p.name != RUNS)
        if outside:
            raise ArchiveError(f"{archive} holds {', '.join(outside)} beside {RUNS}/: not a study's run archive.")
        names = sorted(p.parent.relative_to(staging).as_posix()
                       for p in (staging / RUNS).glob(f"*/*/{run_folders.MANIFEST}"))
        present, differing = [], []
        for name in names:
            target = study_dir / name
            if target.exists():
                (present if _same_folder(staging / name, target) else differing).append(name)
        if differing:
            raise ArchiveError(f"{study_dir / differing[0]} differs from the archived run of that name "
                               f"({len(differing)} such run(s)); move them away to unpack.")
        for name in names:
            if name not in present:
                (study_dir / name).parent.mkdir(parents=True, exist_ok=True)
                os.replace(staging / name, study_dir / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {"unpacked": len(names) - len(present), "present": len(present)}
