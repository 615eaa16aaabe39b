"""Reading throughput of the data layer: frames per second into training batches.

    .venv/bin/python scripts/bench_data.py [--frames 2000] [--seconds 5]

Measures SequenceGenerator batches (nt=10, batch 4, shuffled 'all' starts,
as kitti_train.py) from:
  - the embedded training split, in memory;
  - a KITTI-sized 128x160 dataset file (frames tiled from the embedded split),
    streamed from disk, gzip-compressed and uncompressed.
A frame counts once per sequence it appears in, as the model sees it. For
scale: the original recipe trains on 125 batches of 4 x 10 frames per epoch.
"""

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from prednet_keras.data import FrameDataset, SequenceGenerator, embedded_dataset, open_dataset, write_dataset


def rate(generator, seconds):
    """Frames per second over whole batches, for about `seconds`."""
    generator[0]  # warm caches and lazy imports
    count, start, index = 0, time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        x, _ = generator[index % len(generator)]
        count += x.shape[0] * x.shape[1]
        index += 1
    return count / (time.perf_counter() - start), index


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=2000, help="frames in the on-disk test files")
    parser.add_argument("--seconds", type=float, default=5.0, help="time per measurement")
    args = parser.parse_args()

    train = open_dataset(embedded_dataset("train"))
    settings = dict(nt=10, batch_size=4, shuffle=True, seed=0)
    results = []
    fps, batches = rate(SequenceGenerator(train, **settings), args.seconds)
    results.append(("embedded train split, in memory", fps, batches))

    repeats = -(-args.frames // len(train))
    frames = np.concatenate([train.frames] * repeats)[: args.frames]
    # One source per 200 frames, like KITTI's drives (a few hundred frames each).
    sources = np.arange(args.frames) // 200
    big = FrameDataset(frames, sources)
    with tempfile.TemporaryDirectory() as folder:
        for compression in ("gzip", "lzf", "none"):
            path = write_dataset(Path(folder) / f"{compression}.h5", big, compression=compression)
            size = path.stat().st_size / 1e6
            with open_dataset(path, in_memory=False) as data:
                fps, batches = rate(SequenceGenerator(data, **settings), args.seconds)
            results.append((f"{args.frames} frames on disk, {compression} ({size:.0f} MB)", fps, batches))

    print("SequenceGenerator nt=10 batch_size=4 shuffle, 128x160x3 frames to float32 batches")
    for name, fps, batches in results:
        print(f"  {name:<45} {fps:10,.0f} frames/s  ({fps / 40:8,.0f} batches/s, {batches} measured)")


if __name__ == "__main__":
    main()
