"""The data layer: sources of every kind -> frames -> training sequences.

    load_frames(source, size=None, ...)  FrameDataset from a folder, list file,
                                         video, KITTI .hkl, .npz/.npy/.h5 or
                                         dataset file
    prepare(sources, output, size, ...)  the same, written to a dataset file
    open_dataset(path)                   a dataset file written by prepare
    dataset_checksum(dataset)            the checksum a run's manifest records of its frames
    SequenceGenerator(data, nt, ...)     keras.utils.PyDataset of sequences
    load_mnist(path=None)                MNIST, embedded or from user files
    embedded_dataset(split)              the embedded real-video files

Only SequenceGenerator (a keras.utils.PyDataset) needs Keras; it loads on
first use, so the rest of the data layer runs without a framework.
"""

import importlib

from prednet_keras.data.atomic import check_output, write_bytes_whole
from prednet_keras.data.dataset import (
    FrameDataset,
    dataset_checksum,
    describe,
    is_dataset_file,
    open_dataset,
    write_dataset,
    write_xz_dataset,
)
from prednet_keras.data.embedded import data_dir, embedded_dataset, embedded_mnist_path
from prednet_keras.data.errors import DataError
from prednet_keras.data.mnist import load_mnist, read_idx
from prednet_keras.data.prepare import load_frames, prepare
from prednet_keras.data.scenes import detect_scene_cuts
from prednet_keras.data.starts import sequence_starts
from prednet_keras.data.sources import open_source, supported_formats
from prednet_keras.data.transform import FrameTransform, parse_size, resize_crop_geometry

__all__ = [
    "DataError",
    "FrameDataset",
    "FrameTransform",
    "SequenceGenerator",
    "check_output",
    "data_dir",
    "dataset_checksum",
    "describe",
    "detect_scene_cuts",
    "embedded_dataset",
    "embedded_mnist_path",
    "is_dataset_file",
    "load_frames",
    "load_mnist",
    "open_dataset",
    "open_source",
    "parse_size",
    "prepare",
    "read_idx",
    "resize_crop_geometry",
    "sequence_starts",
    "supported_formats",
    "write_bytes_whole",
    "write_dataset",
    "write_xz_dataset",
]


def __getattr__(name):
    if name == "SequenceGenerator":
        value = importlib.import_module("prednet_keras.data.sequences").SequenceGenerator
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
