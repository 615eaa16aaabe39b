"""A model's predictions of test sequences: the sequences, the forward pass (Lotter and Chainer PredNet),
scoring one model end to end, the MNIST autoencoder's test scores, and the backend they ran on."""

import os
from pathlib import Path

import numpy as np

from prednet_keras import backends
from prednet_keras.files import diskwrite
from prednet_keras.evaluate import EvalError
from prednet_keras.evaluate.model_refs import load_run_model
from prednet_keras.evaluate.scoring import compute_scores

__all__ = [
    "AUTOENCODER_SCORES_JSON",
    "describe_environment",
    "evaluate_autoencoder",
    "evaluate_model",
    "is_image_model",
    "load_sequences",
    "model_geometry",
    "predict",
]


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
        "checksum": pdata.dataset_checksum(frames),
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

    from prednet_keras.models.lotter import build_prediction_model

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
        jit_compile = backends.named(keras.backend.backend()).prediction_jit_compile
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
        jit_compile = backends.named(keras.backend.backend()).prediction_jit_compile
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
    from prednet_keras.models import autoencoder as ae
    from prednet_keras.data import load_mnist

    if tuple(model.outputs[0].shape) != tuple(model.inputs[0].shape):
        # A loose .keras file of single images that is no autoencoder (a user's classifier, say).
        raise EvalError(f"{model.name}: takes single images {tuple(model.inputs[0].shape)} but does not "
                        f"reconstruct them (output {tuple(model.outputs[0].shape)}): neither an autoencoder nor "
                        "a video predictor, so prednet-eval does not score it.")
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
        diskwrite.write_through_temporary(
            target / "reconstructions.png", lambda path: ae.save_reconstruction_grid(model, x_test, path, count=plots)
        )
    diskwrite.atomic_write_json(target / AUTOENCODER_SCORES_JSON, scores)
    return scores

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

def describe_environment():
    """Backend and versions, for the scores file."""
    import keras

    return {"backend": keras.backend.backend(), "keras_version": keras.__version__, "pid": os.getpid()}
