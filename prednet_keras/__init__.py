"""prednet-keras: PredNet for Keras 3, and a controlled study of hardware effects on training.

Importing this package imports no deep-learning framework: the names below load
on first use (PEP 562), so the commands' --help and the data tools start in a
fraction of a second. When Keras arrives (through these names, a command, or
the user's own `import keras`), prednet_keras' layers are registered with it, so
`keras.saving.load_model` opens PredNet `.keras` files; see _framework_import.

    prednet_keras.PredNet, PredNetCell           the faithful port (layers/lotter.py)
    prednet_keras.build_training_model, ...      the KITTI training and prediction models
    prednet_keras.datasets                       the embedded data (MNIST, real video)
    prednet_keras.pretrained                     the shipped model
"""

__version__ = "0.1.0"

import importlib
import os

from prednet_keras import _backend_choice, _framework_import

# TensorFlow's C++ INFO lines after start-up drown the commands' output;
# warnings and errors still show. A user's own setting wins.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

# Before Keras is imported: a machine without TensorFlow (the GPU machine) falls
# back to an installed backend instead of failing on Keras' default.
_backend_choice.choose_default_backend()
_framework_import.install()

# Public name -> the module that defines it.
_LAZY = {
    "ChainerPredNet": "prednet_keras.layers.chainer",
    "ChainerPredNetCell": "prednet_keras.layers.chainer",
    "PredNet": "prednet_keras.layers.lotter",
    "PredNetCell": "prednet_keras.layers.lotter",
    "keras2_hard_sigmoid": "prednet_keras.layers.lotter",
    "DataError": "prednet_keras.data.errors",
    "SequenceGenerator": "prednet_keras.data.sequences",
    "load_frames": "prednet_keras.data.prepare",
    "load_mnist": "prednet_keras.data.mnist",
    "load_legacy_weights": "prednet_keras.formats.keras2",
    "WeightedError": "prednet_keras.models.lotter",
    "build_prediction_model": "prednet_keras.models.lotter",
    "build_training_model": "prednet_keras.models.lotter",
    "find_prednet": "prednet_keras.models.lotter",
    "kitti_prednet_kwargs": "prednet_keras.models.lotter",
}
_SUBMODULES = ("datasets", "pretrained")

__all__ = sorted(_LAZY) + list(_SUBMODULES)


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
