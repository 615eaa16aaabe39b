"""Source, the interface every reader of frames offers (runs of frames, a cheap frame count, a provenance
record, a dataset view), and what readers share: the file hash and the frames shape check."""

from pathlib import Path

from prednet_keras.data.errors import DataError
from prednet_keras.files.diskwrite import file_sha256 as sha256_of




def _frames_shape_check(shape, where):
    if len(shape) == 3:
        return tuple(shape) + (1,)
    if len(shape) != 4:
        raise DataError(f"{where}: frames must be (N, H, W) or (N, H, W, C), got shape {tuple(shape)}")
    return tuple(shape)


class Source:
    """One input the user named. Subclasses fill in the reading.

    Attributes:
        path: the path as given.
        kind: "frames", "list", "video", "hkl", "arrays" or "dataset".
    """

    kind = "?"

    def __init__(self, path):
        self.path = Path(path)

    def estimate(self):
        """Number of frames if cheaply known, else None."""
        return None

    def runs(self):
        """Yields (source_id, frames) where frames yields (frame, where)."""
        raise NotImplementedError

    def describe(self, hash_files=True):
        """A provenance record for this input."""
        record = {"path": str(self.path), "kind": self.kind}
        if hash_files and self.path.is_file():
            record["bytes"] = self.path.stat().st_size
            record["sha256"] = sha256_of(self.path)
        return record

    def as_dataset(self):
        """A FrameDataset without copying frames, or None if this source cannot."""
        return None
