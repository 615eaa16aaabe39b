"""MNIST without a download: the embedded copy, Keras' mnist.npz, or IDX files."""

import gzip
from os import PathLike
from pathlib import Path

import numpy as np

from prednet_keras.data.embedded import embedded_mnist_path
from prednet_keras.data.errors import DataError

NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")
# Name stems of the four IDX files; the original names use "-idx3-ubyte",
# some redistributions ".idx3-ubyte"; either may end in .gz.
IDX_STEMS = ("train-images", "train-labels", "t10k-images", "t10k-labels")
_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path):
    """Reads one IDX file (plain or gzipped) as a numpy array.

    Args:
        path: the file.

    Returns:
        The array, in the file's dtype (uint8 for MNIST).

    Raises:
        DataError: not an IDX file, or truncated.
    """
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: unreadable ({exc})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise DataError(f"{path}: not an IDX file (bad magic number {raw[:4].hex() or 'empty'})")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{path}: truncated IDX header")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != expected:
        raise DataError(
            f"{path}: IDX header says {shape} ({expected} bytes of data) but the file holds "
            f"{len(raw) - header} bytes"
        )
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def _find_idx(folder):
    found = {}
    for stem in IDX_STEMS:
        matches = sorted(
            p for p in folder.iterdir()
            if p.is_file() and p.name.startswith(stem) and "idx" in p.name
        )
        if not matches:
            raise DataError(
                f"{folder}: no {stem}-idx*-ubyte[.gz] file (a folder given to load_mnist must hold "
                "the four MNIST IDX files)"
            )
        # Prefer the uncompressed one when both are present.
        matches.sort(key=lambda p: p.suffix == ".gz")
        found[stem] = matches[0]
    return [found[stem] for stem in IDX_STEMS]


def _check(arrays, where):
    x_train, y_train, x_test, y_test = arrays
    for name, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise DataError(
                f"{where}: {name} images {x.shape} and labels {y.shape} do not match "
                "((N, 28, 28) images, (N,) labels)"
            )
    return (x_train.astype(np.uint8, copy=False), y_train.astype(np.uint8, copy=False)), (
        x_test.astype(np.uint8, copy=False),
        y_test.astype(np.uint8, copy=False),
    )


def load_mnist(path=None):
    """MNIST digits, like keras.datasets.mnist.load_data() but offline.

    Args:
        path: None for the embedded copy (the complete 60,000 + 10,000);
            a Keras mnist.npz (x_train, y_train, x_test, y_test); a folder
            holding the four IDX files (train-images-idx3-ubyte ... t10k-
            labels-idx1-ubyte, plain or .gz); or a sequence of four IDX paths
            in the order train images, train labels, test images, test labels.

    Returns:
        ((x_train, y_train), (x_test, y_test)): uint8 arrays, images (N, 28, 28).

    Raises:
        DataError: missing files or unexpected contents.
    """
    if path is None:
        path = embedded_mnist_path()
    if not isinstance(path, (str, PathLike)):
        paths = [Path(p) for p in path]
        if len(paths) != 4:
            raise DataError(
                "load_mnist: give four IDX paths (train images, train labels, test images, test labels), "
                f"got {len(paths)}"
            )
        for p in paths:
            if not p.is_file():
                raise DataError(f"{p}: no such file")
        return _check([read_idx(p) for p in paths], ", ".join(map(str, paths)))
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file or folder")
    if path.is_dir():
        return _check([read_idx(p) for p in _find_idx(path)], path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [k for k in NPZ_KEYS if k not in archive.files]
            if missing:
                raise DataError(
                    f"{path}: not Keras' mnist.npz layout (missing {', '.join(missing)}; "
                    f"found {', '.join(archive.files) or 'nothing'})"
                )
            arrays = [archive[k] for k in NPZ_KEYS]
    except (OSError, ValueError) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{path}: not an .npz file ({exc})") from None
    return _check(arrays, path)
