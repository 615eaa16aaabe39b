"""KITTI as the authors' users get it, in Keras' cache folder, and found by name ("--data kitti").

    fetch_kitti(...)            the authors' preprocessed files (their download_data.sh): kitti_data.zip
                                fetched, X_{train,val,test}.hkl and sources_*.hkl unpacked into kitti_folder(),
                                checked, their checksums recorded, the zip removed
    kitti_folder(raw=False)     $KERAS_HOME/datasets/prednet-kitti (prednet-kitti-raw: the raw drives
                                prepared by kitti_raw.prepare_raw_kitti)
    kitti_file(split)           the file of one split, checked against its recorded checksum
    resolve_data(value, split)  "kitti" or "kitti-raw" -> that split's file; any other value unchanged

The files are the authors' own (hickle files of uint8 frames, 128x160, with the recording of each frame in
sources_*.hkl), read by data.hickle with h5py alone. What comes out of the zip is checked before it takes
its place: the six files, frames of 128x160x3 uint8 with one source id each; an archive that is not that is
refused and removed. Every later use checks the files against the checksums recorded when they arrived
(files.records), so a file damaged or changed since is refused before anything trains on it.
No framework at import.
"""

import os
import shutil
import zipfile
from pathlib import Path

from prednet_keras.data.errors import DataError
from prednet_keras.data.guards import ZIP_ERRORS, check_unpacking
from prednet_keras.files.diskwrite import NoRoomError, format_bytes, is_space_error, room_for, space_message, temp_path_for
from prednet_keras.files.downloads import cache_dir, fetch, folder_lock, source_url
from prednet_keras.files.records import ChecksumError, FileRecord
from prednet_keras.files.progress import ByteProgress

__all__ = ["DATA_NAMES", "EMBEDDED_CLIP_NOTE", "FRAME_SHAPE", "SPLITS", "describe_splits", "fetch_kitti",
           "kitti_file", "kitti_folder", "kitti_status", "name_of", "resolve_data", "training_data"]

SPLITS = ("train", "val", "test")
FRAME_SHAPE = (128, 160, 3)
# The names --data takes: the authors' preprocessed files, and the raw drives prepared here.
DATA_NAMES = ("kitti", "kitti-raw")
ZIP_NAME = "kitti_data.zip"
# download_data.sh's link (dl=1: the file itself rather than Dropbox's page about it).
ZIP_URL = "https://www.dropbox.com/s/rpwlnn6j39jjme4/kitti_data.zip?dl=1"
FILES = tuple(f"{kind}_{split}.hkl" for split in SPLITS for kind in ("X", "sources"))
# Prepared from the raw drives (kitti_raw): one dataset file per split.
RAW_FILES = tuple(f"kitti_{split}.h5" for split in SPLITS)
REFETCH = "run prednet-data kitti --refetch to fetch it again"
# What a training on the embedded clip (no --data) says first: it runs, but cannot learn much from it.
EMBEDDED_CLIP_NOTE = (
    "Training data: the embedded clip, 200 frames of street video in 5 scenes (50 more for validation), shipped "
    "so that a run works offline. That checks a set-up; it is far too little to learn from: the KITTI model "
    "trained on it predicts worse than copying the last frame.",
    "For the authors' KITTI (about 41,000 frames, 3 GB): prednet-data kitti, then prednet-train --data kitti.",
)
_CHUNK = 1 << 20


def kitti_folder(raw=False):
    """The cache folder of KITTI: the authors' preprocessed files, or (raw=True) the raw drives prepared."""
    return cache_dir("datasets", "prednet-kitti-raw" if raw else "prednet-kitti")


def _split_file(split, raw):
    if split not in SPLITS:
        raise DataError(f"KITTI has no split {split!r}; its splits are {', '.join(SPLITS)}.")
    return f"kitti_{split}.h5" if raw else f"X_{split}.hkl"


def kitti_status(raw=False):
    """Which of KITTI's files are in the cache folder: {file name: recorded or not}, and the folder."""
    folder = kitti_folder(raw)
    record = FileRecord(folder) if folder.is_dir() else None
    names = RAW_FILES if raw else FILES
    return folder, {name: record is not None and record.get(name) is not None and (folder / name).is_file()
                    for name in names}


