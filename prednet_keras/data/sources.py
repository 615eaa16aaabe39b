"""Readers for everything users arrive with, behind one interface (source_base.Source); open_source
picks the reader (image_files, video, arrays with hickle) from what the path is.

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
  - this project's dataset files, also xz-compressed (NAME.h5.xz).
"""

from pathlib import Path

from prednet_keras.data.arrays import (
    DatasetSource,
    _open_h5_arrays,
    _open_hickle,
    _open_npz_or_npy,
)
from prednet_keras.data.dataset import is_dataset_file
from prednet_keras.data.errors import DataError
from prednet_keras.data.guards import XZ_SUFFIX
from prednet_keras.data.image_files import (
    IMAGE_EXTENSIONS,
    LIST_EXTENSIONS,
    FramesFolder,
    ListFile,
)
from prednet_keras.data.video import VIDEO_EXTENSIONS, Video


def supported_formats():
    """One line per kind of source, for help texts and error messages."""
    return (
        "a folder of frames (" + " ".join(IMAGE_EXTENSIONS) + "), a list file ("
        + " ".join(LIST_EXTENSIONS) + "), a video (" + " ".join(VIDEO_EXTENSIONS)
        + "), KITTI X_*.hkl, or arrays (.npz .npy .h5)"
    )


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
    if suffix == XZ_SUFFIX and Path(path.stem).suffix.lower() in (".h5", ".hdf5"):
        suffix = Path(path.stem).suffix.lower()  # xz-compressed HDF5, which open_h5 unpacks
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
