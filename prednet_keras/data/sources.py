"""Readers for everything users arrive with, behind one interface.

Every source yields *runs*: consecutive frames of one source id (a clip, a
folder, a KITTI drive). Frames are (h, w, c) uint8, read one at a time, so a
source far larger than memory can be converted frame by frame.

Supported:
  - a folder of frames (png, jpg, bmp, tif, gif, webp, ppm/pgm), in natural
    name order (frame2 before frame10); a folder without images whose
    subfolders hold images gives one source per such subfolder;
  - a text list of frame paths, one per line (the Chainer PredNet's
    train_list.txt; blank lines and #comments skipped; only the first
    whitespace-separated field is used unless the whole line is an existing
    path); a list whose entries are themselves list files (the Chainer
    --sequences file) gives one source per listed file;
  - video files (mp4, avi, mov, mkv, webm, ...) through PyAV's bundled FFmpeg;
  - the authors' KITTI files, X_*.hkl (+ sources_*.hkl beside it), see
    read_hickle for the hickle layouts that h5py can read;
  - .npz / .npy / .h5 arrays with optional per-frame sources;
  - this project's dataset files.
"""

import hashlib
import re
from pathlib import Path

import h5py
import numpy as np
from PIL import Image, UnidentifiedImageError

from prednet_keras.data.dataset import FrameDataset, is_dataset_file, open_dataset
from prednet_keras.data.errors import DataError
from prednet_keras.data.guards import ZIP_ERRORS, check_h5_storage, check_npy_file, check_npz_arrays, open_h5
from prednet_keras.data.pixels import to_uint8

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".gif", ".webp", ".ppm", ".pgm")
VIDEO_EXTENSIONS = (
    ".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg", ".wmv", ".flv", ".ogv", ".3gp",
)
LIST_EXTENSIONS = (".txt", ".lst", ".list")
ARRAY_EXTENSIONS = (".npz", ".npy", ".h5", ".hdf5", ".hkl")
FRAME_KEYS = ("frames", "X", "x", "images", "data", "arr_0")
SOURCE_KEYS = ("sources", "source", "source_ids")

_DIGITS = re.compile(r"(\d+)")


def natural_key(name):
    """Sort key that puts frame2 before frame10 (zero-padded names sort as usual)."""
    return [int(part) if part.isdigit() else part.lower() for part in _DIGITS.split(str(name))]


def supported_formats():
    """One line per kind of source, for help texts and error messages."""
    return (
        "a folder of frames (" + " ".join(IMAGE_EXTENSIONS) + "), a list file ("
        + " ".join(LIST_EXTENSIONS) + "), a video (" + " ".join(VIDEO_EXTENSIONS)
        + "), KITTI X_*.hkl, or arrays (.npz .npy .h5)"
    )


