"""Evaluating next-frame prediction: the authors' metrics, SSIM/PSNR, plots, comparisons.

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

import hashlib
import math
import os
from pathlib import Path

import numpy as np

from prednet_keras import runs

__all__ = [
    "EvalError",
    "ModelRef",
    "baseline_verdict",
    "load_run_model",
    "comparison_rows",
    "compute_scores",
    "evaluate_model",
    "load_sequences",
    "plot_comparison",
    "plot_grid",
    "plot_per_step",
    "predict",
    "resolve_models",
    "scores_text",
    "write_comparison",
    "write_scores",
]

SCORES_JSON = "prediction_scores.json"
SCORES_TXT = "prediction_scores.txt"
PLOTS_DIR = "prediction_plots"
PER_STEP_PLOT = "per_step.png"


class EvalError(ValueError):
    """A model argument or evaluation setting that cannot be used."""


class ModelRef:
    """A model to evaluate: its file, a display name, and its run folder if any.

    Args:
        path: the .keras file.
        name: the name used in tables and folder names.
        run_folder: the run folder holding it, or None.
    """

    def __init__(self, path, name, run_folder=None):
        self.path = Path(path)
        self.name = name
        self.run_folder = None if run_folder is None else Path(run_folder)

    def __repr__(self):
        return f"ModelRef({str(self.path)!r}, name={self.name!r})"

    def default_output(self, suffix="eval"):
        """Where this model's results go unless told otherwise: `<run>/<suffix>`,
        `<stem>-<suffix>` beside a loose .keras file, or `./<name>-<suffix>` for a
        shipped model (its folder is a read-only record inside the package)."""
        from prednet_keras import pretrained

        if self.run_folder is not None and pretrained.is_shipped(self.run_folder):
            return Path.cwd() / f"{self.run_folder.name}-{suffix}"
        if self.run_folder is not None:
            return self.run_folder / suffix
        return self.path.parent / f"{self.path.stem}-{suffix}"


def resolve_models(arguments):
    """Turns command-line arguments into the models they name.

    Args:
        arguments: paths, each a .keras file, a run folder, or a folder of run
            folders; or the name of a shipped model (prednet_keras.pretrained).

    Returns:
        A list of ModelRef, in argument order (runs of a folder sorted by name),
        with unique names.

    Raises:
        EvalError: a path that is none of these, or a run without model.keras yet.
    """
    from prednet_keras import pretrained

    found = []
    for argument in arguments:
        path = Path(argument)
        if not path.exists() and pretrained.ALIASES.get(argument, argument) in pretrained.names():
            path = pretrained.path(argument)
        if not path.exists():
            shipped = ", ".join(pretrained.names())
            raise EvalError(f"{argument}: no such file or folder (nor a shipped model: {shipped}).")
        if path.is_file():
            if path.suffix != ".keras":
                raise EvalError(f"{argument}: not a .keras model file, a run folder, or a folder of run folders.")
            run = path.parent if path.name == runs.MODEL and runs.is_run_folder(path.parent) else None
            found.append(ModelRef(path, path.parent.name if run is not None else path.stem, run))
            continue
        folders = runs.find_runs(path)
        if not folders:
            raise EvalError(
                f"{argument}: a folder, but neither a run folder (manifest.json, model.keras) nor a "
                "folder of run folders."
            )
        for folder in folders:
            model = folder / runs.MODEL
            if not model.is_file():
                if len(folders) == 1:
                    raise EvalError(f"{folder}: run folder without {runs.MODEL} yet (no epoch completed).")
                continue
            found.append(ModelRef(model, folder.name, folder if runs.is_run_folder(folder) else None))
        if not any(ref.path.parent in folders for ref in found):
            raise EvalError(f"{argument}: none of its run folders has a {runs.MODEL} yet.")
    names = [ref.name for ref in found]
    for ref in found:
        if names.count(ref.name) > 1:
            ref.name = f"{ref.path.parent.parent.name}/{ref.name}" if ref.run_folder else str(ref.path.with_suffix(""))
    if len({ref.path.resolve() for ref in found}) != len(found):
        raise EvalError("The same model is named twice.")
    return found


def file_checksum(path, chunk=1 << 20):
    """sha256 of a file's bytes, as "sha256:<hex>"."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def load_sequences(source, nt, size=None):
    """The test sequences: non-overlapping ('unique') nt-frame runs from one source.

    Args:
        source: anything load_frames reads; None: the embedded test split.
        nt: frames per sequence.
        size: (H, W) to resize to, or None.

    Returns:
        (X float32 (n, nt, H, W, C) in [0, 1], info dict).
    """
    from prednet_keras import data as pdata
    from prednet_keras.train import dataset_checksum

    origin = "embedded:test" if source is None else str(source)
    frames = pdata.load_frames(pdata.embedded_dataset("test") if source is None else source, size=size)
    sequences = pdata.SequenceGenerator(frames, nt, batch_size=8, sequence_start_mode="unique", output_mode="prediction")
    X = sequences.create_all()
    info = {
        "source": origin,
        "frames": len(frames),
        "frame_shape": list(frames.frame_shape),
        "sequences": int(len(X)),
        "nt": int(nt),
        "checksum": dataset_checksum(frames),
    }
    return X, info


