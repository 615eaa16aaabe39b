"""Frames held in one array: .npz, .npy, .h5, KITTI .hkl (with the sources_*.hkl beside it) and this
project's dataset files, with optional per-frame source ids."""

import h5py
import numpy as np

from prednet_keras.data.dataset import FrameDataset, open_dataset
from prednet_keras.data.errors import DataError
from prednet_keras.data.guards import (
    ZIP_ERRORS,
    check_h5_storage,
    check_npy_file,
    check_npz_arrays,
    open_h5,
)
from prednet_keras.data.hickle import read_hickle
from prednet_keras.data.pixels import to_uint8
from prednet_keras.data.source_base import Source, _frames_shape_check

ARRAY_EXTENSIONS = (".npz", ".npy", ".h5", ".hdf5", ".hkl")
FRAME_KEYS = ("frames", "X", "x", "images", "data", "arr_0")
SOURCE_KEYS = ("sources", "source", "source_ids")


class ArraySource(Source):
    """Frames held in one array (npz, npy, h5, hkl) plus optional per-frame sources.

    Args:
        path: the file.
        frames: the array, or an h5py dataset (read one frame at a time).
        sources: per-frame source ids, or an h5py dataset of them, or None.
        notes: lines for the provenance record.
        handle: the open h5py file behind `frames`, closed with the source.
        place: the array or dataset in the file, for error messages.
    """

    kind = "arrays"

    def __init__(self, path, frames, sources=None, notes=None, handle=None, place="frames"):
        super().__init__(path)
        self.frames = frames
        self.place = place
        self.shape = _frames_shape_check(frames.shape, f"{path}: {place}")
        if sources is not None:
            # The shape first: a damaged file may declare millions of ids.
            if not isinstance(sources, h5py.Dataset):
                sources = np.asarray(sources)
            if len(sources.shape) != 1 or sources.shape[0] != self.shape[0]:
                raise DataError(
                    f"{path}: source ids of shape {tuple(sources.shape)} for {self.shape[0]} frames "
                    "(need one per frame)"
                )
            sources = np.asarray(sources[()] if isinstance(sources, h5py.Dataset) else sources)
            if sources.dtype.kind in ("S", "O"):
                sources = np.array(
                    [s.decode("utf-8") if isinstance(s, bytes) else str(s) for s in sources.tolist()]
                )
        self.sources = sources
        self.notes = notes or []
        self._handle = handle

    def estimate(self):
        return self.shape[0]

    def _where(self, i):
        return f"{self.path}: {self.place}, frame {i}"

    def _frame(self, i):
        frame = np.asarray(self.frames[i])
        if frame.ndim == 2:
            frame = frame[..., np.newaxis]
        return to_uint8(frame, self._where(i))

    def runs(self):
        count = self.shape[0]
        if self.sources is None:
            yield str(self.path), ((self._frame(i), self._where(i)) for i in range(count))
            return
        changes = np.flatnonzero(self.sources[1:] != self.sources[:-1]) + 1
        bounds = np.r_[0, changes, count]
        for start, stop in zip(bounds[:-1], bounds[1:]):
            label = str(self.sources[start])
            yield label, ((self._frame(i), self._where(i)) for i in range(start, stop))

    def as_dataset(self):
        if self.frames.dtype != np.uint8 or len(self.frames.shape) != 4:
            return None
        provenance = {"inputs": [self.describe(hash_files=False)]}
        return FrameDataset(self.frames, self.sources, provenance, path=self.path, _file=self._handle)

    def describe(self, hash_files=True):
        record = super().describe(hash_files)
        record.update(frames=self.shape[0], frame_shape=list(self.shape[1:]))
        if self.notes:
            record["notes"] = list(self.notes)
        return record


def _pick_key(keys, wanted):
    for key in wanted:
        if key in keys:
            return key
    return None


def _open_npz_or_npy(path):
    try:
        if path.suffix.lower() == ".npy":
            check_npy_file(path)
            # Memory-mapped: a large .npy is paged in as sequences are read.
            return ArraySource(path, np.load(path, mmap_mode="r", allow_pickle=False), place="array")
        archive = np.load(path, allow_pickle=False)
    except ZIP_ERRORS as exc:
        raise DataError(f"{path}: truncated or damaged .npz (zip) file ({exc}); refused") from None
    except (OSError, ValueError) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{path}: unreadable {path.suffix} file ({exc})") from None
    keys = list(archive.files)
    frame_key = _pick_key(keys, FRAME_KEYS)
    if frame_key is None:
        candidates = [k for k in keys if k not in SOURCE_KEYS]
        if len(candidates) != 1:
            raise DataError(
                f"{path}: cannot tell which array holds the frames (keys: {', '.join(keys) or 'none'}; "
                f"name it one of {', '.join(FRAME_KEYS)})"
            )
        frame_key = candidates[0]
    source_key = _pick_key(keys, SOURCE_KEYS)
    check_npz_arrays(path, [frame_key] + ([source_key] if source_key else []))
    try:
        frames = archive[frame_key]
        sources = archive[source_key] if source_key else None
    except (OSError, ValueError, *ZIP_ERRORS) as exc:
        raise DataError(f"{path}: array {frame_key!r}: unreadable ({exc})") from None
    return ArraySource(path, frames, sources, notes=[f"frames from key {frame_key!r}"], place=f"array {frame_key!r}")


def _open_h5_arrays(path):
    handle = open_h5(path)
    try:
        keys = list(handle.keys())
        frame_key = _pick_key(keys, FRAME_KEYS)
        if frame_key is None or not isinstance(handle[frame_key], h5py.Dataset):
            raise DataError(
                f"{path}: HDF5 file without a frames dataset at the top level "
                f"(found: {', '.join(keys) or 'nothing'}; expected one of {', '.join(FRAME_KEYS)})"
            )
        frames = handle[frame_key]
        check_h5_storage(frames, path)
        source_key = _pick_key(keys, SOURCE_KEYS)
        sources = handle[source_key] if source_key else None
        if sources is not None:
            check_h5_storage(sources, path)
        return ArraySource(
            path, frames, sources, notes=[f"frames from {frame_key!r}"], handle=handle, place=f"dataset {frames.name!r}"
        )
    except BaseException:
        handle.close()
        raise


def _open_hickle(path):
    name = path.name
    if name.startswith("sources_"):
        raise DataError(f"{path}: this is a sources file; give the X_{name[8:]} file beside it")
    frames, handle = read_hickle(path, lazy=True)
    if not isinstance(frames, (h5py.Dataset, np.ndarray)):
        raise DataError(f"{path}: hickle file holds a list, not an array of frames")
    sources, notes = None, []
    if name.startswith("X_"):
        partner = path.with_name("sources_" + name[2:])
        if partner.exists():
            sources = np.asarray(read_hickle(partner, lazy=False)[0])
            notes.append(f"sources from {partner}")
        else:
            notes.append(f"no {partner.name} beside it: all frames one source")
    place = f"dataset {frames.name!r}" if isinstance(frames, h5py.Dataset) else "array"
    return ArraySource(path, frames, sources, notes=notes, handle=handle, place=place)


class DatasetSource(ArraySource):
    """This project's dataset file, read as a source (to re-size or merge it)."""

    kind = "dataset"

    def __init__(self, path):
        dataset = open_dataset(path, in_memory=False)
        super().__init__(path, dataset.frames, dataset.sources, handle=dataset._file, place="dataset '/frames'")
        self.provenance = dataset.provenance

    def as_dataset(self):
        return FrameDataset(self.frames, self.sources, self.provenance, path=self.path, _file=self._handle)