def sha256_of(path, chunk=1 << 20):
    """Hex SHA-256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def read_image(path):
    """Reads one image file as an (h, w, c) uint8 array (c = 1 or 3).

    Palette, alpha and CMYK images become RGB; 1-bit and grey+alpha become
    grey; 16-bit grey keeps its top 8 bits.

    Raises:
        DataError: the file cannot be read as an image.
    """
    try:
        with Image.open(path) as image:
            mode = image.mode
            if mode in ("L", "RGB"):
                array = np.asarray(image)
            elif mode in ("1", "LA"):
                array = np.asarray(image.convert("L"))
            elif mode.startswith("I;16") or mode == "I":
                array = (np.asarray(image).astype(np.uint32) >> 8).clip(0, 255).astype(np.uint8)
            elif mode == "F":
                raise DataError(f"{path}: floating-point image (mode F); save frames as 8-bit images")
            else:
                array = np.asarray(image.convert("RGB"))
    except Image.DecompressionBombError as exc:
        raise DataError(f"{path}: refused before decoding: {exc} (PIL's limit, Image.MAX_IMAGE_PIXELS)") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{path}: unreadable image ({exc})") from None
    if array.ndim == 2:
        array = array[..., np.newaxis]
    return array


def _frames_shape_check(shape, where):
    if len(shape) == 3:
        return tuple(shape) + (1,)
    if len(shape) != 4:
        raise DataError(f"{where}: frames must be (N, H, W) or (N, H, W, C), got shape {tuple(shape)}")
    return tuple(shape)


class Source:
    """One input the user named. Subclasses fill in the reading.

    Attributes:
        path: the path as given.
        kind: "frames", "list", "video", "hkl", "arrays" or "dataset".
    """

    kind = "?"

    def __init__(self, path):
        self.path = Path(path)

    def estimate(self):
        """Number of frames if cheaply known, else None."""
        return None

    def runs(self):
        """Yields (source_id, frames) where frames yields (frame, where)."""
        raise NotImplementedError

    def describe(self, hash_files=True):
        """A provenance record for this input."""
        record = {"path": str(self.path), "kind": self.kind}
        if hash_files and self.path.is_file():
            record["bytes"] = self.path.stat().st_size
            record["sha256"] = sha256_of(self.path)
        return record

    def as_dataset(self):
        """A FrameDataset without copying frames, or None if this source cannot."""
        return None


class FileSequence(Source):
    """Image files read in the order given; the base of folders and lists."""

    def __init__(self, path, groups):
        super().__init__(path)
        self.groups = groups  # list of (source id, [image paths])

    def estimate(self):
        return sum(len(files) for _, files in self.groups)

    def runs(self):
        for label, files in self.groups:
            yield label, ((read_image(f), str(f)) for f in files)

    def describe(self, hash_files=True):
        record = super().describe(hash_files)
        record["frames"] = self.estimate()
        record["sequences"] = [
            {"source": label, "frames": len(files), "first": str(files[0]), "last": str(files[-1])}
            for label, files in self.groups
        ]
        return record


def _images_in(folder):
    return sorted(
        (p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS),
        key=lambda p: natural_key(p.name),
    )


class FramesFolder(FileSequence):
    """A folder of frames, or a folder of such folders (one source each)."""

    kind = "frames"

    def __init__(self, path):
        path = Path(path)
        images = _images_in(path)
        if images:
            groups = [(str(path), images)]
        else:
            groups = []
            for folder in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: natural_key(p)):
                inner = _images_in(folder)
                if inner:
                    groups.append((str(folder), inner))
            if not groups:
                raise DataError(
                    f"{path}: empty folder (no image files with extensions "
                    f"{' '.join(IMAGE_EXTENSIONS)}, here or in subfolders)"
                )
        super().__init__(path, groups)


def _parse_list(path):
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a text list of frame paths (not UTF-8 text)") from None
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        entries.append((number, stripped))
    if not entries:
        raise DataError(f"{path}: list file with no entries")
    return entries


def _resolve(list_path, entry, root):
    whole = Path(entry)
    first = Path(entry.split()[0])
    candidates = []
    for name in (whole, first) if whole != first else (whole,):
        if name.is_absolute():
            candidates.append(name)
        elif root is not None:
            candidates.append(Path(root) / name)
        else:
            # Relative to the list first; the Chainer PredNet joined with its
            # --root, '.' by default, so the working folder is the fallback.
            candidates += [list_path.parent / name, name]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return None


class ListFile(FileSequence):
    """A text file listing frame paths; or listing list files (one source each).

    Args:
        path: the list file.
        root: folder that relative entries are relative to (default: the
            list file's folder, then the working folder).
    """

    kind = "list"

    def __init__(self, path, root=None):
        path = Path(path)
        entries = _parse_list(path)
        resolved, missing = [], []
        for number, entry in entries:
            found = _resolve(path, entry, root)
            if found is None:
                missing.append(f"line {number}: {entry}")
            else:
                resolved.append(found)
        if missing:
            shown = "; ".join(missing[:3]) + ("; ..." if len(missing) > 3 else "")
            where = f"under {root}" if root is not None else f"beside the list ({path.parent}) or in the working folder"
            raise DataError(
                f"{path}: {len(missing)} of {len(entries)} listed files are missing ({where}): {shown}"
            )
        if all(p.suffix.lower() in LIST_EXTENSIONS for p in resolved):
            groups = []
            for listed in resolved:
                inner = ListFile(listed, root)
                if len(inner.groups) != 1 or inner.groups[0][0] != str(listed):
                    raise DataError(f"{listed}: a list of lists inside a list of lists; give one level")
                groups.append(inner.groups[0])
        else:
            bad = [p for p in resolved if p.suffix.lower() not in IMAGE_EXTENSIONS]
            if bad:
                raise DataError(
                    f"{path}: lists image files, but {bad[0]} is not one "
                    f"(extensions {' '.join(IMAGE_EXTENSIONS)})"
                )
            groups = [(str(path), resolved)]
        super().__init__(path, groups)


def _video_decoder():
    """("pyav", module) or ("opencv", module): PyAV where installed, else OpenCV.

    PyAV is the project's decoder (a dependency). OpenCV is the fallback for
    machines that have it but not PyAV (the GPU machine); both bundle FFmpeg,
    but the two may convert colours differently by a grey level, so the
    decoder is recorded with every video source.
    """
    try:
        import av  # only video sources need it

        return "pyav", av
    except ImportError:
        pass
    try:
        import cv2

        return "opencv", cv2
    except ImportError:
        raise DataError("decoding video needs PyAV (pip install av) or OpenCV (pip install opencv-python-headless)") from None


def _stream_seconds(container, stream):
    """The video stream's duration in seconds as the file declares it, or None.

    Matroska keeps it in the stream's DURATION tag; the container's own
    duration is used only when the video is the only stream (an audio track
    may run longer).
    """
    if stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    tag = re.fullmatch(r"(\d+):(\d+):(\d+(?:\.\d+)?)", (stream.metadata or {}).get("DURATION", "").strip())
    if tag:
        return int(tag.group(1)) * 3600 + int(tag.group(2)) * 60 + float(tag.group(3))
    if container.duration and len(container.streams) == 1:
        return container.duration / 1e6  # AV_TIME_BASE units
    return None


class Video(Source):
    """A video file, decoded with PyAV (FFmpeg bundled in its wheel), or OpenCV where PyAV is missing."""

    kind = "video"

    def __init__(self, path):
        super().__init__(path)
        self.decoder, self._module = _video_decoder()
        if self.decoder == "pyav":
            with self._open() as container:
                stream = container.streams.video[0]
                self.codec = stream.codec_context.name
                self.size = (stream.codec_context.height, stream.codec_context.width)
                self._frames = int(stream.frames or 0)
                rate = stream.average_rate
                self.fps = float(rate) if rate else None
                seconds = _stream_seconds(container, stream)
                by_duration = int(round(seconds * self.fps)) if seconds and self.fps else 0
                if not self._frames:
                    self._frames = by_duration
                # Either count can be off (a container's frame count field is
                # sometimes wrong; durations round), so a video is called
                # truncated only when it falls short of both.
                counts = [c for c in (int(stream.frames or 0), by_duration) if c > 0]
                self.declared = min(counts) if counts else None
        else:
            cv2 = self._module
            capture = self._open_opencv()
            try:
                fourcc = int(capture.get(cv2.CAP_PROP_FOURCC))
                self.codec = "".join(chr((fourcc >> 8 * i) & 0xFF) for i in range(4)).strip("\0 ").lower() or None
                self.size = (int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)), int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)))
                self._frames = max(int(capture.get(cv2.CAP_PROP_FRAME_COUNT)), 0)
                self.fps = float(capture.get(cv2.CAP_PROP_FPS)) or None
                self.declared = self._frames or None
            finally:
                capture.release()

    def _open(self):
        av = self._module
        try:
            container = av.open(str(self.path))
        except av.FFmpegError as exc:
            raise DataError(f"{self.path}: not a readable video (unknown format or damaged: {exc})") from None
        if not container.streams.video:
            container.close()
            raise DataError(f"{self.path}: no video stream in this file")
        stream = container.streams.video[0]
        if stream.codec_context is None:
            container.close()
            raise DataError(f"{self.path}: unknown video codec (no decoder for it in PyAV's bundled FFmpeg)")
        return container

    def _open_opencv(self):
        capture = self._module.VideoCapture(str(self.path))
        if not capture.isOpened():
            capture.release()
            raise DataError(f"{self.path}: not a readable video (OpenCV cannot open it: unknown format or damaged)")
        return capture

    def estimate(self):
        return self._frames or None

    def runs(self):
        yield str(self.path), self._decode() if self.decoder == "pyav" else self._decode_opencv()

    def _decode(self):
        av = self._module
        count = 0
        with self._open() as container:
            stream = container.streams.video[0]
            try:
                for frame in container.decode(stream):
                    yield frame.to_ndarray(format="rgb24"), f"{self.path} frame {count}"
                    count += 1
            except av.FFmpegError as exc:
                raise DataError(
                    f"{self.path}: truncated or damaged: decoding failed after {count} frames "
                    f"(codec {self.codec}: {exc}); refused"
                ) from None
        self._check_complete(count)

    def _decode_opencv(self):
        cv2 = self._module
        count = 0
        capture = self._open_opencv()
        try:
            while True:
                ok, frame = capture.read()
                if not ok:
                    break
                yield cv2.cvtColor(frame, cv2.COLOR_BGR2RGB), f"{self.path} frame {count}"
                count += 1
        finally:
            capture.release()
        self._check_complete(count)

    def _check_complete(self, count):
        """Refuses a video that decodes to clearly fewer frames than its header declares.

        A truncated file otherwise ends early without an error (Matroska,
        for one), and the frames lost are silently missing from the set.
        """
        if count == 0:
            raise DataError(f"{self.path}: no frames could be decoded (codec {self.codec})")
        if self.declared and count < self.declared - max(2, self.declared // 50):
            raise DataError(
                f"{self.path}: truncated or damaged: decoded {count} frames of the {self.declared} its "
                "header declares; refused (a video must decode to the frame count its header declares, "
                "within 2%)"
            )

    def describe(self, hash_files=True):
        record = super().describe(hash_files)
        version = getattr(self._module, "__version__", None)
        record.update(codec=self.codec, size=list(self.size), fps=self.fps, decoder=f"{self.decoder} {version}")
        return record


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


def _hickle_item(node, path):
    """Value of one list item as hickle stores it (scalar, bytes or string)."""
    if not isinstance(node, h5py.Dataset):
        raise DataError(f"{path}: hickle list item {node.name} is a nested object; not readable without hickle")
    value = node[()]
    if isinstance(value, np.ndarray):
        if value.dtype == "S1" or (value.dtype == np.uint8 and node.attrs.get("str_type") is not None):
            # hickle 5 stores a str as an array of single bytes.
            return b"".join(value.ravel().tolist()).decode("utf-8")
        if value.size == 1:
            value = value.ravel()[0]
        else:
            raise DataError(f"{path}: hickle list item {node.name} is an array; not a list of ids")
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value.item() if hasattr(value, "item") else value


def _hickle_type(node):
    for name in ("type", "base_type"):
        value = node.attrs.get(name)
        if value is None:
            continue
        if isinstance(value, np.ndarray):
            value = value.ravel()[0] if value.size else b""
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        return str(value)
    return ""


def read_hickle(path, lazy=True):
    """Reads the one object of a hickle file, with h5py only.

    Readable layouts: a numpy array stored as one dataset (hickle 2.x and
    3.x: /data_0; 4.x and 5.x: /data); a list of numbers or strings stored as
    one dataset (2.x, 3.x, 4.x for numbers) or as a group of per-item datasets
    (4.x and 5.x lists of str: /data/data0, /data/data1, ...). Not readable
    (a DataError says so): objects hickle pickled (type 'pickle'),
    dictionaries and other nested objects, and data compressed with a filter
    h5py lacks (such as blosc or bitshuffle from hdf5plugin).

    Args:
        path: the .hkl file.
        lazy: return an array's h5py dataset (streams) instead of reading it.

    Returns:
        (value, handle): an h5py dataset or numpy array or list, and the open
        file when the value is lazy (else None).
    """
    handle = open_h5(path, "hickle (HDF5)")
    keep_open = False
    try:
        node = next((handle[name] for name in ("data_0", "data") if name in handle), None)
        if node is None:
            raise DataError(
                f"{path}: not a hickle layout this reader knows (no /data_0 or /data; "
                f"found: {', '.join(handle.keys()) or 'nothing'})"
            )
        kind = _hickle_type(node).lower()
        if "pickle" in kind:
            raise DataError(
                f"{path}: hickle stored this object pickled; it cannot be read without "
                "unpickling. Load it with hickle and save the arrays with numpy.savez"
            )
        if "dict" in kind:
            raise DataError(f"{path}: hickle file holds a dictionary; expected an array or a list")
        if isinstance(node, h5py.Dataset):
            check_h5_storage(node, path)
            if node.dtype.kind in ("u", "i", "f", "b") and node.ndim >= 2:
                if lazy:
                    keep_open = True
                    return node, handle
                return node[()], None
            return [_hickle_item_value(v) for v in np.atleast_1d(node[()]).tolist()], None
        children = list(node.keys())
        if not children:
            return [], None

        def order(name):
            index = node[name].attrs.get("item_index")
            if index is not None:
                return int(index)
            match = re.search(r"(\d+)$", name)
            if match is None:
                raise DataError(f"{path}: hickle group {node.name} holds {name!r}, not a list item")
            return int(match.group(1))

        return [_hickle_item(node[name], path) for name in sorted(children, key=order)], None
    except OSError as exc:
        raise DataError(f"{path}: cannot read the data ({exc}); a compression filter may be missing") from None
    finally:
        if not keep_open:
            handle.close()


def _hickle_item_value(value):
    return value.decode("utf-8") if isinstance(value, bytes) else value


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


def open_source(path, root=None):
    """Opens one input, choosing the reader from what the path is.

    Args:
        path: a folder, list file, video, .hkl, .npz, .npy, .h5 or dataset file.
        root: for list files, the folder relative entries are relative to.

    Returns:
        A Source.

    Raises:
        DataError: missing path, unknown format, or unreadable content.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file or folder")
    if path.is_dir():
        return FramesFolder(path)
    suffix = path.suffix.lower()
    if suffix in LIST_EXTENSIONS:
        return ListFile(path, root)
    if suffix in VIDEO_EXTENSIONS:
        return Video(path)
    if suffix == ".hkl":
        return _open_hickle(path)
    if suffix in (".npz", ".npy"):
        return _open_npz_or_npy(path)
    if suffix in (".h5", ".hdf5"):
        if is_dataset_file(path):
            return DatasetSource(path)
        return _open_h5_arrays(path)
    if suffix in IMAGE_EXTENSIONS:
        raise DataError(f"{path}: a single image; give the folder that holds the frames, or a list file")
    raise DataError(f"{path}: unknown format {suffix or '(no extension)'!r}; supported: {supported_formats()}")
