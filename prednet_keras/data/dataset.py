"""The project's dataset file and its in-memory counterpart.

A dataset file is HDF5 with:

    /frames    uint8 (N, H, W, C), one chunk per frame (a sequence read touches
               exactly its own frames); uncompressed by default, because
               streaming gzip chunks decodes only ~1,000 frames/s per core
               (uncompressed: ~10,000); gzip suits small sets, which
               open_dataset reads into memory once
    /sources   (N,) UTF-8 strings: the source (clip, drive, scene) of each frame
    attrs      format = "prednet-keras-frames", format_version = 1,
               provenance = JSON text (inputs, their hashes, size, mode,
               scene cuts, the command, the time)

Any HDF5 reader can open it; h5py streams frames from disk, so a file larger
than memory (KITTI's training set is ~2.5 GB of uint8) never needs a float copy.

A dataset file may also be stored xz-compressed, named NAME.h5.xz (`xz -d`
gives back NAME.h5): the readers here unpack it into memory and read it as
they read NAME.h5. xz's delta filter finds what HDF5's gzip cannot, the
likeness of neighbouring pixels, so the embedded video (data/README.md) is
stored so, at about 60% of its gzip size.
"""

import hashlib
import json
import lzma
import math
import tempfile
from pathlib import Path

import h5py
import numpy as np

# check_output, commit and temp_path_for are used from here by scripts too.
from prednet_keras.data.atomic import (
    GuardedFile,
    check_output,
    commit,
    room_for,
    space_error,
    sweep_stale_temps,
    temp_path_for,
    write_bytes_whole,
)
from prednet_keras.data.errors import DataError
from prednet_keras.data.guards import XZ_SUFFIX, check_h5_storage, open_h5

FORMAT = "prednet-keras-frames"
FORMAT_VERSION = 1
COMPRESSIONS = ("gzip", "lzf", "none")
# Below this many bytes of frames, open_dataset reads everything into memory:
# numpy slicing is many times faster than one HDF5 read per sequence.
DEFAULT_MEMORY_LIMIT = 1 << 30