def model_geometry(model):
    """(nt, (H, W, C)) of a model's input; entries are None where not fixed."""
    shape = tuple(model.inputs[0].shape)
    return shape[1], tuple(shape[2:])


def predict(model, X, nt=None, extrap_start=None, batch_size=8, jit_compile=None, precision=None):
    """Frame predictions of a trained model for sequences X.

    Args:
        model: a model holding one PredNet (e.g. a run's model.keras).
        X: (n, nt, H, W, C) float32 in [0, 1].
        nt: sequence length (default X's).
        extrap_start: feed predictions back from this step on, or None.
        batch_size: sequences per forward pass.
        jit_compile: Keras' jit_compile; None: off on TensorFlow (its CPU
            kernels are faster than XLA for PredNet), Keras' choice elsewhere.
        precision: dtype policy of the prediction model ("float32",
            "mixed_bfloat16"); None: the trained layer's own.

    Returns:
        Xhat, same shape as X: Xhat[:, t] is the prediction of frame t.
    """
    import keras

    from prednet_keras.models import build_prediction_model

    nt = X.shape[1] if nt is None else nt
    if extrap_start is not None and not 0 < extrap_start < nt:
        raise EvalError(f"--extrap-start must be between 1 and nt - 1 = {nt - 1}, got {extrap_start}.")
    if _is_chainer_prediction_model(model):
        if precision not in (None, "float32"):
            raise EvalError(f"--precision {precision} is for Lotter PredNet models only, not the Chainer PredNet.")
        return _predict_chainer(model, X, extrap_start, batch_size, jit_compile)
    predictor = build_prediction_model(model, nt=nt, extrap_start_time=extrap_start, frame_shape=X.shape[2:],
                                       dtype=precision)
    if jit_compile is None:
        jit_compile = False if keras.backend.backend() == "tensorflow" else "auto"
    predictor.compile(jit_compile=jit_compile)
    return np.asarray(predictor.predict(X, batch_size=batch_size, verbose=0), dtype=np.float32)


def _is_chainer_prediction_model(model):
    """True for a model holding a Chainer-lineage PredNet and no Lotter PredNet
    (a `prednet-train --model prednet-chainer` run's model.keras)."""
    from prednet_keras.layers.chainer import ChainerPredNet
    from prednet_keras.layers.lotter import PredNet

    def walk(layer):
        for child in getattr(layer, "layers", []):
            yield child
            if not isinstance(child, (PredNet, ChainerPredNet)):
                yield from walk(child)

    found = list(walk(model))
    return any(isinstance(layer, ChainerPredNet) for layer in found) and not any(
        isinstance(layer, PredNet) for layer in found
    )


def _predict_chainer(model, X, extrap_start, batch_size, jit_compile):
    """Xhat of a Chainer PredNet prediction model: its step t predicts frame t+1, so
    Xhat[:, t] = output[:, t-1]; Xhat[:, 0] is zeros (the first step is not scored)."""
    import keras

    if extrap_start is not None:
        raise EvalError("--extrap-start is not available for the Chainer PredNet (prednet-chainer) models.")
    if jit_compile is None:
        jit_compile = False if keras.backend.backend() == "tensorflow" else "auto"
    model.compile(jit_compile=jit_compile)
    out = np.asarray(model.predict(np.asarray(X, dtype=np.float32), batch_size=batch_size, verbose=0), dtype=np.float32)
    Xhat = np.zeros_like(out)
    Xhat[:, 1:] = out[:, :-1]
    return Xhat


AUTOENCODER_SCORES_JSON = "autoencoder_scores.json"


def is_image_model(model):
    """True for a model of single images (N, H, W, C), i.e. an MNIST autoencoder, not of sequences."""
    return len(tuple(model.inputs[0].shape)) == 4


