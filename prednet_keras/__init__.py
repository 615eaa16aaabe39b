"""prednet-keras: PredNet for Keras 3, and a controlled study of hardware effects on training.

Importing this package imports Keras (and so the backend named by KERAS_BACKEND,
TensorFlow by default) and registers the custom layers, so that
`keras.saving.load_model` can open PredNet `.keras` files.
"""

__version__ = "0.1.0"

import os

from prednet_keras import _backend_choice

# TensorFlow's C++ start-up INFO lines (oneDNN, CPU features) drown the commands'
# output; warnings and errors still show. A user's own setting wins.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

# Before Keras is imported: a machine without TensorFlow (the GPU machine) falls
# back to an installed backend instead of failing on Keras' default.
_backend_choice.choose_default_backend()

from prednet_keras.data import DataError, SequenceGenerator, load_frames, load_mnist
from prednet_keras.layers import ChainerPredNet, ChainerPredNetCell, PredNet, PredNetCell, keras2_hard_sigmoid
from prednet_keras.legacy import load_legacy_weights
from prednet_keras.models import (
    WeightedError,
    build_prediction_model,
    build_training_model,
    find_prednet,
    kitti_prednet_kwargs,
)

__all__ = [
    "ChainerPredNet",
    "ChainerPredNetCell",
    "DataError",
    "SequenceGenerator",
    "load_frames",
    "load_mnist",
    "PredNet",
    "PredNetCell",
    "keras2_hard_sigmoid",
    "load_legacy_weights",
    "WeightedError",
    "build_prediction_model",
    "build_training_model",
    "find_prednet",
    "kitti_prednet_kwargs",
]