class FrameDataset:
    """Frames, the source of each frame, and where they came from.

    Args:
        frames: (N, H, W, C) uint8 array, or an h5py dataset of that shape
            (frames are then read from disk as needed). (N, H, W) arrays get
            a channel axis.
        sources: (N,) per-frame source ids (strings or ints). Sequences never
            cross from one source to another. None: all frames one source.
        provenance: a JSON-serialisable dict describing the origin.
        path: the file the frames live in, if any.
    """

    def __init__(self, frames, sources=None, provenance=None, *, path=None, _file=None):
        where = str(path) if path is not None else "frames"
        if not isinstance(frames, h5py.Dataset):
            frames = np.asarray(frames)
            if frames.ndim == 3:
                frames = frames[..., np.newaxis]
        if len(frames.shape) != 4:
            raise DataError(f"{where}: frames must be (N, H, W, C), got shape {tuple(frames.shape)}")
        if frames.dtype != np.uint8:
            raise DataError(f"{where}: frames must be uint8, got {frames.dtype}")
        count = frames.shape[0]
        if sources is None:
            sources = np.zeros(count, dtype=np.int64)
        else:
            sources = np.asarray(sources)
            if sources.ndim != 1 or len(sources) != count:
                raise DataError(
                    f"{where}: {len(sources) if sources.ndim == 1 else sources.shape} source ids "
                    f"for {count} frames (need one per frame)"
                )
        self.frames = frames
        self.sources = sources
        self.provenance = dict(provenance or {})
        self.path = None if path is None else Path(path)
        self._file = _file
        self._run_ids = None

    def __len__(self):
        return int(self.frames.shape[0])

    @property
    def frame_shape(self):
        """(H, W, C) of one frame."""
        return tuple(int(d) for d in self.frames.shape[1:])

    @property
    def in_memory(self):
        """True when frames are a numpy array rather than read from disk."""
        return isinstance(self.frames, np.ndarray)

    @property
    def nbytes(self):
        """Size of all frames in bytes."""
        return int(np.prod(self.frames.shape, dtype=np.int64))

    def run_ids(self):
        """Index of the run of equal consecutive source ids each frame belongs to.

        Two frames can share a sequence only when they share a run: a source
        id that reappears after another source's frames starts a new run.
        """
        if self._run_ids is None:
            changes = np.zeros(len(self), dtype=np.int64)
            if len(self) > 1:
                changes[1:] = self.sources[1:] != self.sources[:-1]
            self._run_ids = np.cumsum(changes)
        return self._run_ids

    def source_runs(self):
        """List of (source, start, stop) for each run of frames from one source."""
        ids = self.run_ids()
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if len(self) else np.array([], int)
        stops = np.r_[starts[1:], len(self)]
        return [(self.sources[a].item(), int(a), int(b)) for a, b in zip(starts, stops)]

    def load(self):
        """This dataset with all frames in memory (self if they already are)."""
        if self.in_memory:
            return self
        return FrameDataset(self.frames[()], self.sources, self.provenance, path=self.path)

    def select(self, index):
        """An in-memory dataset of some frames.

        Args:
            index: a boolean mask, an array of frame indices, or a slice.

        Returns:
            A FrameDataset holding copies of the chosen frames and their sources.
        """
        if isinstance(index, slice):
            index = np.arange(len(self))[index]
        index = np.asarray(index)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        if self.in_memory:
            frames = self.frames[index]
        else:
            frames = np.stack([self.frames[int(i)] for i in index]) if len(index) else (
                np.zeros((0,) + self.frame_shape, np.uint8)
            )
        return FrameDataset(frames, self.sources[index], self.provenance, path=self.path)

    def close(self):
        """Closes the file behind a disk-backed dataset (no-op otherwise)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):
        # h5py objects cannot be pickled; worker processes reopen the file.
        state = dict(self.__dict__)
        if not self.in_memory:
            state["frames"] = ("h5", str(self.path), self.frames.name)
            state["_file"] = None
        return state

    def __setstate__(self, state):
        frames = state["frames"]
        if isinstance(frames, tuple) and len(frames) == 3 and frames[0] == "h5":
            handle = open_h5(frames[1])
            state["frames"], state["_file"] = handle[frames[2]], handle
        self.__dict__.update(state)

    def __repr__(self):
        where = f", path={str(self.path)!r}" if self.path is not None else ""
        storage = "memory" if self.in_memory else "disk"
        return (
            f"FrameDataset({len(self)} frames of {self.frame_shape}, "
            f"{len(self.source_runs())} source runs, {storage}{where})"
        )


def _decode_strings(values):
    values = np.asarray(values)
    if values.dtype.kind in ("S", "O"):
        values = np.array(
            [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values.tolist()],
            dtype=str,
        )
    return values


def is_dataset_file(path):
    """True when `path` is an HDF5 file in the project's dataset format (or such a file xz-compressed)."""
    try:
        with open_h5(path) as handle:
            return handle.attrs.get("format") == FORMAT
    except (OSError, ValueError):
        return False


def check_stored_frames(handle, path):
    """Refuses a dataset file whose frames or sources are declared but not stored.

    Checked from metadata before anything is read: a damaged file that
    claims millions of frames must not be read as millions of black ones.
    """
    frames, sources = handle["frames"], handle["sources"]
    if len(frames.shape) != 4 or sources.shape != (frames.shape[0],):
        raise DataError(
            f"{path}: dataset 'frames' has shape {frames.shape} and 'sources' {sources.shape}; "
            "need (N, H, W, C) frames and one source id per frame (damaged?)"
        )
    if frames.dtype != np.uint8:
        raise DataError(
            f"{path}: dataset '/frames' holds {frames.dtype}; a dataset file holds uint8 frames "
            "(prednet-data prepare converts other arrays, checking their values)"
        )
    check_h5_storage(frames, path)
    check_h5_storage(sources, path)