def evaluate_autoencoder(model, data, target, plots=10):
    """Test MSE of an MNIST autoencoder and a reconstruction grid, written to `target`.

    Args:
        model: the autoencoder (a `--model autoencoder` run's model.keras).
        data: an MNIST file or folder load_mnist reads; None: the embedded MNIST.
        target: output folder (autoencoder_scores.json, reconstructions.png).
        plots: test images in the grid (0: no grid).

    Returns:
        The scores dict.
    """
    from prednet_keras import autoencoder as ae
    from prednet_keras.data import load_mnist

    (x_train, _), (x_test, _) = load_mnist(data)
    scores = {
        "kind": "autoencoder",
        "test_mse": ae.autoencoder_mse(model, x_test),
        "mean_image_test_mse": ae.mean_image_mse(x_train, x_test),
        "test_images": int(len(x_test)),
        "data": str(data) if data else "embedded:mnist",
    }
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    if plots:
        runs.write_through_temporary(
            target / "reconstructions.png", lambda path: ae.save_reconstruction_grid(model, x_test, path, count=plots)
        )
    runs.atomic_write_json(target / AUTOENCODER_SCORES_JSON, scores)
    return scores


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


def plot_sequences(count, plots):
    """The test sequences drawn in prediction_plots/: `plots` of them, evenly spread."""
    return [int(i) for i in np.unique(np.linspace(0, count - 1, min(plots, count)).round().astype(int))]


def plot_name(number, sequence):
    """prediction_plots/ file name: numbered 1, 2, ... and naming the test sequence drawn."""
    return f"plot_{number:02d}_sequence_{sequence:03d}.png"


def plot_note(sequences, count):
    """What prediction_plots/ holds, for prediction_scores.txt."""
    shown = ", ".join(str(i) for i in sequences)
    return (f"{len(sequences)} of the {count} test sequences ({shown}), evenly spread; "
            "plot_NN_sequence_III.png is plot NN, of test sequence III (from 0); rows Actual / Predicted")


def scores_text(scores, name=None):
    """prediction_scores.txt: kitti_evaluate.py's two lines, then the rest."""
    lines = [
        f"Model MSE: {scores['mse_model']:f}",
        f"Previous Frame MSE: {scores['mse_prev']:f}",
        "",
    ]
    if name:
        lines.append(f"model: {name}")
    lines += [
        f"sequences: {scores['sequences']} x {scores['nt']} frames of {'x'.join(map(str, scores['frame_shape']))}"
        " (first step not scored)",
        f"MSE   model {scores['mse_model']:.6g}   previous frame {scores['mse_prev']:.6g}"
        + (f"   ratio {scores['mse_ratio']:.3f}" if scores.get("mse_ratio") is not None else ""),
        f"      {baseline_verdict(scores)}",
        f"SSIM  model {scores['ssim_model']:.4f}   previous frame {scores['ssim_prev']:.4f}",
        f"PSNR  model {scores['psnr_model']:.2f} dB   previous frame {scores['psnr_prev']:.2f} dB",
    ]
    extrap = scores.get("extrapolation")
    if extrap:
        lines += [
            "",
            f"extrapolation from step {extrap['start']} ({extrap['steps']} steps predicted from predictions):",
            f"MSE   model {extrap['mse_model']:.6g}   last seen frame {extrap['mse_last_seen']:.6g}",
            f"SSIM  model {extrap['ssim_model']:.4f}   last seen frame {extrap['ssim_last_seen']:.4f}",
            f"PSNR  model {extrap['psnr_model']:.2f} dB   last seen frame {extrap['psnr_last_seen']:.2f} dB",
        ]
    plotted = scores.get("plots")
    if plotted:
        lines += ["", f"{PLOTS_DIR}/: {plot_note(plotted, scores['sequences'])}"]
    per = scores["per_step"]
    lines += ["", "per time step:", f"{'t':>3} {'MSE model':>11} {'MSE prev':>11} {'SSIM model':>10} {'PSNR model':>10}"]
    for t in per["t"]:
        prev = per["mse_prev"][t]
        lines.append(
            f"{t:>3} {per['mse_model'][t]:>11.6f} {'-' if prev is None else format(prev, '.6f'):>11} "
            f"{per['ssim_model'][t]:>10.4f} {per['psnr_model'][t]:>10.2f}"
        )
    return "\n".join(lines) + "\n"


def _figure(width, height):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100)


