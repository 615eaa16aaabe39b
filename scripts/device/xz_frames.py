"""A dataset file as NAME.h5.xz (uncompressed HDF5, then xz), for carrying to the GPU machine, and back.

The full-size study's held-out frames (data/study/box-cup-120x160.h5, gzip inside HDF5) take 26 MB, and
everything carried to the GPU machine must fit in 64 MiB; as NAME.h5.xz (data.write_xz_dataset, the embedded
video's delta filter) they take 10.3 MB. The frames, their sources and provenance stay the same, so the
frames' checksum, which the study plans and device_study.sh checks, is the same.

    python scripts/device/xz_frames.py pack data/study/box-cup-120x160.h5      # writes ...h5.xz beside it
    python scripts/device/xz_frames.py unpack data/study/box-cup-120x160.h5.xz # writes ...h5 (plain HDF5)
"""

import lzma
import shutil
import sys
from pathlib import Path

from prednet_keras import data


def pack(source):
    source = Path(source)
    with data.open_dataset(source, in_memory=True) as dataset:
        target = data.write_xz_dataset(source.with_name(source.name + ".xz"), dataset)
    with data.open_dataset(target) as packed:
        print(f"{target}: {target.stat().st_size / 1e6:.1f} MB, frames {data.dataset_checksum(packed)}")


def unpack(source):
    source = Path(source)
    target = source.with_suffix("")  # NAME.h5
    if target.exists():
        raise SystemExit(f"{target}: exists; not overwritten.")
    partial = target.with_name(target.name + ".partial")
    with lzma.open(source, "rb") as xz, open(partial, "wb") as out:
        shutil.copyfileobj(xz, out, 1 << 20)
    partial.rename(target)
    with data.open_dataset(target) as dataset:
        print(f"{target}: frames {data.dataset_checksum(dataset)}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("pack", "unpack"):
        raise SystemExit(__doc__)
    (pack if sys.argv[1] == "pack" else unpack)(sys.argv[2])
