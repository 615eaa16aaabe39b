"""Reading the authors' KITTI hickle files (X_*.hkl, sources_*.hkl) with h5py only: the layouts of hickle
2.x to 5.x that hold an array or a list of numbers or strings."""

import re

import h5py
import numpy as np

from prednet_keras.data.errors import DataError
from prednet_keras.data.guards import check_h5_storage, open_h5


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
