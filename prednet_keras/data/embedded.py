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
CLIPS_DIR = "clips"
# The raw clips in data/clips/ (from Debian's opencv-doc 4.6.0+dfsg-12; see
# data/README.md) and the sha256 of each, as shipped.
CLIPS = {
    "vtest.avi": "45cddc9490be69345cbdab64ca583be65987e864ca408038e648db99e10516cf",
    "box.mp4": "62b744b99403f899707c43398a3822441add6160379ab6dd6c12bde9e3075f8d",
    "cup.mp4": "37db9cee98f70b1458985a15ad2e5b0183e90e24c281b534afcf812e5986154f",
}


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


def embedded_clips():
    """Paths of the extra real video clips shipped in data/clips/.

    These are the original compressed files (vtest.avi, box.mp4, cup.mp4; 1,467
    frames in all), not dataset files: turn them into one with
    `prednet-data prepare` or load_frames (data/README.md has the command).

    Returns:
        A list of Paths, in the order of CLIPS.
    """
    return [_existing(f"{CLIPS_DIR}/{name}") for name in CLIPS]