def _show_frame(axes, frame):
    frame = np.clip(frame, 0, 1)
    if frame.shape[-1] == 1:
        axes.imshow(frame[..., 0], cmap="gray", vmin=0, vmax=1, interpolation="none")
    else:
        axes.imshow(frame, interpolation="none")
    axes.set_xticks([])
    axes.set_yticks([])


def plot_grid(X, Xhat, path, extrap_start=None, title=None):
    """One sequence as the original plots: 2 x nt frames, rows Actual / Predicted.

    Args:
        X: (nt, H, W, C) actual frames.
        Xhat: (nt, H, W, C) predictions.
        path: PNG to write (atomically).
        extrap_start: columns from this step on are marked as extrapolated.
        title: figure title.
    """
    nt = X.shape[0]
    aspect = X.shape[1] / X.shape[2]
    width = max(nt, 2) * 1.0
    figure = _figure(width, 2 * (width / nt) * aspect * 1.06 + (0.45 if title else 0.3))
    grid = figure.add_gridspec(2, nt, wspace=0.03, hspace=0.03)
    for t in range(nt):
        for row, frames in enumerate((X, Xhat)):
            axes = figure.add_subplot(grid[row, t])
            _show_frame(axes, frames[t])
            extrapolated = extrap_start is not None and t >= extrap_start
            if row == 0:
                axes.set_title(f"t={t}", fontsize=7, color="tab:red" if extrapolated else "black")
            if extrapolated and row == 1:
                for spine in axes.spines.values():
                    spine.set_edgecolor("tab:red")
                    spine.set_linewidth(1.5)
            if t == 0:
                axes.set_ylabel("Actual" if row == 0 else "Predicted", fontsize=8)
    if title:
        figure.suptitle(title, fontsize=8)
    figure.subplots_adjust(left=0.04, right=0.995, bottom=0.01, top=0.86 if title else 0.9)
    runs.write_through_temporary(path, lambda temporary: figure.savefig(temporary, format="png"))


def plot_per_step(scores, path, title=None):
    """MSE per time step, model vs previous frame (and last seen frame when extrapolating)."""
    per = scores["per_step"]
    figure = _figure(6, 3.6)
    axes = figure.subplots()
    axes.plot(per["t"][1:], per["mse_model"][1:], "o-", label="model")
    axes.plot(per["t"][1:], per["mse_prev"][1:], "s--", label="previous frame")
    extrap = scores.get("extrapolation")
    if extrap:
        T = extrap["start"]
        axes.plot(per["t"][T:], extrap["per_step_mse_last_seen"][T:], "^:", label="last seen frame")
        axes.axvspan(T - 0.5, per["t"][-1] + 0.5, color="tab:red", alpha=0.07, label="extrapolated")
    axes.set_xlabel("time step t")
    axes.set_ylabel("MSE")
    axes.set_title(title or "prediction error per time step", fontsize=9)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    runs.write_through_temporary(path, lambda temporary: figure.savefig(temporary, format="png"))


