"""The evaluation's metrics, one table: what each is called, how it is computed over frames, how its value is
printed, and whether higher is better. Scoring (scoring.compute_scores), the files and lines written from the
scores (files: prediction_scores.json/.txt, the comparison of several models, the summary prednet-eval prints)
read METRICS and name no metric of their own; each takes `metrics=METRICS`, so another table (METRICS plus an
entry) is scored, written and compared with no other change.

Adding a metric is one entry here and the function that computes it: e.g. the mean absolute error,

    def absolute_error(actual, predicted):
        return np.abs(actual.astype(np.float64) - predicted)

    METRICS = (..., Metric("mae", "MAE", absolute_error, ".6g"))

adds mae_model, mae_prev and mae_last_seen to the scores, an MAE line to prediction_scores.txt (and a column
to its table per time step), two columns to the comparison and MAE to the printed summary.
"""

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = [
    "METRICS",
    "Metric",
    "PSNR_CAP",
    "each_frame",
    "headline",
    "squared_error",
]


@dataclass(frozen=True)
class Metric:
    """One evaluation metric.

    Attributes:
        name: its key in the scores: `<name>_model` (the model's), `<name>_prev` (copying the previous
            frame's), `<name>_last_seen` (repeating the last frame seen, when extrapolating).
        label: its name as printed ("MSE").
        values: (actual, predicted) -> an array whose first two axes are (sequence, step), for frames
            (n, steps, H, W, C); a score is the mean of its values, over all of them or per step. A metric
            of one number per frame is `each_frame(score)`; one of pixels may keep them (squared_error),
            which is how kitti_evaluate.py averaged its MSE.
        value_format: format spec of a score in prediction_scores.txt and the printed summary (".6g").
        unit: printed after a value there ("dB"), or "".
        higher_is_better: True for a similarity (SSIM, PSNR), False for an error (MSE).
        step_format: format spec in prediction_scores.txt's table per time step; None: value_format.
        step_width: that table's column width.
    """

    name: str
    label: str
    values: Callable
    value_format: str
    unit: str = ""
    higher_is_better: bool = False
    step_format: str | None = None
    step_width: int = 10

    def key(self, of):
        """The scores' key of this metric `of` "model", "prev" or "last_seen" (or "ratio": the model's over
        the previous frame's, kept for the headline metric)."""
        return f"{self.name}_{of}"

    def text(self, value):
        """A score as printed: "31.94 dB"."""
        return format(value, self.value_format) + (f" {self.unit}" if self.unit else "")

    def score(self, values):
        """The mean of a metric's values, a float as the scores hold it."""
        return float(np.mean(values))

    def per_step(self, values):
        """The mean of a metric's values at each step: a list of floats."""
        steps_axis_kept = (0,) + tuple(range(2, values.ndim))
        return [float(v) for v in values.mean(axis=steps_axis_kept)]


def each_frame(score):
    """A score of one frame pair, `score(actual, predicted)` -> float, as a Metric's values: an
    (n, steps) array of it, frame by frame."""

    def values(actual, predicted):
        return np.array([[score(actual[i, t], predicted[i, t]) for t in range(actual.shape[1])]
                         for i in range(actual.shape[0])])

    return values


def squared_error(actual, predicted):
    """Squared difference of every pixel, in float64 (kitti_evaluate.py's MSE is their mean)."""
    return (actual.astype(np.float64) - predicted) ** 2


def _ssim(actual, predicted):
    from skimage.metrics import structural_similarity

    side = min(actual.shape[0], actual.shape[1])
    window = min(7, side if side % 2 else side - 1)
    if window < 3:
        return math.nan
    return float(
        structural_similarity(actual, predicted, data_range=1.0, channel_axis=-1, win_size=window)
    )


# PSNR of identical frames is infinite; capping keeps means finite and is
# far above anything a prediction reaches.
PSNR_CAP = 100.0


def _psnr(actual, predicted):
    from skimage.metrics import peak_signal_noise_ratio

    if np.array_equal(actual, predicted):
        return PSNR_CAP
    return float(min(PSNR_CAP, peak_signal_noise_ratio(actual, predicted, data_range=1.0)))


# The first is the headline: kitti_evaluate.py's MSE, the one whose ratio to the previous frame's is reported
# and judged in words, that sorts the comparison and that the plots draw.
METRICS = (
    Metric("mse", "MSE", squared_error, ".6g", step_format=".6f", step_width=11),
    Metric("ssim", "SSIM", each_frame(_ssim), ".4f", higher_is_better=True),
    Metric("psnr", "PSNR", each_frame(_psnr), ".2f", unit="dB", higher_is_better=True),
)


def headline(metrics=METRICS):
    """The table's first metric, the headline. Its ratio to the previous frame's is judged in words as an
    error's ("0.954x the previous frame's error"), so it is one where lower is better."""
    first = metrics[0]
    if first.higher_is_better:
        raise ValueError(f"The headline metric ({first.label}) must be an error (lower is better): its "
                         "ratio to the previous frame's is reported as one.")
    return first
