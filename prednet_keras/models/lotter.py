"""Models built around the PredNet layer: the KITTI training model and the prediction model.

The authors' `kitti_train.py` turned the per-layer errors into one number with
two frozen Dense layers (layer weights, then time weights) and trained with MAE
against zero targets. Here the same weighted sum is one small serializable
layer, `WeightedError`: no Lambda layers, so `.keras` files load in safe mode.
"""

import keras
import numpy as np
from keras import ops

from prednet_keras.layers.device_constants import cached
from prednet_keras.layers.lotter import PredNet
from prednet_keras.options.recipe import layer_loss_weights_for, time_loss_weights_for

__all__ = [
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
]


def kitti_prednet_kwargs(**overrides):
    """The constructor arguments of the authors' KITTI model (4 layers, 3x3 filters)."""
    kwargs = dict(
        stack_sizes=(3, 48, 96, 192),
        R_stack_sizes=(3, 48, 96, 192),
        A_filt_sizes=(3, 3, 3),
        Ahat_filt_sizes=(3, 3, 3, 3),
        R_filt_sizes=(3, 3, 3, 3),
    )
    kwargs.update(overrides)
    return kwargs


@keras.saving.register_keras_serializable(package="prednet_keras")
class WeightedError(keras.layers.Layer):
    """Collapses PredNet errors (batch, time, layers) to (batch, 1):
    `sum_t time_weights[t] * sum_l layer_weights[l] * errors[:, t, l]`.

    It computes in float32 whatever the global dtype policy (unless given
    another `dtype`): its output is the training loss, and under a mixed
    policy it would otherwise be rounded to 8 significant bits.

    Args:
        layer_weights: one weight per PredNet layer.
        time_weights: one weight per time step.
    """

    def __init__(self, layer_weights, time_weights, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        # Tuples of Python floats: Keras would wrap lists in TrackedList, which
        # torch.compile cannot convert to a tensor.
        self.layer_weights = tuple(float(w) for w in layer_weights)
        self.time_weights = tuple(float(w) for w in time_weights)

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"WeightedError expects (batch, time, layers), got {input_shape}.")
        _, steps, layers = input_shape
        if layers is not None and layers != len(self.layer_weights):
            raise ValueError(f"{len(self.layer_weights)} layer weights for {layers} layers.")
        if steps is not None and steps != len(self.time_weights):
            raise ValueError(f"{len(self.time_weights)} time weights for {steps} time steps.")

    def call(self, errors):
        layer_weights = _constant_vector(self.layer_weights, errors.dtype, errors)
        time_weights = _constant_vector(self.time_weights, errors.dtype, errors)
        per_step = ops.sum(errors * layer_weights, axis=-1)  # (batch, time)
        return ops.sum(per_step * time_weights, axis=-1, keepdims=True)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], 1)

    def get_config(self):
        config = super().get_config()
        config.update(layer_weights=list(self.layer_weights), time_weights=list(self.time_weights))
        return config


def _constant_vector(values, dtype, like):
    """A 1-D tensor of Python floats, built from scalars (for an op with the tensor `like`).

    Not ops.convert_to_tensor(list): Keras' torch backend converts a list
    through NumPy, which torch.compile cannot trace (a graph break at every
    step). The values are the same: each float rounded once to `dtype`.
    Eager torch makes it once (device_constants: each `full` is a copy to the GPU otherwise).
    """
    return cached(("vector", values, dtype), like,
                  lambda: ops.stack([ops.full((), value, dtype=dtype) for value in values]))


def build_training_model(
    nt=10,
    frame_shape=(128, 160, 3),
    layer_loss_weights="L_0",
    time_loss_weights=None,
    prednet=None,
    name="prednet_training",
    **prednet_kwargs,
):
    """The training model of the KITTI recipe.

    Input: sequences (batch, nt, H, W, C) (channels_last; give `frame_shape` in
    the layer's data format). Output: the weighted error, (batch, 1); train it
    with `loss="mean_absolute_error"` against zeros, as the original did.

    Args:
        nt: sequence length.
        frame_shape: (H, W, C) of one frame.
        layer_loss_weights: "L_0", "L_all" or one number per layer.
        time_loss_weights: one number per step; default 0 for t=0, 1/(nt-1) after.
        prednet: an existing PredNet layer to wrap (its weights are shared);
            otherwise one is made from `prednet_kwargs` (default: the KITTI model).
        **prednet_kwargs: PredNet arguments; output_mode is forced to "error"
            and return_sequences to True.
    """
    if prednet is None:
        kwargs = kitti_prednet_kwargs() if not prednet_kwargs else dict(prednet_kwargs)
        kwargs.update(output_mode="error", return_sequences=True)
        prednet = PredNet(**kwargs)
    elif prednet.output_mode != "error" or not prednet.return_sequences:
        raise ValueError("The training model needs a PredNet with output_mode='error' and return_sequences=True.")
    inputs = keras.Input(shape=(nt,) + tuple(frame_shape), name="frames")
    errors = prednet(inputs)
    weighted = WeightedError(
        layer_loss_weights_for(layer_loss_weights, prednet.nb_layers),
        time_loss_weights_for(nt, time_loss_weights),
        name="weighted_error",
    )(errors)
    return keras.Model(inputs, weighted, name=name)


