"""Checks made before a file's data are read: what it claims against what it holds.

A file's header says how much data follows: an HDF5 dataset's shape, an
.npy header, an IDX header, a zip member's sizes. Readers trust it and
allocate, stream or unpack that much. A damaged or hostile file can claim
far more than it holds (a 2 KB HDF5 file "holding" 10 million frames, which
HDF5 reads back as zeros: prepare then wrote 13.6 GB of black frames) or
unpack to far more than it takes on disk (a zip bomb given as an .npz).
Every check here uses metadata only, so it costs nothing on a good file and
refuses a bad one before anything is allocated or written, naming the file,
the place in it and the rule.

Unpacking limits (compressed .npz members, gzipped IDX files, compressed
HDF5 datasets, xz-compressed HDF5 files), from the environment so that every
command obeys them:

    PREDNET_MAX_UNPACKED      most bytes one array may unpack to in memory
                              (default 4G; .npz and IDX arrays and .h5.xz
                              files are unpacked whole). HDF5 datasets stream, so only the
                              ratio below applies to them.
    PREDNET_MAX_UNPACK_RATIO  most unpacked bytes per stored byte (default
                              200) for an array that unpacks to more than
                              64 MiB. Real frames deflate 2-30 fold;
                              deflate's own ceiling is ~1030 fold, reached
                              by long runs of one value, which is what a
                              bomb is made of.
"""

import io
import lzma
import math
import os
import re
import zipfile
import zlib

import h5py
import numpy as np

from prednet_keras.data.errors import DataError
from prednet_keras.files.diskwrite import format_bytes

MAX_UNPACKED_VARIABLE = "PREDNET_MAX_UNPACKED"
MAX_RATIO_VARIABLE = "PREDNET_MAX_UNPACK_RATIO"
DEFAULT_MAX_UNPACKED = 4 << 30
DEFAULT_MAX_RATIO = 200.0
# Below this, unpacking costs little whatever the ratio, and small arrays of
# mostly one value (masks, padded digits) compress far better than video.
RATIO_FLOOR = 64 << 20

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)
# Exceptions that reading a damaged zip archive raises besides OSError and
# ValueError; neither is a subclass of those.
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError)


def parse_bytes(text):
    """Parses a byte count such as 4G, 512M, 1.5GiB or 1000000."""
    match = _SIZE.match(str(text))
    if match is None:
        raise DataError(f"{text!r} is not a size (for example 4G, 512M or 1000000)")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def unpack_limits():
    """(max_unpacked_bytes, max_ratio) from the environment or the defaults."""
    max_bytes = os.environ.get(MAX_UNPACKED_VARIABLE)
    max_ratio = os.environ.get(MAX_RATIO_VARIABLE)
    try:
        ratio = DEFAULT_MAX_RATIO if not max_ratio else float(max_ratio)
    except ValueError:
        raise DataError(f"{MAX_RATIO_VARIABLE}={max_ratio!r} is not a number") from None
    return (DEFAULT_MAX_UNPACKED if not max_bytes else parse_bytes(max_bytes)), ratio


def check_unpacking(where, unpacked, stored, in_memory=True):
    """Refuses an array that would unpack to too much, before it is unpacked.

    Args:
        where: the file and the place in it.
        unpacked: bytes it unpacks to (as its header declares).
        stored: bytes it takes in the file.
        in_memory: whether it is unpacked whole (the absolute limit applies).
    """
    max_bytes, max_ratio = unpack_limits()
    if in_memory and unpacked > max_bytes:
        raise DataError(
            f"{where}: unpacks to {format_bytes(unpacked)}, more than the {format_bytes(max_bytes)} "
            f"allowed ({MAX_UNPACKED_VARIABLE}); refused before unpacking"
        )
    if unpacked > RATIO_FLOOR and unpacked > max_ratio * max(stored, 1):
        raise DataError(
            f"{where}: {format_bytes(stored)} unpack to {format_bytes(unpacked)} "
            f"({unpacked / max(stored, 1):.0f} to 1, more than the {max_ratio:g} to 1 allowed above "
            f"{format_bytes(RATIO_FLOOR)}, {MAX_RATIO_VARIABLE}); refused before unpacking (a zip bomb?)"
        )


def declared_bytes(shape, dtype):
    """Bytes an array of this shape and dtype holds (exact, in Python ints)."""
    return math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize


def read_npy_header(handle, where):
    """(shape, dtype, header bytes) of the .npy array `handle` is at the start of."""
    try:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
        else:
            # Version 3 (utf-8 field names) has no public reader; numpy's
            # own loader reads it after these checks.
            return None, None, None
        return shape, dtype, handle.tell()
    except (OSError, ValueError, *ZIP_ERRORS) as exc:
        raise DataError(f"{where}: not an .npy array (bad header: {exc})") from None


def check_npy_payload(where, shape, dtype, header_bytes, total_bytes):
    """Refuses an .npy whose header declares more (or less) data than follows it."""
    if shape is None or dtype.hasobject:
        return  # objects need pickles, which are never loaded
    declared = declared_bytes(shape, dtype)
    held = total_bytes - header_bytes
    if declared != held:
        raise DataError(
            f"{where}: header declares shape {tuple(shape)} of {dtype} ({format_bytes(declared)}) but "
            f"{format_bytes(max(held, 0))} of data follow; refused (truncated or damaged)"
        )


