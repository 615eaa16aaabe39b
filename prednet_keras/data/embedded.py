"""Where the embedded data lives: package data in prednet_keras/data/files/.

The files travel inside the package (a wheel, a plain install, an editable
install and a source checkout alike) and are found through importlib.resources,
never through the source tree; data/README.md says what they are and how they
were made.
"""

import importlib.resources
from pathlib import Path

from prednet_keras.data.errors import DataError

SPLITS = ("train", "val", "test")
# xz-compressed dataset files (see prednet_keras/data/dataset.py): ~60% of their size as gzipped HDF5.
VIDEO_FILES = {split: f"video_{split}.h5.xz" for split in SPLITS}
MNIST_FILE = "mnist.npz"
_PACKAGE = "prednet_keras.data"
_FOLDER = "files"


def data_dir():
    """The folder holding the embedded files (inside the installed package).

    Raises:
        DataError: when the package was installed without its data (a broken
            install, or one from a zip file).
    """
    folder = importlib.resources.files(_PACKAGE) / _FOLDER
    # h5py and numpy need real files; an import from a zip archive has none.
    if not isinstance(folder, Path) or not folder.is_dir():
        raise DataError(
            f"{folder}: the embedded data folder of prednet-keras is missing; reinstall the package "
            f"(`pip install --force-reinstall prednet-keras`) from a wheel or source tree that has it"
        )
    return folder


def _existing(name):
    path = data_dir() / name
    if not path.is_file():
        raise DataError(f"{path}: embedded file missing from the installed package; reinstall prednet-keras")
    return path


def embedded_dataset(split):
    """Path of an embedded real-video dataset file.

    Args:
        split: "train", "val" or "test".

    Returns:
        Path of the dataset file, video_SPLIT.h5.xz (128x160 RGB frames; open with open_dataset,
        or unpack with `xz -d` for other HDF5 readers).
    """
    if split not in VIDEO_FILES:
        raise DataError(f"split {split!r} is not one of {', '.join(SPLITS)}")
    return _existing(VIDEO_FILES[split])


def embedded_mnist_path():
    """Path of the embedded MNIST file (Keras' mnist.npz layout)."""
    return _existing(MNIST_FILE)
