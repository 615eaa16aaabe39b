"""Scoring next-frame prediction: every metric of the table (metrics.METRICS: the authors' MSE, SSIM and PSNR),
per step and over extrapolation, for the model and for the baselines.

kitti_evaluate.py compared the model's prediction of every frame after the
first with the simplest baseline, "the next frame equals this one":

    MSE_model = mean((X[:, 1:] - Xhat[:, 1:])**2)
    MSE_prev  = mean((X[:, :-1] - X[:, 1:])**2)

on non-overlapping test sequences ('unique' starts), frames in [0, 1]. The
first step is left out because PredNet has seen nothing yet when it predicts
it. Here every metric of the table is scored that way (SSIM and PSNR with
scikit-image, data range 1, averaged over frames), also per time step.

With extrapolation (`extrap_start` T), the model is fed its own predictions
from step T on, so Xhat[:, T + k] is a (k + 1)-step prediction. The scores of
those steps are also reported against the baseline that fits that task:
repeating the last frame seen, X[:, T - 1].
"""

import numpy as np

from prednet_keras.evaluate import EvalError
from prednet_keras.evaluate.metrics import METRICS, headline

__all__ = [
    "baseline_verdict",
    "compute_scores",
]


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


def compute_scores(X, Xhat, extrap_start=None, metrics=METRICS):
    """Every metric of `metrics` for predictions Xhat of sequences X, and for the baselines.

    Args:
        X: (n, nt, H, W, C) actual frames in [0, 1].
        Xhat: predictions, same shape.
        extrap_start: the step from which the model extrapolated, or None.
        metrics: the table of metrics scored (metrics.METRICS).

    Returns:
        A JSON-ready dict: for each metric, <name>_model and <name>_prev (means over frames t >= 1; for MSE,
        kitti_evaluate.py's numbers), per_step (each of them for t = 0..nt-1; prev is None at t = 0), the
        headline metric's ratio (mse_ratio: the model's over the previous frame's), and with extrap_start an
        "extrapolation" dict over steps t >= extrap_start with the last-seen-frame baseline.
    """
    X = np.asarray(X, dtype=np.float32)
    Xhat = np.asarray(Xhat, dtype=np.float32)
    if X.shape != Xhat.shape:
        raise EvalError(f"Predictions {Xhat.shape} do not match the frames {X.shape}.")
    if X.shape[1] < 2:
        raise EvalError("Sequences need at least 2 frames (the first step is not scored).")
    _check_finite(Xhat)
    first = headline(metrics)
    nt = X.shape[1]
    # The baseline "the next frame equals this one": frame t predicted by frame t - 1, for t >= 1.
    model_values = {m.name: m.values(X, Xhat) for m in metrics}
    prev_values = {m.name: m.values(X[:, 1:], X[:, :-1]) for m in metrics}
    scores = {}
    for m in metrics:
        scores[m.key("model")] = m.score(model_values[m.name][:, 1:])
        scores[m.key("prev")] = m.score(prev_values[m.name])
    scores.update({"sequences": int(X.shape[0]), "nt": int(nt), "frame_shape": list(X.shape[2:])})
    per_step = {"t": list(range(nt))}
    for m in metrics:
        per_step[m.key("model")] = m.per_step(model_values[m.name])
        per_step[m.key("prev")] = [None] + m.per_step(prev_values[m.name])
    scores["per_step"] = per_step
    model, prev = scores[first.key("model")], scores[first.key("prev")]
    scores[first.key("ratio")] = model / prev if prev > 0 else None
    if extrap_start is not None:
        T = int(extrap_start)
        last_seen = np.repeat(X[:, T - 1 : T], nt - T, axis=1)
        last_values = {m.name: m.values(X[:, T:], last_seen) for m in metrics}
        extrapolation = {"start": T, "steps": nt - T}
        for m in metrics:
            extrapolation[m.key("model")] = m.score(model_values[m.name][:, T:])
            extrapolation[m.key("last_seen")] = m.score(last_values[m.name])
        extrapolation[f"per_step_{first.key('last_seen')}"] = [None] * T + first.per_step(last_values[first.name])
        scores["extrapolation"] = extrapolation
    return scores


def baseline_verdict(scores, metrics=METRICS):
    """The model's headline error (MSE) against the previous-frame baseline's, in words.

    E.g. "24.4x the previous frame's error: worse than copying the last frame".
    """
    ratio = scores.get(headline(metrics).key("ratio"))
    if ratio is None:
        return "the previous-frame baseline has no error here (no motion): no comparison"
    if ratio < 1:
        return (f"{ratio:.3g}x the previous frame's error ({(1 - ratio) * 100:.1f}% lower): "
                "better than copying the last frame")
    if ratio > 1:
        return f"{ratio:.3g}x the previous frame's error: worse than copying the last frame"
    return "the same error as copying the last frame"
