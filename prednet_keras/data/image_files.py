"""Frames as image files: reading one image, a folder of frames (or of such folders) in natural name order,
and a text list of frame paths (or of list files), the Chainer PredNet's train_list.txt."""

import re
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from prednet_keras.data.errors import DataError
from prednet_keras.data.source_base import Source

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".gif", ".webp", ".ppm", ".pgm")
LIST_EXTENSIONS = (".txt", ".lst", ".list")

_DIGITS = re.compile(r"(\d+)")


def natural_key(name):
    """Sort key that puts frame2 before frame10 (zero-padded names sort as usual)."""
    return [int(part) if part.isdigit() else part.lower() for part in _DIGITS.split(str(name))]


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
