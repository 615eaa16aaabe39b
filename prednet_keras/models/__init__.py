"""The networks around the layers and the study's models and training protocols.

This face names the training and prediction models around Lotter's PredNet (models.lotter), loaded on
first use (PEP 562): `prednet_keras.models.build_training_model`, `kitti_prednet_kwargs`, ... as before,
and the identical starting points of docs/runtime.md (models.starting_point: `initial_weights`,
`save_initial_weights`, `load_initial_weights`, `weights_checksum`, `data_order`, `order_checksum`), which
import numpy and h5py only, Keras when a model's weights are made. The other modules are reached by name: lotter (the KITTI training model with its
loss weighting, the prediction model, the last-batch metric every history records), protocols (the
study's protocols: their presets and results), chainer_protocol and autoencoder_protocol (one each),
autoencoder (the study's MNIST control), starting_point.
"""

import importlib

# The public names of models.lotter (its __all__), offered here.
_LOTTER = (
    "LastBatchLoss",
    "LastBatchMSE",
    "LastBatchMetric",
    "WeightedError",
    "build_prediction_model",
    "build_training_model",
    "find_prednet",
    "kitti_prednet_kwargs",
    "layer_loss_weights_for",
    "time_loss_weights_for",
)

# The backend-independent starting points docs/runtime.md documents (models.starting_point), offered here.
_STARTING_POINT = (
    "data_order",
    "initial_weights",
    "load_initial_weights",
    "order_checksum",
    "save_initial_weights",
    "weights_checksum",
)

__all__ = list(_LOTTER) + list(_STARTING_POINT)


def __getattr__(name):
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = "lotter" if name in _LOTTER else "starting_point"
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
