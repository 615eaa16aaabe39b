"""checksums.json: what a cache folder's files were when they arrived, checked on every later use.

The authors publish no checksums of their files, so the first download is trusted and recorded: each file's
size and SHA-256, where it came from and when. Every later use compares the file with that record (the size
first, which costs nothing, then the SHA-256), so a file changed, truncated or swapped since is refused
with one line instead of being trained on. The record is written whole (diskwrite.atomic_write_json).

A file that matched once is not hashed again by the same process while its size, modification time and
inode stay the same: a command that checks a 2.5 GB file at its start and again under a lock reads it once.
No framework at import.
"""

import os
import json
import time
from pathlib import Path

from prednet_keras.files.diskwrite import atomic_write_json, file_sha256

__all__ = ["RECORD_NAME", "ChecksumError", "FileRecord"]

RECORD_NAME = "checksums.json"
_FORMAT = "prednet-keras checksums 1"
# Files this process has seen match their record: {(path, size, mtime_ns, inode): sha256}.
_MATCHED = {}


class ChecksumError(ValueError):
    """A file that is missing, or differs from what its record says it was when it arrived."""


class FileRecord:
    """The checksum record of one folder (`<folder>/checksums.json`).

    Args:
        folder: the folder whose files it records.
    """

    def __init__(self, folder):
        self.folder = Path(folder)
        self.path = self.folder / RECORD_NAME
        self.files = self._read()

    def _read(self):
        if not self.path.is_file():
            return {}
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ChecksumError(f"{self.path}: not a readable checksum record ({error}); remove it and fetch "
                                "the files again.") from None
        files = document.get("files") if isinstance(document, dict) else None
        if not isinstance(files, dict) or not all(isinstance(entry, dict) for entry in files.values()):
            raise ChecksumError(f"{self.path}: not a checksum record of prednet-keras (no 'files' object); remove "
                                "it and fetch the files again.")
        return files

    def get(self, name):
        """The record of file `name` ({"sha256", "bytes", ...}), or None."""
        return self.files.get(name)

    def add(self, name, sha256=None, **about):
        """Records file `name` of the folder as it is now, and writes the record.

        Args:
            name: the file's name in the folder.
            sha256: its SHA-256 when the caller computed it while writing the file (else it is read now).
            about: what else to keep with it (where it came from, ...).
        """
        path = self.folder / name
        entry = {"sha256": sha256 or file_sha256(path), "bytes": path.stat().st_size,
                 "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **about}
        self.files[name] = entry
        self._remember(path, entry["sha256"])
        self.save()
        return entry

    def remove(self, *names):
        """Forgets files (about to be fetched again), and writes the record."""
        for name in names:
            self.files.pop(name, None)
        self.save()

    def save(self):
        atomic_write_json(self.path, {"format": _FORMAT, "files": self.files})

    def check(self, name, remedy):
        """Fails unless file `name` is there and is what its record says.

        Args:
            name: the file's name in the folder.
            remedy: what the user can do, ending the message ("run prednet-data kitti --refetch").

        Returns:
            The file's path.

        Raises:
            ChecksumError: no record, no file, or another size or SHA-256 than recorded.
        """
        path = self.folder / name
        entry = self.get(name)
        if entry is None:
            raise ChecksumError(f"{path}: no checksum recorded for it in {self.path}; {remedy}.")
        try:
            status = path.stat()
        except FileNotFoundError:
            raise ChecksumError(f"{path}: missing (recorded in {self.path}); {remedy}.") from None
        if status.st_size != entry.get("bytes"):
            raise ChecksumError(f"{path}: {status.st_size:,} bytes, not the {entry.get('bytes'):,} recorded in "
                                f"{self.path} when it arrived (truncated or replaced since); {remedy}.")
        key = (str(path), status.st_size, status.st_mtime_ns, status.st_ino)
        actual = _MATCHED.get(key) or file_sha256(path)
        if actual != entry.get("sha256"):
            raise ChecksumError(f"{path}: SHA-256 {actual[:16]}..., not the {str(entry.get('sha256'))[:16]}... "
                                f"recorded in {self.path} when it arrived (changed or damaged since); {remedy}.")
        _MATCHED[key] = actual
        return path

    @staticmethod
    def _remember(path, sha256):
        status = os.stat(path)
        _MATCHED[(str(path), status.st_size, status.st_mtime_ns, status.st_ino)] = sha256