def find_prednet(model):
    """The PredNet layer of a model (or the layer itself); errors if there is not exactly one."""
    if isinstance(model, PredNet):
        return model
    found = [layer for layer in _walk_layers(model) if isinstance(layer, PredNet)]
    if len(found) != 1:
        raise ValueError(
            f"Expected exactly one PredNet layer in {getattr(model, 'name', model)!r}, found {len(found)}."
        )
    return found[0]


def _walk_layers(model):
    for layer in getattr(model, "layers", []):
        yield layer
        if not isinstance(layer, PredNet):
            yield from _walk_layers(layer)


def build_prediction_model(source, nt=None, output_mode="prediction", extrap_start_time=None, frame_shape=None,
                           dtype=None):
    """A model that runs a trained PredNet in another output mode (default: frame predictions).

    As in kitti_evaluate.py: a new PredNet with the same configuration and
    weights, `return_sequences=True`, over `nt` steps.

    Args:
        source: a trained model holding one PredNet, or the layer itself.
        nt: sequence length (default: the source model's).
        output_mode: any PredNet output mode.
        extrap_start_time: feed predictions back from this step on (None: off).
        frame_shape: (H, W, C) in the layer's data format; default the source's.
        dtype: the new layer's dtype policy (e.g. "float32", "mixed_bfloat16");
            default the source layer's. The weights are float32 under both.
    """
    layer = find_prednet(source)
    if not layer.built:
        raise ValueError("The PredNet layer has no weights yet (it was never built or trained).")
    config = layer.get_config()
    config.update(
        output_mode=output_mode,
        extrap_start_time=extrap_start_time,
        return_sequences=True,
        return_state=False,
        stateful=False,
    )
    config.pop("name", None)
    if dtype is not None:
        config["dtype"] = dtype
    new_layer = PredNet(**config)
    source_shape = _source_input_shape(source)
    if frame_shape is None:
        if source_shape is None:
            raise ValueError("Give frame_shape: it cannot be read from the source.")
        frame_shape = source_shape[2:]
    if nt is None:
        nt = source_shape[1] if source_shape is not None else None
        if nt is None:
            raise ValueError("Give nt: it cannot be read from the source.")
    inputs = keras.Input(shape=(nt,) + tuple(frame_shape), name="frames")
    outputs = new_layer(inputs)
    new_layer.set_weights(layer.get_weights())
    return keras.Model(inputs, outputs, name=f"prednet_{output_mode.lower()}")


def _source_input_shape(source):
    if isinstance(source, keras.Model) and source.inputs:
        return tuple(source.inputs[0].shape)
    layer = find_prednet(source)
    cell = layer.cell
    if cell.frame_shape is None:
        return None
    height, width = cell.frame_shape
    channels = cell.stack_sizes[0]
    frame = (channels, height, width) if layer.data_format == "channels_first" else (height, width, channels)
    return (None, None) + frame


def count_parameters(layer_or_model):
    """Number of scalar weights (trainable and not)."""
    return int(sum(np.prod(w.shape) for w in layer_or_model.weights))


# -- the per-update loss a run records ---------------------------------------


class LastBatchMetric(keras.metrics.Metric):
    """The loss of the last batch alone (Keras' "loss" log is the running mean of the epoch): what
    history.csv records as a step's or an update's loss, for every model a run trains.

    Args:
        loss: a loss function (y_true, y_pred) whose mean is recorded; None: `elementwise` of
            (y_pred - y_true), averaged (a subclass says which).
        name: the metric's name (the key of the logs the recorders read).
    """

    elementwise = None

    def __init__(self, name="batch_loss", loss=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self._loss = loss
        self.value = self.add_variable(shape=(), initializer="zeros", name="value")

    def batch_value(self, y_true, y_pred):
        if self._loss is not None:
            return ops.mean(ops.convert_to_tensor(self._loss(y_true, y_pred)))
        y_pred = ops.convert_to_tensor(y_pred)
        y_true = ops.cast(y_true, y_pred.dtype)
        return ops.mean(self.elementwise(y_pred - y_true))

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.value.assign(ops.cast(self.batch_value(y_true, y_pred), self.value.dtype))

    def result(self):
        return ops.convert_to_tensor(self.value)

    def reset_state(self):
        # Zeros made on the device: assign(0.0) would copy a Python number to it (train_on_batch resets every step).
        self.value.assign(ops.zeros(self.value.shape, dtype=self.value.dtype))


# The registered names are what saved models and checkpoints hold: they stay.
@keras.saving.register_keras_serializable(package="prednet_keras")
class LastBatchLoss(LastBatchMetric):
    """Lotter's training model's: it is trained with MAE against zeros, so mean(|y_pred - y_true|)."""

    elementwise = staticmethod(ops.abs)

    def __init__(self, name="batch_loss", **kwargs):
        super().__init__(name=name, **kwargs)


@keras.saving.register_keras_serializable(package="prednet_keras")
class LastBatchMSE(LastBatchMetric):
    """The MNIST autoencoder's: the per-pixel MSE of the last image."""

    elementwise = staticmethod(ops.square)

    def __init__(self, name="image_mse", **kwargs):
        super().__init__(name=name, **kwargs)
