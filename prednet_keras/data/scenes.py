"""Hard scene-cut detection, so that no training sequence spans a cut.

A cut is a frame that differs from the one before far more than its
neighbours differ from theirs. The difference is the mean absolute change of a
32x32 grey thumbnail (block averages, so sensor noise and small motion mostly
cancel), in [0, 1]. A frame starts a new scene when that difference is both
above an absolute floor (`threshold`) and `ratio` times the median difference
in a window around it: the floor ignores still scenes with flicker, the ratio
ignores fast pans and handheld shake, whose differences are large but also
large for their neighbours. Gradual transitions (fades, dissolves) are not
detected.

On bikes.mp4 (the embedded clip), the five cuts score 0.17-0.32 against
local medians near 0.01-0.02; the largest non-cut score is 0.074, during a
fast pan whose neighbours score about 0.06.
"""

import math
import numbers

import numpy as np
from PIL import Image

from prednet_keras.data.errors import DataError

DEFAULT_THRESHOLD = 0.1
DEFAULT_RATIO = 3.0
DEFAULT_WINDOW = 8
_THUMB = 32


def thumbnail(frame):
    """A small grey float32 image of an (h, w, c) uint8 frame, for comparing frames."""
    if frame.shape[2] == 3:
        grey = Image.fromarray(frame).convert("L")
    elif frame.shape[2] == 1:
        grey = Image.fromarray(frame[..., 0])
    else:
        grey = Image.fromarray(frame.mean(axis=2).astype(np.uint8))
    return np.asarray(grey.resize((_THUMB, _THUMB), Image.BOX), dtype=np.float32)


def difference(thumb_a, thumb_b):
    """Mean absolute difference of two thumbnails, in [0, 1]."""
    return float(np.abs(thumb_a - thumb_b).mean() / 255.0)


def cuts_from_scores(scores, threshold=DEFAULT_THRESHOLD, ratio=DEFAULT_RATIO, window=DEFAULT_WINDOW):
    """Frames that start a new scene, from consecutive-frame differences.

    Args:
        scores: scores[i] is the difference between frame i and frame i + 1.
        threshold: the absolute floor a cut's score must reach.
        ratio: how many times the local median a cut's score must reach.
        window: half-width, in frames, of the neighbourhood for the median.

    Returns:
        Sorted list of frame indices (>= 1) at which a new scene starts.
    """
    scores = np.asarray(scores, dtype=np.float64)
    cuts = []
    for i, score in enumerate(scores):
        if score < threshold:
            continue
        lo, hi = max(0, i - window), min(len(scores), i + window + 1)
        neighbours = np.concatenate([scores[lo:i], scores[i + 1 : hi]])
        baseline = float(np.median(neighbours)) if len(neighbours) else 0.0
        if score >= ratio * baseline:
            cuts.append(i + 1)
    return cuts


def frame_scores(frames):
    """Consecutive-frame differences of a sequence of (h, w, c) uint8 frames."""
    scores, previous = [], None
    for frame in frames:
        current = thumbnail(np.asarray(frame))
        if previous is not None:
            scores.append(difference(previous, current))
        previous = current
    return np.asarray(scores)


def detect_scene_cuts(frames, threshold=DEFAULT_THRESHOLD, ratio=DEFAULT_RATIO, window=DEFAULT_WINDOW):
    """Frames of one shot sequence that start a new scene.

    Args:
        frames: (N, h, w, c) uint8 frames (array or any iterable of frames).
        threshold: see cuts_from_scores.
        ratio: see cuts_from_scores.
        window: see cuts_from_scores.

    Returns:
        Sorted list of frame indices at which a new scene starts (0 is never
        listed: it always starts one).
    """
    return cuts_from_scores(frame_scores(frames), threshold, ratio, window)


class SceneTracker:
    """Scores frames as they stream past, per run of frames, without keeping them.

    Args:
        threshold: see cuts_from_scores.
        ratio: see cuts_from_scores.
        window: see cuts_from_scores.
    """

    def __init__(self, threshold=DEFAULT_THRESHOLD, ratio=DEFAULT_RATIO, window=DEFAULT_WINDOW):
        # `not (... )` also refuses NaN, which every comparison fails; NumPy's scalars are numbers, a bool is not.
        if not (_is_number(threshold) and 0 <= threshold <= 1):
            raise DataError(f"the cut threshold (--cut-threshold) must be a frame difference from 0 to 1, "
                            f"got {threshold!r}")
        if not (_is_number(ratio) and 1 <= ratio < math.inf):
            raise DataError(f"the cut ratio (--cut-ratio) must be a finite number of at least 1 (times the "
                            f"nearby frames' median difference), got {ratio!r}")
        # Plain floats: the settings go into the dataset's provenance (JSON) as they are.
        self.threshold, self.ratio, self.window = float(threshold), float(ratio), window
        self._scores = {}
        self._previous = {}

    def add(self, run, frame):
        """Records the next frame of run `run` (any hashable key)."""
        current = thumbnail(frame)
        if run in self._previous:
            self._scores[run].append(difference(self._previous[run], current))
        else:
            self._scores[run] = []
        self._previous[run] = current

    def cuts(self, run):
        """Cut positions (frame indices within run `run`)."""
        return cuts_from_scores(self._scores.get(run, []), self.threshold, self.ratio, self.window)

    def config(self):
        """The settings, for provenance records."""
        return {"threshold": self.threshold, "ratio": self.ratio, "window": self.window}


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