def write_scores(folder, scores, X=None, Xhat=None, plots=10, name=None, extrap_start=None):
    """Writes prediction_scores.json/.txt, per_step.png and prediction_plots/.

    Args:
        folder: output folder (created).
        scores: from compute_scores (plus any context to keep in the JSON).
        X, Xhat: the frames and predictions, for the grids (None: no grids).
        plots: number of sequences to draw (evenly spread over the test set).
        name: model name for titles.
        extrap_start: marks extrapolated steps in the grids.

    Returns:
        List of the files written.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / SCORES_JSON, folder / SCORES_TXT, folder / PER_STEP_PLOT]
    if X is not None and plots:
        scores = dict(scores, plots=plot_sequences(len(X), plots))
    runs.atomic_write_json(written[0], scores)
    runs.atomic_write(written[1], scores_text(scores, name))
    plot_per_step(scores, written[2], title=name)
    if X is not None and plots:
        plot_dir = folder / PLOTS_DIR
        plot_dir.mkdir(exist_ok=True)
        for old in plot_dir.glob("plot_*.png"):
            old.unlink()
        for number, i in enumerate(plot_sequences(len(X), plots), start=1):
            path = plot_dir / plot_name(number, i)
            plot_grid(X[i], Xhat[i], path, extrap_start, title=f"{name or ''} test sequence {i}".strip())
            written.append(path)
    return written


def load_run_model(ref):
    """Loads a model to evaluate; one from a run folder must hold the weights its run recorded.

    A model.keras that was replaced or changed after training (another run's
    file copied in, a damaged copy) would be scored under the run's name and
    manifest; it is refused instead.

    Args:
        ref: a ModelRef.

    Raises:
        EvalError: the weights differ from the run's record.
    """
    from prednet_keras.saving import load_model
    from prednet_keras.starting_point import weights_checksum

    model = load_model(ref.path, compile=False)
    if ref.run_folder is None:
        return model
    recorded = runs.RunFolder(ref.run_folder).recorded_model_checksum()
    if recorded is not None:
        expected, where = recorded
        actual = weights_checksum(model)
        if actual != expected:
            raise EvalError(
                f"{ref.path} does not hold the weights its run recorded ({where} {expected[:12]}..., the file "
                f"holds {actual[:12]}...): it was replaced or changed after training, so it is not scored."
            )
    return model


def evaluate_model(ref, X, nt=None, extrap_start=None, batch_size=8, jit_compile=None):
    """Loads a model and scores its predictions of X.

    Args:
        ref: a ModelRef.
        X: (n, nt, H, W, C) test sequences.
        nt: sequence length (default X's).
        extrap_start: extrapolation start step or None.
        batch_size: sequences per forward pass.
        jit_compile: see predict().

    Returns:
        (scores, Xhat).
    """
    model = load_run_model(ref)
    Xhat = predict(model, X, nt=nt, extrap_start=extrap_start, batch_size=batch_size, jit_compile=jit_compile)
    return compute_scores(X, Xhat, extrap_start), Xhat


COMPARISON_COLUMNS = (
    "model", "mse_model", "mse_prev", "mse_ratio", "ssim_model", "ssim_prev", "psnr_model", "psnr_prev",
)


def comparison_rows(results):
    """One row per model for the comparison table.

    Args:
        results: list of (name, scores).
    """
    rows = []
    for name, scores in results:
        row = {"model": name}
        row.update({k: scores.get(k) for k in COMPARISON_COLUMNS[1:]})
        extrap = scores.get("extrapolation")
        if extrap:
            row["extrap_mse_model"] = extrap["mse_model"]
            row["extrap_mse_last_seen"] = extrap["mse_last_seen"]
        rows.append(row)
    return rows


def comparison_text(rows):
    """An aligned text table of comparison rows, best MSE first."""
    columns = [c for c in COMPARISON_COLUMNS]
    if any("extrap_mse_model" in r for r in rows):
        columns += ["extrap_mse_model", "extrap_mse_last_seen"]
    cells = [columns] + [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = []
    for index, row in enumerate(cells):
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))))
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def _cell(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) >= 1 else f"{value:.6f}"
    return str(value)


def plot_comparison(rows, path):
    """Bar chart: MSE of each model, previous-frame MSE as a marker per model."""
    figure = _figure(max(5, 1.1 * len(rows) + 2), 3.8)
    axes = figure.subplots()
    x = np.arange(len(rows))
    axes.bar(x, [r["mse_model"] for r in rows], color="tab:blue", label="model MSE")
    axes.scatter(x, [r["mse_prev"] for r in rows], color="tab:orange", marker="_", s=600, linewidths=2.5,
                 label="previous-frame MSE", zorder=3)
    axes.set_xticks(x)
    axes.set_xticklabels([r["model"] for r in rows], rotation=20 if len(rows) > 3 else 0, ha="right" if len(rows) > 3 else "center", fontsize=8)
    axes.set_ylabel("MSE (frames after the first)")
    axes.set_title("next-frame prediction error", fontsize=9)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    runs.write_through_temporary(path, lambda temporary: figure.savefig(temporary, format="png"))


def write_comparison(folder, results):
    """Writes comparison.json, .csv, .txt and .png for several models.

    Args:
        folder: output folder (created).
        results: list of (name, scores).

    Returns:
        (rows, list of files written).
    """
    import csv
    import io

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows = sorted(comparison_rows(results), key=lambda r: (r["mse_model"] is None, r["mse_model"]))
    runs.atomic_write_json(folder / "comparison.json", rows)
    buffer = io.StringIO()
    fields = list(rows[0].keys()) if rows else list(COMPARISON_COLUMNS)
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    runs.atomic_write(folder / "comparison.csv", buffer.getvalue())
    runs.atomic_write(folder / "comparison.txt", comparison_text(rows))
    plot_comparison(rows, folder / "comparison.png")
    return rows, [folder / n for n in ("comparison.json", "comparison.csv", "comparison.txt", "comparison.png")]


def describe_environment():
    """Backend and versions, for the scores file."""
    import keras

    return {"backend": keras.backend.backend(), "keras_version": keras.__version__, "pid": os.getpid()}