def check_npy_file(path):
    """Checks a .npy file's header against its size, before it is mapped."""
    with open(path, "rb") as handle:
        shape, dtype, header = read_npy_header(handle, path)
    check_npy_payload(path, shape, dtype, header, os.path.getsize(path))


def npz_member(archive, key):
    """The zip member that numpy.load's archive[key] reads."""
    names = archive.namelist()
    return key + ".npy" if key + ".npy" in names else key


def check_npz_arrays(path, keys):
    """Checks the named arrays of an .npz: unpacking limits, then header against size.

    Reads only each member's zip entry and the first bytes of its header.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            for key in keys:
                info = archive.getinfo(npz_member(archive, key))
                where = f"{path}: array {key!r}"
                check_unpacking(where, info.file_size, info.compress_size)
                with archive.open(info) as member:
                    shape, dtype, header = read_npy_header(member, where)
                check_npy_payload(where, shape, dtype, header, info.file_size)
    except (OSError, *ZIP_ERRORS) as exc:
        raise DataError(f"{path}: damaged .npz (zip) file ({exc})") from None


XZ_SUFFIX = ".xz"
# Unpacked in pieces of this size, so that the limits refuse a bomb after at most this much more.
_XZ_PIECE = 16 << 20
# The last file unpacked, kept while it is small: opening a file as a source reads it twice (is it a
# dataset file? then open it), and unpacking is most of the cost. Keyed by what changes when the file does.
_XZ_KEEP = 256 << 20
_last_unpacked = {}


def unpack_xz(path):
    """The bytes of an .xz file, unpacked in memory within the unpacking limits.

    The limits are checked as the bytes come (an .xz stream need not declare its size up front), so a
    bomb is refused after at most one piece beyond them.
    """
    status = os.stat(path)
    key = (os.path.realpath(path), status.st_ino, status.st_size, status.st_mtime_ns)
    kept = _last_unpacked.get(key)
    if kept is not None:
        check_unpacking(path, len(kept), status.st_size)  # the limits may have changed since
        return kept
    unpacked = _unpack_xz(path, status.st_size)
    _last_unpacked.clear()
    if len(unpacked) <= _XZ_KEEP:
        _last_unpacked[key] = unpacked
    return unpacked


def _unpack_xz(path, stored):
    decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    pieces, unpacked = [], 0
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        while True:
            piece = decompressor.decompress(data, max_length=_XZ_PIECE)
            data = b""
            pieces.append(piece)
            unpacked += len(piece)
            check_unpacking(path, unpacked, stored)
            if decompressor.eof or (not piece and decompressor.needs_input):
                break
    except lzma.LZMAError as exc:
        raise DataError(f"{path}: damaged .xz file ({exc}); refused") from None
    if not decompressor.eof:
        raise DataError(f"{path}: truncated .xz file (the stream ends early); refused")
    return b"".join(pieces)


def open_h5(path, what="HDF5"):
    """Opens an HDF5 file for reading; a truncated file is named as such.

    A name ending in .xz is an xz-compressed HDF5 file (the embedded video is stored so): it is unpacked
    into memory and opened there.
    """
    try:
        if str(path).lower().endswith(XZ_SUFFIX):
            return h5py.File(io.BytesIO(unpack_xz(path)), "r")
        return h5py.File(path, "r")
    except OSError as exc:
        truncated = re.search(r"truncated file: eof = (\d+).*?eof = (\d+)", str(exc))
        if truncated:
            raise DataError(
                f"{path}: truncated {what} file (it holds {int(truncated.group(1)):,} of the "
                f"{int(truncated.group(2)):,} bytes its header declares); refused"
            ) from None
        raise DataError(f"{path}: not a readable {what} file ({exc})") from None


def check_h5_storage(dataset, path):
    """Refuses an HDF5 dataset whose declared shape is not backed by stored data.

    HDF5 reads space that was never written as the fill value (zeros): a
    file whose frames dataset declares millions of frames but stores none
    reads as millions of black frames. Chunked datasets must store every
    chunk, contiguous ones their full size; compressed ones must not unpack
    beyond the ratio limit.
    """
    where = f"{path}: dataset {dataset.name!r}"
    shape = dataset.shape
    if shape is None or math.prod(shape) == 0:
        return
    plist = dataset.id.get_create_plist()
    layout = plist.get_layout()
    fixed = dataset.dtype.kind not in ("O",) and h5py.check_vlen_dtype(dataset.dtype) is None
    declared = declared_bytes(shape, dataset.dtype) if fixed else None
    stored = dataset.id.get_storage_size()
    if layout == h5py.h5d.CONTIGUOUS:
        if stored == 0 or (declared is not None and stored < declared):
            raise DataError(
                f"{where}: declares shape {shape} ({format_bytes(declared or 0)}) but stores "
                f"{format_bytes(stored)}; what is missing would read as zeros (black frames). Refused (damaged "
                "or unfinished file)"
            )
    elif layout == h5py.h5d.CHUNKED:
        expected = math.prod(math.ceil(s / c) for s, c in zip(shape, dataset.chunks))
        present = dataset.id.get_num_chunks()
        if present < expected:
            raise DataError(
                f"{where}: declares shape {shape} but stores only {present:,} of its {expected:,} chunks; "
                "what is missing would read as zeros (black frames). Refused (damaged or unfinished file)"
            )
        if declared is not None and plist.get_nfilters():
            check_unpacking(where, declared, stored, in_memory=False)
