"""Where a training sequence may start: never across a change of source (no framework needed)."""

import numpy as np

from prednet_keras.data.dataset import FrameDataset
from prednet_keras.data.errors import DataError

START_MODES = ("all", "unique")


def sequence_starts(data, nt, mode="all"):
    """Frame indices where a sequence of nt frames from one source can start.

    Args:
        data: a FrameDataset, or a (N,) array of per-frame source ids.
        nt: frames per sequence.
        mode: "all" (every valid start) or "unique" (non-overlapping).

    Returns:
        Sorted int64 array of start indices (empty when none fits).
    """
    if mode not in START_MODES:
        raise DataError(f"sequence_start_mode {mode!r} is not one of {', '.join(START_MODES)}")
    if int(nt) != nt or nt < 1:
        raise DataError(f"nt must be a positive integer, got {nt!r}")
    nt = int(nt)
    if isinstance(data, FrameDataset):
        runs = data.run_ids()
    else:
        sources = np.asarray(data)
        runs = np.cumsum(np.r_[0, (sources[1:] != sources[:-1]).astype(np.int64)]) if len(sources) else sources
    count = len(runs)
    if count < nt:
        return np.zeros(0, dtype=np.int64)
    if mode == "all":
        first = np.arange(count - nt + 1)
        return first[runs[first] == runs[first + nt - 1]].astype(np.int64)
    # 'unique': the original stepped by nt after a valid start and by 1 after
    # an invalid one, which lands on each run's first frame and then steps nt.
    bounds = np.flatnonzero(np.r_[True, runs[1:] != runs[:-1], True])
    starts = [np.arange(a, b - nt + 1, nt) for a, b in zip(bounds[:-1], bounds[1:])]
    return np.concatenate(starts).astype(np.int64) if starts else np.zeros(0, dtype=np.int64)