def open_dataset(path, in_memory=None, memory_limit=DEFAULT_MEMORY_LIMIT):
    """Opens a dataset file written by prepare().

    Args:
        path: the .h5 file (or .h5.xz: see the module's docstring).
        in_memory: True reads all frames into memory, False streams them
            from disk (from memory for an .h5.xz file), None (default) reads them into memory when they take
            at most `memory_limit` bytes.
        memory_limit: see in_memory.

    Returns:
        A FrameDataset. Close it (or use it in a `with`) when it streams.

    Raises:
        DataError: missing file, not HDF5, not this project's format, or
            frames declared but not stored (see check_stored_frames).
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file")
    handle = open_h5(path)
    try:
        if handle.attrs.get("format") != FORMAT:
            raise DataError(
                f"{path}: an HDF5 file, but not a prednet-keras dataset (no format="
                f"{FORMAT!r} attribute); read it with load_frames() or convert it with "
                "`prednet-data prepare`"
            )
        version = int(handle.attrs.get("format_version", 0))
        if version > FORMAT_VERSION:
            raise DataError(
                f"{path}: dataset format version {version} is newer than this "
                f"prednet-keras reads ({FORMAT_VERSION}); upgrade prednet-keras"
            )
        if "frames" not in handle or "sources" not in handle:
            raise DataError(f"{path}: dataset file without 'frames' or 'sources' (damaged?)")
        frames = handle["frames"]
        check_stored_frames(handle, path)
        sources = _decode_strings(handle["sources"][()])
        try:
            provenance = json.loads(handle.attrs.get("provenance", "{}"))
        except ValueError:
            provenance = {"unreadable_provenance": str(handle.attrs.get("provenance"))}
        dataset = FrameDataset(frames, sources, provenance, path=path, _file=handle)
        nbytes = dataset.nbytes
        if in_memory or (in_memory is None and nbytes <= memory_limit):
            loaded = FrameDataset(frames[()], sources, provenance, path=path)
            handle.close()
            return loaded
        return dataset
    except Exception:
        if handle.id.valid:
            handle.close()
        raise


def _compression_kwargs(compression):
    if compression in (None, "none"):
        return {}
    if compression == "gzip":
        return {"compression": "gzip", "compression_opts": 4}
    if compression == "lzf":
        return {"compression": "lzf"}
    raise DataError(f"compression {compression!r} is not one of {', '.join(COMPRESSIONS)}")


class DatasetWriter:
    """Writes a dataset file frame by frame, then moves it into place.

    Use as a context manager: on an exception the temp file is removed and
    nothing at `output` is touched. Temp files of earlier writers that died
    are removed on entry (see atomic.py). A full disk ends the write with
    one DataError that says how much space the output needs.

    Args:
        output: the destination path.
        overwrite: replace an existing file.
        compression: "none" (default), "gzip" or "lzf".
        expected_frames: how many frames will come, if known: an
            uncompressed output that cannot fit is refused at the first frame.
    """

    def __init__(self, output, overwrite=False, compression="none", expected_frames=None):
        self.output = Path(output)
        if self.output.suffix == ".xz":
            # Readers take NAME.h5.xz as a whole-file xz of a dataset file; this writes plain HDF5.
            raise DataError(f"{self.output}: a dataset file is written as HDF5; name it .h5, or write NAME.h5.xz "
                            "with write_xz_dataset")
        self.overwrite = overwrite
        self._compression = _compression_kwargs(compression)
        self.compression = compression or "none"
        self.expected_frames = expected_frames
        check_output(self.output, overwrite)
        self.temp = temp_path_for(self.output)
        self._file = None
        self._handle = None
        self._frames = None
        self._frame_bytes = 0
        self._count = 0
        self._finished = False

    def __enter__(self):
        sweep_stale_temps(self.output)
        self._file = GuardedFile(self.temp)
        try:
            self._handle = h5py.File(self._file, "w")
        except BaseException:
            self._file.close()
            self.temp.unlink(missing_ok=True)
            raise
        return self

    def _needed(self):
        """(estimated bytes of the whole output, whether that is only a lower bound)."""
        expected = max(self.expected_frames or 0, self._count)
        if self.expected_frames and not self._compression:
            return expected * self._frame_bytes + (1 << 16), False
        written = self._file.extent if self._file is not None else 0
        if self.expected_frames and self._count:
            # Compressed: scale what the frames so far took.
            return written * expected // self._count, False
        return written, True

    def _space_error(self, error):
        needed, at_least = self._needed()
        return space_error(error, self.output, needed, at_least)

    def _check_written(self):
        if self._file.error is not None:
            raise self._space_error(self._file.error)

    def append(self, frame, where=None):
        """Adds one (H, W, C) uint8 frame.

        Args:
            frame: the frame.
            where: the file it came from, for error messages.
        """
        if self._frames is None:
            self._frames = self._handle.create_dataset(
                "frames",
                shape=(0,) + frame.shape,
                maxshape=(None,) + frame.shape,
                dtype=np.uint8,
                chunks=(1,) + frame.shape,
                **self._compression,
            )
            self._frame_bytes = math.prod(frame.shape)
            needed, at_least = self._needed()
            if not at_least:
                # Refuse now rather than after filling the disk.
                shortage = room_for(self.temp, needed)
                if shortage is not None:
                    raise self._space_error(shortage)
        if frame.shape != self._frames.shape[1:]:
            raise DataError(
                f"{where or f'frame {self._count}'}: frame is "
                f"{frame.shape[0]}x{frame.shape[1]}x{frame.shape[2]}, "
                f"earlier frames {'x'.join(map(str, self._frames.shape[1:]))}: mixed sizes "
                "(give a size to resize them all)"
            )
        if self._count == self._frames.shape[0]:
            self._frames.resize(self._count + 256, axis=0)
        self._frames[self._count] = frame
        self._count += 1
        self._check_written()

    def finish(self, sources, provenance):
        """Writes the sources and provenance; the file moves into place on exit."""
        if self._count == 0:
            raise DataError(f"{self.output}: no frames to write")
        self._frames.resize(self._count, axis=0)
        sources = np.asarray([str(s) for s in np.asarray(sources).tolist()], dtype=object)
        if len(sources) != self._count:
            raise DataError(f"{len(sources)} source ids for {self._count} frames")
        self._handle.create_dataset("sources", data=sources, dtype=h5py.string_dtype())
        self._handle.attrs["format"] = FORMAT
        self._handle.attrs["format_version"] = FORMAT_VERSION
        self._handle.attrs["provenance"] = json.dumps(provenance, sort_keys=True)
        self._check_written()
        self._finished = True

    def __exit__(self, exc_type, exc, tb):
        keep = False
        try:
            try:
                self._handle.close()
            except Exception:
                # After a failed write the library may still complain on
                # close; the write error is what gets reported.
                if self._file.error is None:
                    raise
            if exc_type is None and self._finished:
                self._file.sync()
                keep = self._file.error is None
        finally:
            self._file.close()
            if not keep:
                self.temp.unlink(missing_ok=True)
        if exc_type is None and self._file.error is not None:
            raise self._space_error(self._file.error)
        if keep:
            commit(self.temp, self.output, self.overwrite)
        return False


def write_dataset(output, dataset, overwrite=False, compression="none", provenance=None):
    """Writes a FrameDataset (or frames) to a dataset file, atomically.

    Args:
        output: the destination path.
        dataset: a FrameDataset.
        overwrite: replace an existing file.
        compression: "none" (default), "gzip" or "lzf".
        provenance: dict to store; defaults to the dataset's own.

    Returns:
        The output path.
    """
    with DatasetWriter(output, overwrite, compression, expected_frames=len(dataset)) as writer:
        for i in range(len(dataset)):
            writer.append(np.asarray(dataset.frames[i]))
        writer.finish(dataset.sources, dataset.provenance if provenance is None else provenance)
    return Path(output)


# `xz --delta=dist=3 --lzma2=preset=9e,lc=4,lp=0,pb=0`: the delta filter (distance 3, one RGB pixel) turns
# smooth image regions into runs of small numbers that LZMA2 codes well. On the embedded video's uncompressed
# dataset files this gives 4.72 + 1.47 + 3.38 MB against HDF5 gzip-4's 8.22 + 2.31 + 5.69 MB (plain preset 9e:
# 5.53 + 1.55 + 4.03 MB), and unpacks in a few tenths of a second.
XZ_FILTERS = [
    {"id": lzma.FILTER_DELTA, "dist": 3},
    {"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "lc": 4, "lp": 0, "pb": 0},
]


def write_xz_dataset(output, dataset, overwrite=False, provenance=None):
    """Writes a FrameDataset as NAME.h5.xz: an uncompressed dataset file, the whole file xz-compressed with
    XZ_FILTERS (what the readers take, the module's docstring), written whole or not at all, then read back.

    Returns:
        The output path.

    Raises:
        DataError: an output not named .h5.xz, one that exists without `overwrite`, or a file that does not
            read back to the same frames and sources (it is removed).
    """
    output = Path(output)
    if output.suffixes[-2:] != [".h5", XZ_SUFFIX]:
        raise DataError(f"{output}: write_xz_dataset writes NAME.h5.xz.")
    check_output(output, overwrite)
    with tempfile.TemporaryDirectory() as folder:
        plain = write_dataset(Path(folder) / output.stem, dataset, compression="none", provenance=provenance)
        packed = lzma.compress(plain.read_bytes(), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, filters=XZ_FILTERS)
    write_bytes_whole(output, packed, overwrite)
    with open_dataset(output) as written:
        same = dataset_checksum(written) == dataset_checksum(dataset)
    if not same:
        output.unlink()
        raise DataError(f"{output}: does not read back to the frames and sources written; removed.")
    return output


def describe(dataset):
    """A summary of a dataset, for `prednet-data info` and logs.

    Args:
        dataset: a FrameDataset or a path to a dataset file.

    Returns:
        A dict: frames, frame_shape, sources (per-source frame counts, in
        order), and for files: path, bytes, compression, provenance.
    """
    if not isinstance(dataset, FrameDataset):
        with open_dataset(dataset, in_memory=False) as opened:
            return describe(opened)
    info = {
        "frames": len(dataset),
        "frame_shape": list(dataset.frame_shape),
        "source_runs": [
            {"source": str(source), "start": start, "frames": stop - start}
            for source, start, stop in dataset.source_runs()
        ],
        "provenance": dataset.provenance,
    }
    if dataset.path is not None:
        info["path"] = str(dataset.path)
        if dataset.path.exists():
            info["bytes"] = dataset.path.stat().st_size
    if not dataset.in_memory:
        info["compression"] = dataset.frames.compression or "none"
        if dataset.path is not None and dataset.path.name.lower().endswith(XZ_SUFFIX):
            # The file is compressed as a whole; the frames inside it are not.
            info["compression"] = "xz"
    return info


def dataset_checksum(dataset, chunk=256):
    """SHA-256 of a FrameDataset's frames (shape and bytes) and source ids.

    Args:
        dataset: a FrameDataset (in memory or streamed from disk).
        chunk: frames hashed per read.
    """
    digest = hashlib.sha256()
    digest.update(repr(tuple(dataset.frames.shape)).encode())
    for start in range(0, len(dataset), chunk):
        digest.update(np.ascontiguousarray(dataset.frames[start : start + chunk]).tobytes())
    digest.update("\x00".join(str(s) for s in np.asarray(dataset.sources).tolist()).encode())
    return "sha256:" + digest.hexdigest()
