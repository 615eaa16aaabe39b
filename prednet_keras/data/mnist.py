"""MNIST without a download: the embedded copy, Keras' mnist.npz, or IDX files."""

import gzip
import zlib
from os import PathLike
from pathlib import Path

import numpy as np

from prednet_keras.data.embedded import embedded_mnist_path
from prednet_keras.data.errors import DataError
from prednet_keras.data.guards import ZIP_ERRORS, check_npz_arrays, check_unpacking, declared_bytes
from prednet_keras.data.pixels import stack_to_uint8

NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")
# Name stems of the four IDX files; the original names use "-idx3-ubyte",
# some redistributions ".idx3-ubyte"; either may end in .gz.
IDX_STEMS = ("train-images", "train-labels", "t10k-images", "t10k-labels")
_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path):
    """Reads one IDX file (plain or gzipped) as a numpy array.

    The header's shape is checked against the file before the data are
    read: a plain file must hold exactly that many bytes; a gzipped one
    must not claim more than the unpacking limits allow (see guards.py),
    and must then unpack to exactly that many.

    Args:
        path: the file.

    Returns:
        The array, in the file's dtype (uint8 for MNIST).

    Raises:
        DataError: not an IDX file, truncated, or claiming more than it holds.
    """
    path = Path(path)
    try:
        stored = path.stat().st_size
        with open(path, "rb") as probe:
            packed = probe.read(2) == b"\x1f\x8b"
        with (gzip.open if packed else open)(path, "rb") as handle:
            head = handle.read(4)
            if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] not in _IDX_DTYPES:
                raise DataError(f"{path}: not an IDX file (bad magic number {head.hex() or 'empty'})")
            ndim = head[3]
            dims = handle.read(4 * ndim)
            if len(dims) < 4 * ndim:
                raise DataError(f"{path}: truncated IDX header")
            shape = tuple(int.from_bytes(dims[4 * i : 4 * i + 4], "big") for i in range(ndim))
            dtype = np.dtype(_IDX_DTYPES[head[2]])
            expected = declared_bytes(shape, dtype)
            header = 4 + 4 * ndim
            if packed:
                check_unpacking(f"{path}: IDX data", expected, stored)
            elif stored - header != expected:
                _refuse_size(path, shape, expected, stored - header)
            raw = handle.read(expected + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"{path}: unreadable ({exc})") from None
    if len(raw) != expected:
        _refuse_size(path, shape, expected, len(raw), packed)
    return np.frombuffer(raw, dtype=dtype, count=expected // dtype.itemsize).reshape(shape).astype(
        dtype.newbyteorder("=")
    )


def _refuse_size(path, shape, expected, held, packed=False):
    holds = f"more than {expected}" if held > expected and packed else str(held)
    raise DataError(
        f"{path}: IDX header says {shape} ({expected} bytes of data) but the file "
        f"{'unpacks to' if packed else 'holds'} {holds} bytes; refused (truncated or damaged)"
    )


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


def _labels(array, where):
    if not np.issubdtype(array.dtype, np.integer):
        raise DataError(f"{where}: labels of dtype {array.dtype}; labels must be integers 0-255")
    if array.size and (array.min() < 0 or array.max() > 255):
        raise DataError(
            f"{where}: labels outside 0-255 (min {array.min()}, max {array.max()}); labels must be integers 0-255"
        )
    return array.astype(np.uint8, copy=False)


def _check(arrays, where, places):
    """Checks shapes and values; `places` names each array (file and key) for errors."""
    x_train, y_train, x_test, y_test = arrays
    for name, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise DataError(
                f"{where}: {name} images {x.shape} and labels {y.shape} do not match "
                "((N, 28, 28) images, (N,) labels)"
            )
    x_train = stack_to_uint8(x_train, places[0], item="image")
    y_train = _labels(y_train, places[1])
    x_test = stack_to_uint8(x_test, places[2], item="image")
    y_test = _labels(y_test, places[3])
    return (x_train, y_train), (x_test, y_test)


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
        return _check([read_idx(p) for p in paths], ", ".join(map(str, paths)), [str(p) for p in paths])
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file or folder")
    if path.is_dir():
        files = _find_idx(path)
        return _check([read_idx(p) for p in files], path, [str(p) for p in files])
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [k for k in NPZ_KEYS if k not in archive.files]
            if missing:
                raise DataError(
                    f"{path}: not Keras' mnist.npz layout (missing {', '.join(missing)}; "
                    f"found {', '.join(archive.files) or 'nothing'})"
                )
            check_npz_arrays(path, NPZ_KEYS)
            arrays = [archive[k] for k in NPZ_KEYS]
    except (OSError, ValueError, *ZIP_ERRORS) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{path}: not an .npz file ({exc})") from None
    return _check(arrays, path, [f"{path}: array {k!r}" for k in NPZ_KEYS])
