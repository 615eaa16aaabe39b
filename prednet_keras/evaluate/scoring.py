"""Scoring next-frame prediction: the authors' metrics, SSIM and PSNR, per step and over extrapolation.

kitti_evaluate.py compared the model's prediction of every frame after the
first with the simplest baseline, "the next frame equals this one":

    MSE_model = mean((X[:, 1:] - Xhat[:, 1:])**2)
    MSE_prev  = mean((X[:, :-1] - X[:, 1:])**2)

on non-overlapping test sequences ('unique' starts), frames in [0, 1]. The
first step is left out because PredNet has seen nothing yet when it predicts
it. Here the same numbers come with SSIM and PSNR (scikit-image, data range 1,
averaged over frames), and with each metric per time step.

With extrapolation (`extrap_start` T), the model is fed its own predictions
from step T on, so Xhat[:, T + k] is a (k + 1)-step prediction. The scores of
those steps are also reported against the baseline that fits that task:
repeating the last frame seen, X[:, T - 1].
"""

import math

import numpy as np

from prednet_keras.evaluate import EvalError

__all__ = [
    "PSNR_CAP",
    "baseline_verdict",
    "compute_scores",
]


def _ssim(a, b):
    from skimage.metrics import structural_similarity

    side = min(a.shape[0], a.shape[1])
    window = min(7, side if side % 2 else side - 1)
    if window < 3:
        return math.nan
    return float(
        structural_similarity(a, b, data_range=1.0, channel_axis=-1, win_size=window)
    )


# PSNR of identical frames is infinite; capping keeps means finite and is
# far above anything a prediction reaches.
PSNR_CAP = 100.0


def _psnr(a, b):
    from skimage.metrics import peak_signal_noise_ratio

    if np.array_equal(a, b):
        return PSNR_CAP
    return float(min(PSNR_CAP, peak_signal_noise_ratio(a, b, data_range=1.0)))


def _frame_metric(metric, A, B):
    """metric over every (sequence, step) frame pair: (n, steps) array."""
    return np.array([[metric(A[i, t], B[i, t]) for t in range(A.shape[1])] for i in range(A.shape[0])])


def _check_finite(Xhat):
    """A prediction that is NaN or infinite has no score: min(cap, nan) would report a perfect PSNR."""
    finite = np.isfinite(Xhat)
    if not finite.all():
        sequence, step = (int(i) for i in np.argwhere(~finite)[0][:2])
        raise EvalError(
            f"The model predicts NaN or infinite values ({int((~finite).sum()):,} of {finite.size:,}; first in "
            f"sequence {sequence}, step {step}): its weights are broken (a diverged or corrupted model), "
            "so there is no score to report."
        )


def compute_scores(X, Xhat, extrap_start=None):
    """The evaluation metrics of predictions Xhat of sequences X.

    Args:
        X: (n, nt, H, W, C) actual frames in [0, 1].
        Xhat: predictions, same shape.
        extrap_start: the step from which the model extrapolated, or None.

    Returns:
        A JSON-ready dict: mse_model, mse_prev (kitti_evaluate.py's numbers),
        ssim_model/ssim_prev, psnr_model/psnr_prev (means over frames t >= 1),
        per_step (each metric for t = 0..nt-1; prev is None at t = 0), and with
        extrap_start an "extrapolation" dict over steps t >= extrap_start with
        the last-seen-frame baseline.
    """
    X = np.asarray(X, dtype=np.float32)
    Xhat = np.asarray(Xhat, dtype=np.float32)
    if X.shape != Xhat.shape:
        raise EvalError(f"Predictions {Xhat.shape} do not match the frames {X.shape}.")
    if X.shape[1] < 2:
        raise EvalError("Sequences need at least 2 frames (the first step is not scored).")
    _check_finite(Xhat)
    nt = X.shape[1]
    model_err = (X.astype(np.float64) - Xhat) ** 2
    prev_err = (X[:, :-1].astype(np.float64) - X[:, 1:]) ** 2
    ssim_model = _frame_metric(_ssim, X, Xhat)
    ssim_prev = _frame_metric(_ssim, X[:, 1:], X[:, :-1])
    psnr_model = _frame_metric(_psnr, X, Xhat)
    psnr_prev = _frame_metric(_psnr, X[:, 1:], X[:, :-1])
    scores = {
        "mse_model": float(np.mean(model_err[:, 1:])),
        "mse_prev": float(np.mean(prev_err)),
        "ssim_model": float(np.mean(ssim_model[:, 1:])),
        "ssim_prev": float(np.mean(ssim_prev)),
        "psnr_model": float(np.mean(psnr_model[:, 1:])),
        "psnr_prev": float(np.mean(psnr_prev)),
        "sequences": int(X.shape[0]),
        "nt": int(nt),
        "frame_shape": list(X.shape[2:]),
        "per_step": {
            "t": list(range(nt)),
            "mse_model": [float(v) for v in model_err.mean(axis=(0, 2, 3, 4))],
            "mse_prev": [None] + [float(v) for v in prev_err.mean(axis=(0, 2, 3, 4))],
            "ssim_model": [float(v) for v in ssim_model.mean(axis=0)],
            "ssim_prev": [None] + [float(v) for v in ssim_prev.mean(axis=0)],
            "psnr_model": [float(v) for v in psnr_model.mean(axis=0)],
            "psnr_prev": [None] + [float(v) for v in psnr_prev.mean(axis=0)],
        },
    }
    scores["mse_ratio"] = scores["mse_model"] / scores["mse_prev"] if scores["mse_prev"] > 0 else None
    if extrap_start is not None:
        T = int(extrap_start)
        last_seen = np.repeat(X[:, T - 1 : T], nt - T, axis=1)
        last_err = (X[:, T:].astype(np.float64) - last_seen) ** 2
        ssim_last = _frame_metric(_ssim, X[:, T:], last_seen)
        psnr_last = _frame_metric(_psnr, X[:, T:], last_seen)
        scores["extrapolation"] = {
            "start": T,
            "steps": nt - T,
            "mse_model": float(np.mean(model_err[:, T:])),
            "mse_last_seen": float(np.mean(last_err)),
            "ssim_model": float(np.mean(ssim_model[:, T:])),
            "ssim_last_seen": float(np.mean(ssim_last)),
            "psnr_model": float(np.mean(psnr_model[:, T:])),
            "psnr_last_seen": float(np.mean(psnr_last)),
            "per_step_mse_last_seen": [None] * T + [float(v) for v in last_err.mean(axis=(0, 2, 3, 4))],
        }
    return scores


def baseline_verdict(scores):
    """The model's MSE against the previous-frame baseline's, in words.

    E.g. "24.4x the previous frame's error: worse than copying the last frame".
    """
    ratio = scores.get("mse_ratio")
    if ratio is None:
        return "the previous-frame baseline has no error here (no motion): no comparison"
    if ratio < 1:
        return (f"{ratio:.3g}x the previous frame's error ({(1 - ratio) * 100:.1f}% lower): "
                "better than copying the last frame")
    if ratio > 1:
        return f"{ratio:.3g}x the previous frame's error: worse than copying the last frame"
    return "the same error as copying the last frame"
