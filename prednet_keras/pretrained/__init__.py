"""Models that ship inside prednet-keras, each a complete run folder, and the authors' released models.

    names()                        the shipped models
    path(name)                     the run folder (model.keras, manifest.json, history.csv, loss.png)
    load(name)                     the Keras model (keras.saving.load_model), shipped or released
    released_names()               the authors' released models (released.py): "prednet-kitti" and
                                   "prednet-kitti-extrapolation", fetched and converted on first use,
                                   then loaded from Keras' cache folder without a network

"prednet-embedded": a 4-layer PredNet (832k parameters) trained on the embedded
real video; on the held-out clip it beats copying the previous frame (MSE
0.000792 against 0.000830). weights/README.md in the source repository gives
the command, the data and every score.

Shipped folders are read-only records: `prednet-train --resume` refuses them,
and `prednet-eval NAME` writes its results elsewhere.
"""

import importlib.resources
from pathlib import Path

__all__ = ["ALIASES", "is_shipped", "load", "names", "path", "released_names"]

_MODELS = ("prednet-embedded",)
ALIASES = {"embedded": "prednet-embedded"}


def names():
    """The names of the shipped models."""
    return _MODELS


def released_names():
    """The names of the authors' released models (fetched on first use; see released.py)."""
    from prednet_keras.pretrained import released

    return released.names()


def _canonical(name):
    name = ALIASES.get(name, name)
    if name not in _MODELS:
        raise ValueError(f"no shipped model named {name!r}; shipped: {', '.join(_MODELS)}; released by the "
                         f"authors (fetched on first use): {', '.join(released_names())}")
    return name


def path(name="prednet-embedded"):
    """The run folder of the shipped model `name` (inside the installed package)."""
    folder = importlib.resources.files(__name__) / _canonical(name)
    if not isinstance(folder, Path) or not (folder / "model.keras").is_file():
        raise FileNotFoundError(2, "shipped model missing from the installed package (reinstall prednet-keras)",
                                str(folder))
    return folder


def is_shipped(folder):
    """Whether `folder` is (inside) one of the shipped run folders."""
    try:
        here = Path(folder).resolve()
    except OSError:
        return False
    root = Path(importlib.resources.files(__name__)).resolve()
    return here == root or root in here.parents


def load(name="prednet-embedded", compile=False, **fetching):
    """The shipped or released model `name`, loaded with keras.saving.load_model.

    Args:
        name: a shipped model (see names(); "embedded" is short for "prednet-embedded"), or one of the
            authors' released models (see released_names()), fetched and converted on first use.
        compile: also restore the training configuration (loss, optimizer).
        fetching: for a released model's first use: timeout (seconds), progress (show the download), say
            (prints a line); see released.model_path.
    """
    from prednet_keras.pretrained import released

    if name in released.names():
        return released.load(name, compile=compile, **fetching)
    if fetching:
        raise TypeError(f"{', '.join(fetching)}: only for the released models, which are fetched; {name} ships.")
    from prednet_keras.formats.keras_files import load_model

    return load_model(path(name) / "model.keras", compile=compile)
