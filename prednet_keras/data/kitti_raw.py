"""The raw KITTI drives prepared as the authors' process_kitti.py prepared them: one dataset file per split.

process_kitti.py took the drives of three of KITTI's raw-data categories (city, residential, road), read the
frames of camera image_03 (the right colour camera) in file-name order, scaled each to 128 rows keeping its
aspect (bilinear), cut out the middle 160 columns, and split by recording: 2011_09_26_drive_0005 (city) for
validation; 0104 (city), 0079 (residential) and 0070 (road) for testing; every other drive for training, each
frame's source being "<category>-<drive>". prepare_raw_kitti does the same with the drives on disk
(data.prepare's resize_crop is process_im's geometry for frames wider than 5:4), and writes
kitti_{train,val,test}.h5 into kitti_folder(raw=True), with their checksums.

Drives are found in either layout:

    RAW/<category>/<drive>_sync/<date>/<drive>_sync/image_03/data/*.png   process_kitti.py's (zips unpacked
                                                                         per category): categories other than
                                                                         the three are left out, as there
    RAW/<date>/<drive>_sync/image_03/data/*.png                           KITTI's own (every zip unpacked in
                                                                         one folder): every drive is used; the
                                                                         held-out drives' categories are known

No framework at import.
"""

import re
from pathlib import Path

from prednet_keras.data.errors import DataError
from prednet_keras.data.image_files import IMAGE_EXTENSIONS, FileSequence, natural_key
from prednet_keras.data.kitti import FRAME_SHAPE, RAW_FILES, SPLITS, kitti_folder
from prednet_keras.files.downloads import folder_lock
from prednet_keras.files.records import FileRecord

__all__ = ["CATEGORIES", "TEST_RECORDINGS", "VAL_RECORDINGS", "find_drives", "prepare_raw_kitti", "split_drives"]

CATEGORIES = ("city", "residential", "road")
# process_kitti.py's held-out recordings, (category, drive).
VAL_RECORDINGS = (("city", "2011_09_26_drive_0005_sync"),)
TEST_RECORDINGS = (("city", "2011_09_26_drive_0104_sync"), ("residential", "2011_09_26_drive_0079_sync"),
                   ("road", "2011_09_26_drive_0070_sync"))
CAMERA = "image_03"
_DRIVE = re.compile(r"^\d{4}_\d{2}_\d{2}_drive_\d{4}_sync$")
_KNOWN = dict((drive, category) for category, drive in VAL_RECORDINGS + TEST_RECORDINGS)


class Drive:
    """One raw KITTI recording: its name, category ("" when the layout does not say) and frame files."""

    def __init__(self, name, category, frames):
        self.name = name
        self.category = category
        self.frames = frames

    @property
    def source(self):
        """Its frames' source id, as process_kitti.py named it."""
        return f"{self.category}-{self.name}" if self.category else self.name


class KittiDrives(FileSequence):
    """The frames of several drives, one source per drive (a data.prepare source)."""

    kind = "kitti-raw"

    def __init__(self, raw, drives):
        super().__init__(raw, [(drive.source, drive.frames) for drive in drives])


def find_drives(raw):
    """The drives under `raw` with frames of camera image_03, in either layout (see the module).

    Returns:
        (drives, notes): Drive objects sorted by category (city, residential, road) and name, and lines
        saying what was left out or assumed.

    Raises:
        DataError: no drive at all, or one drive found twice.
    """
    raw = Path(raw)
    if not raw.is_dir():
        raise DataError(f"{raw}: no such folder (give the folder holding the KITTI raw drives).")
    by_category = any((raw / category).is_dir() for category in CATEGORIES)
    drives, skipped, notes = {}, set(), []
    for camera in sorted(raw.rglob(CAMERA), key=natural_key):
        folder = camera.parent
        if not (camera / "data").is_dir() or not _DRIVE.match(folder.name):
            continue
        parts = folder.relative_to(raw).parts
        if by_category:
            if parts[0] not in CATEGORIES:
                skipped.add(parts[0])
                continue
            category = parts[0]
        else:
            category = _KNOWN.get(folder.name, "")
        frames = sorted((p for p in (camera / "data").iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS),
                        key=lambda p: p.name)
        if not frames:
            continue
        if folder.name in drives:
            raise DataError(f"{raw}: drive {folder.name} found twice ({drives[folder.name].frames[0].parent} and "
                            f"{camera / 'data'}); keep one.")
        drives[folder.name] = Drive(folder.name, category, frames)
    if not drives:
        raise DataError(f"{raw}: no KITTI raw drive found (folders <drive>_sync/{CAMERA}/data/ holding frames, e.g. "
                        f"2011_09_26/2011_09_26_drive_0005_sync/{CAMERA}/data/0000000000.png).")
    if skipped:
        notes.append(f"left out, as process_kitti.py did: {', '.join(sorted(skipped))}")
    if not by_category:
        notes.append("no city/, residential/, road/ folders: every drive found is used (process_kitti.py used "
                     "those three categories only)")
    order = {category: rank for rank, category in enumerate(CATEGORIES)}
    ordered = sorted(drives.values(), key=lambda d: (order.get(d.category, len(order)), d.name))
    return ordered, notes


