"""A dataset file as NAME.h5.xz (uncompressed HDF5, then xz), for carrying to the GPU machine, and back.

The full-size study's held-out frames (data/study/box-cup-120x160.h5, gzip inside HDF5) take 26 MB, and
everything carried to the GPU machine must fit in 64 MiB; video frames compress better with xz over the
whole file (about 12 MB). The frames, their sources and provenance stay the same, so the frames' checksum,
which the study plans and device_study.sh checks, is the same.

    python scripts/device/xz_frames.py pack data/study/box-cup-120x160.h5      # writes ...h5.xz beside it
    python scripts/device/xz_frames.py unpack data/study/box-cup-120x160.h5.xz # writes ...h5 (plain HDF5)
"""

import lzma
import shutil
import sys
import tempfile
from pathlib import Path

from prednet_keras import data


def pack(source):
    source = Path(source)
    target = source.with_name(source.name + ".xz")
    with data.open_dataset(source, in_memory=True) as dataset, tempfile.TemporaryDirectory() as scratch:
        plain = data.write_dataset(Path(scratch) / source.name, dataset, compression="none")
        with open(plain, "rb") as raw, lzma.open(Path(scratch) / target.name, "wb", preset=9 | lzma.PRESET_EXTREME) as xz:
            shutil.copyfileobj(raw, xz, 1 << 20)
        expected = data.dataset_checksum(dataset)
        with data.open_dataset(Path(scratch) / target.name, in_memory=True) as packed:
            if data.dataset_checksum(packed) != expected:
                raise SystemExit(f"{target}: the packed frames do not give {expected}; nothing written.")
        shutil.move(Path(scratch) / target.name, target)
    print(f"{target}: {target.stat().st_size / 1e6:.1f} MB, frames {expected}")


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