def kitti_file(split, raw=False):
    """The file of one KITTI split, checked against the checksum recorded when it arrived.

    Args:
        split: "train", "val" or "test".
        raw: the raw drives prepared here (kitti_<split>.h5) instead of the authors' X_<split>.hkl.

    Raises:
        DataError: KITTI is not in the cache folder (run prednet-data kitti).
        ChecksumError: a file differs from its record.
    """
    name = _split_file(split, raw)
    folder = kitti_folder(raw)
    record = FileRecord(folder) if folder.is_dir() else None
    if record is None or record.get(name) is None:
        if raw:
            raise DataError(f"KITTI prepared from the raw drives is not in {folder}: run prednet-data kitti --raw "
                            "FOLDER first (FOLDER: the KITTI raw drives you downloaded).")
        raise DataError(f"KITTI is not in {folder}: run prednet-data kitti first (it fetches the authors' "
                        "preprocessed files, about 3 GB; KERAS_HOME moves the cache).")
    remedy = "run prednet-data kitti --raw FOLDER --overwrite to prepare it again" if raw else REFETCH
    path = record.check(name, remedy)
    if not raw:
        record.check(f"sources_{split}.hkl", remedy)
    return path


def resolve_data(value, split):
    """A --data value with KITTI's names resolved: "kitti" (the authors' files; else the raw drives prepared
    here, when only those are there) or "kitti-raw" -> the file of `split`, checked; other values unchanged,
    and so is a name that is also a file or folder in the working folder (the user's own ./kitti)."""
    if value not in DATA_NAMES or os.path.exists(value):
        return value
    raw = value == "kitti-raw"
    if not raw and not kitti_status()[1][_split_file(split, False)] and all(kitti_status(raw=True)[1].values()):
        raw = True
    return str(kitti_file(split, raw))


def name_of(path):
    """The --data name of a file of the cached KITTI ("kitti", "kitti-raw"), or None for any other path."""
    if path is None:
        return None
    try:
        parent = Path(path).resolve().parent
    except (OSError, TypeError):
        return None
    for raw, name in ((False, "kitti"), (True, "kitti-raw")):
        if parent == kitti_folder(raw).resolve():
            return name
    return None


def training_data(data, val_data):
    """(training data, validation data) of prednet-train with KITTI's names resolved: --data kitti trains on
    the train split and, unless --val-data says otherwise, validates on the val split (as kitti_train.py)."""
    if data in DATA_NAMES and val_data is None and not os.path.exists(data):
        val_data = data
    return resolve_data(data, "train"), resolve_data(val_data, "val")


def fetch_kitti(*, refetch=False, timeout=None, progress=True, say=print):
    """Fetches the authors' preprocessed KITTI into kitti_folder() (download_data.sh's files).

    Files already there are checked against their record and kept; the zip is fetched only when one is
    missing. A file that differs from its record is refused unless `refetch`, which fetches the zip again
    (it must have the checksum recorded when it first arrived) and replaces the files.

    Args:
        refetch: fetch the zip again and replace the files, even those that differ from their record.
        timeout: seconds to wait for the server (downloads.download_timeout).
        progress: show the transfers.
        say: prints one line of the command's output.

    Returns:
        {"folder", "record", "fetched": bool, "splits": {split: {"frames", "sources", "bytes"}}}.

    Raises:
        DownloadError, ChecksumError, DataError: one line each; the folder keeps its good files, and no file
            stands half-written in place of one.
    """
    folder = kitti_folder()
    with folder_lock(folder, "prednet-data kitti"):
        record = FileRecord(folder)
        _remove_staging(folder)
        missing = [name for name in FILES if record.get(name) is None or not (folder / name).is_file()]
        if not refetch:
            for name in FILES:
                if name not in missing:
                    record.check(name, REFETCH)
        fetched = bool(missing) or refetch
        if fetched:
            _fetch_and_unpack(folder, record, timeout, progress, say)
        return {"folder": folder, "record": record.path, "fetched": fetched, "splits": _describe(folder)}


def _fetch_and_unpack(folder, record, timeout, progress, say):
    archive = folder / ZIP_NAME
    known = record.get(ZIP_NAME)
    url = source_url(ZIP_URL, ZIP_NAME)
    say(f"Fetching the authors' preprocessed KITTI ({url}) into {folder} ...")
    # The zip holds uncompressed-looking frames: what is unpacked takes about as much room again.
    sha256 = fetch(url, archive, sha256=known and known.get("sha256"), timeout=timeout, progress=progress,
                   unpacked_ratio=1.0, say=say)
    if known is None:
        record.add(ZIP_NAME, sha256=sha256, url=url, removed_after_unpacking=True)
    try:
        _unpack(archive, folder, record, url, progress, say)
    except (DataError, ChecksumError):
        # What it holds is not the authors' files: fetching it again is the only way on.
        archive.unlink(missing_ok=True)
        record.remove(ZIP_NAME)
        raise
    archive.unlink(missing_ok=True)


