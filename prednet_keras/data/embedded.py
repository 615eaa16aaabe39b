"""Where the embedded data lives: data/ at the repository root.

The files ship with a source checkout (and so with an editable install); see
data/README.md for what they are and how they were made. PREDNET_KERAS_DATA
points elsewhere (a copy of that folder) when the package is installed
without the checkout.
"""

import os
from pathlib import Path

from prednet_keras.data.errors import DataError

ENV_VAR = "PREDNET_KERAS_DATA"
SPLITS = ("train", "val", "test")
VIDEO_FILES = {split: f"video_{split}.h5" for split in SPLITS}
MNIST_FILE = "mnist.npz"


def data_dir():
    """The folder holding the embedded files.

    Returns:
        $PREDNET_KERAS_DATA if set, else data/ beside the prednet_keras package.

    Raises:
        DataError: when neither exists.
    """
    override = os.environ.get(ENV_VAR)
    if override:
        folder = Path(override)
        if not folder.is_dir():
            raise DataError(f"{folder}: ${ENV_VAR} names a folder that does not exist")
        return folder
    folder = Path(__file__).resolve().parents[2] / "data"
    if not folder.is_dir():
        raise DataError(
            f"{folder}: embedded data folder not found. It ships with a source checkout of "
            f"prednet-keras (data/ at the repository root; install with `pip install -e .`), "
            f"or set ${ENV_VAR} to a copy of that folder"
        )
    return folder


def _existing(name):
    path = data_dir() / name
    if not path.is_file():
        raise DataError(f"{path}: embedded file missing (see data/README.md for how it is made)")
    return path


def embedded_dataset(split):
    """Path of an embedded real-video dataset file.

    Args:
        split: "train", "val" or "test".

    Returns:
        Path of the dataset file (128x160 RGB frames; open with open_dataset).
    """
    if split not in VIDEO_FILES:
        raise DataError(f"split {split!r} is not one of {', '.join(SPLITS)}")
    return _existing(VIDEO_FILES[split])


def embedded_mnist_path():
    """Path of the embedded MNIST file (Keras' mnist.npz layout)."""
    return _existing(MNIST_FILE)
