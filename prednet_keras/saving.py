"""Writing and reading model files safely: no truncated files, clear errors for bad ones."""

import os
import zipfile

import keras

from prednet_keras.diskwrite import temp_path_for

__all__ = ["ModelFileError", "load_model", "save_model_atomically"]


class ModelFileError(ValueError):
    """A model file is missing, not a .keras file, or corrupted."""


def save_model_atomically(model, path):
    """Saves `model` to `path` (.keras) through a temporary file in the same folder,
    so an interruption never leaves a truncated file and an old file survives
    until the new one is complete."""
    path = os.fspath(path)
    if not path.endswith(".keras"):
        raise ValueError(f"A model file must end in .keras, got {path}.")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    temporary = os.fspath(temp_path_for(os.path.abspath(path)))
    try:
        model.save(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def load_model(path, compile=True):
    """`keras.saving.load_model` with errors that name the file and the problem."""
    from prednet_keras._framework_import import register_serializables

    register_serializables()  # a .keras file names our layers; Keras must know them

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(2, "Model file not found", path)
    if os.path.isdir(path):
        raise ModelFileError(f"{path} is a folder, not a .keras model file.")
    if not zipfile.is_zipfile(path):
        raise ModelFileError(f"{path} is not a Keras 3 .keras file (not a zip archive; truncated or corrupted?).")
    try:
        model = keras.saving.load_model(path, compile=compile)
    except (zipfile.BadZipFile, KeyError, OSError, EOFError) as error:
        raise ModelFileError(f"{path} could not be read as a Keras model ({error}).") from None
    except (TypeError, ValueError) as error:
        raise ModelFileError(f"{path} could not be loaded: {_cause(error)}") from None
    _check_finite_weights(model, path)
    return model


def _check_finite_weights(model, path):
    """A NaN or infinite weight (a diverged run saved, or corrupted bytes) makes every output untrustworthy,
    yet clipping layers can still turn it into plausible-looking frames: refuse the file."""
    import numpy as np

    for weight in model.weights:
        values = keras.ops.convert_to_numpy(weight)
        bad = ~np.isfinite(values)
        if bad.any():
            raise ModelFileError(
                f"{path}: weight {weight.path} holds {int(bad.sum()):,} NaN or infinite values of {values.size:,}; "
                "the model is broken (a diverged run or a corrupted file) and cannot be used."
            )


def _cause(error):
    """The error's message on one line without the object configs Keras embeds in it (thousands of
    characters of JSON that hide the cause); the cause itself, Keras' "Exception encountered", is kept whole."""
    text = " ".join(str(error).split())
    head, _, cause = text.partition(" Exception encountered: ")
    head = head.split(" config={", 1)[0].split(" Full object config:", 1)[0].rstrip(" .")
    cause = cause.split(" Full object config:", 1)[0].strip()
    return f"{head}. Cause: {cause}" if cause else head