def _unpack(archive, folder, record, url, progress, say):
    """Unpacks the six files into a staging folder, checks them there, then moves each into place."""
    total = 0
    try:
        with zipfile.ZipFile(archive) as opened:
            members = _members(opened, archive)
            total = sum(info.file_size for info in members.values())
            shortage = room_for(folder / FILES[0], total)
            if shortage is not None:
                raise NoRoomError(space_message(shortage, folder / FILES[0], needed=total)
                                  + f" (unpacking {archive.name}, which is kept: run the command again once there is "
                                  "room)")
            staging = folder / f".staging-{temp_path_for(archive).name}"
            staging.mkdir()
            try:
                sums = {}
                with ByteProgress(f"unpacking {archive.name}", total, enabled=progress) as shown:
                    for name, info in members.items():
                        check_unpacking(f"{archive}: member {info.filename!r}", info.file_size, info.compress_size,
                                        in_memory=False)
                        sums[name] = _copy_member(opened, info, staging / name, shown)
                for split in SPLITS:
                    _check_split(staging / f"X_{split}.hkl", archive)
                for name in FILES:
                    (staging / name).replace(folder / name)
                    record.add(name, sha256=sums[name], url=url, member=members[name].filename)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except ZIP_ERRORS as error:
        raise DataError(f"{archive}: truncated or damaged zip archive ({error}); removed: run the command again "
                        "to download it anew.") from None
    except OSError as error:
        if not is_space_error(error):
            raise
        raise NoRoomError(space_message(error, folder / FILES[0], needed=total)
                          + f" (unpacking {archive.name}, which is kept: run the command again once there is room)"
                          ) from None
    say(f"Unpacked and checked {len(FILES)} files into {folder}; checksums in {record.path}.")


def _members(opened, archive):
    """{file name: zip member} of the six files, found by name at any depth (the zip may hold a folder)."""
    found = {}
    for info in opened.infolist():
        name = info.filename.rsplit("/", 1)[-1]
        if name in FILES and not info.is_dir() and not info.filename.startswith("__MACOSX/"):
            if name in found:
                raise DataError(f"{archive}: holds {name} twice ({found[name].filename}, {info.filename}); refused.")
            found[name] = info
    missing = [name for name in FILES if name not in found]
    if missing:
        raise DataError(f"{archive}: not the authors' KITTI archive: {', '.join(missing)} missing (it holds "
                        f"{len(opened.infolist())} entries); removed.")
    return found


def _copy_member(opened, info, target, shown):
    """Copies one member out of the zip (its CRC checked by zipfile at the end) and returns its SHA-256."""
    import hashlib

    digest = hashlib.sha256()
    with opened.open(info) as source, open(target, "wb") as out:
        for block in iter(lambda: source.read(_CHUNK), b""):
            out.write(block)
            digest.update(block)
            shown.update(len(block))
    return digest.hexdigest()


def _check_split(path, archive):
    """Refuses X_<split>.hkl unless it holds 128x160x3 uint8 frames with one source id each."""
    from prednet_keras.data.sources import open_source

    source = open_source(path)
    try:
        where = f"{archive}: {path.name}"
        if source.shape[1:] != FRAME_SHAPE or source.frames.dtype.name != "uint8":
            raise DataError(f"{where} holds frames of {'x'.join(map(str, source.shape[1:]))} "
                            f"{source.frames.dtype}, not the authors' 128x160x3 uint8; refused and removed.")
        if source.sources is None:
            raise DataError(f"{where}: no sources file beside it in the archive; refused and removed.")
        if source.shape[0] == 0:
            raise DataError(f"{where} holds no frames; refused and removed.")
    finally:
        if source._handle is not None:
            source._handle.close()


def _describe(folder):
    """Frames and recordings of each split (read from the files' metadata and source ids)."""
    from prednet_keras.data.sources import open_source

    splits = {}
    for split in SPLITS:
        source = open_source(folder / f"X_{split}.hkl")
        try:
            ids = source.sources
            recordings = int(len(set(ids.tolist()))) if ids is not None else 1
            splits[split] = {"frames": int(source.shape[0]), "recordings": recordings,
                             "bytes": (folder / f"X_{split}.hkl").stat().st_size}
        finally:
            if source._handle is not None:
                source._handle.close()
    return splits


def _remove_staging(folder):
    """Removes staging folders a killed command left (called under the folder's lock)."""
    for path in folder.glob(".staging-*"):
        shutil.rmtree(path, ignore_errors=True)


def describe_splits(splits):
    """'train 41,396 frames (57 recordings, 2.5 GiB), ...' for a message."""
    return ", ".join(f"{split} {info['frames']:,} frames ({info['recordings']} recording"
                     f"{'' if info['recordings'] == 1 else 's'}, {format_bytes(info['bytes'])})"
                     for split, info in splits.items())
