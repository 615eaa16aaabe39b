"""Recurrent layers, one file per model family."""

from prednet_keras.layers.chainer import ChainerPredNet, ChainerPredNetCell
from prednet_keras.layers.lotter import PredNet, PredNetCell, keras2_hard_sigmoid

__all__ = ["ChainerPredNet", "ChainerPredNetCell", "PredNet", "PredNetCell", "keras2_hard_sigmoid"]