def split_drives(drives):
    """{split: drives} by process_kitti.py's held-out recordings.

    Raises:
        DataError: a held-out recording is missing (the split would not be the authors').
    """
    held_out = {"val": [d for _, d in VAL_RECORDINGS], "test": [d for _, d in TEST_RECORDINGS]}
    names = {drive.name: drive for drive in drives}
    missing = [name for split in ("val", "test") for name in held_out[split] if name not in names]
    if missing:
        raise DataError(f"the raw drives lack {', '.join(missing)}, which process_kitti.py holds out for "
                        "validation and testing; download them too, so that the split is the authors'.")
    splits = {split: [names[name] for name in held_out[split]] for split in ("val", "test")}
    kept = {name for split in splits.values() for name in (d.name for d in split)}
    splits["train"] = [drive for drive in drives if drive.name not in kept]
    if not splits["train"]:
        raise DataError("the raw drives hold only the held-out recordings; the training split would be empty.")
    return {split: splits[split] for split in SPLITS}


def prepare_raw_kitti(raw, *, overwrite=False, progress=True, say=print):
    """Prepares the raw KITTI drives under `raw` as process_kitti.py did, into kitti_folder(raw=True).

    Args:
        raw: the folder holding the drives (see the module for the layouts).
        overwrite: replace dataset files prepared before.
        progress: show a progress bar per split.
        say: prints one line of the command's output.

    Returns:
        {"folder", "record", "notes", "splits": {split: {"frames", "recordings", "bytes"}}}; the notes (what
        was left out or assumed) are also said first.

    Raises:
        DataError: no drives, a held-out recording missing, an unreadable frame, an output that exists
            (without `overwrite`), a full disk; files written before the failure stay whole.
    """
    from prednet_keras.data.prepare import prepare

    drives, notes = find_drives(raw)
    splits = split_drives(drives)
    for note in notes:
        say(f"({note})")
    folder = kitti_folder(raw=True)
    with folder_lock(folder, "prednet-data kitti --raw"):
        outputs = {split: folder / name for split, name in zip(SPLITS, RAW_FILES)}
        existing = [str(path) for path in outputs.values() if path.exists()]
        if existing and not overwrite:
            raise DataError(f"{existing[0]}: already prepared; not overwritten (pass --overwrite to prepare it "
                            "again).")
        record = FileRecord(folder)
        described = {}
        for split, chosen in splits.items():
            say(f"Preparing the {split} split: {len(chosen)} drive{'s' if len(chosen) != 1 else ''} ...")
            prepare([KittiDrives(raw, chosen)], outputs[split], FRAME_SHAPE[:2], "resize_crop",
                    interpolation="bilinear", scene_cuts=False, overwrite=overwrite, hash_inputs=False,
                    provenance={"origin": "KITTI raw data (Geiger et al. 2013), camera image_03, prepared as "
                                          "Lotter et al.'s process_kitti.py",
                                "split": split, "recordings": [drive.source for drive in chosen]},
                    command=f"prednet-data kitti --raw {raw}", progress=progress)
            record.add(outputs[split].name, raw=str(Path(raw).resolve()), split=split)
            described[split] = {"frames": sum(len(drive.frames) for drive in chosen), "recordings": len(chosen),
                                "bytes": outputs[split].stat().st_size}
    return {"folder": folder, "record": record.path, "notes": notes, "splits": described}
