"""What PredNet's constructor arguments mean, as the original layer read them: activations
(Keras 2's hard sigmoid), output modes, filter sizes, the data format and its Keras 1 spelling.

The model itself, in the order of the paper's equations, is layers/lotter.py.
"""

import re

import keras
from keras import ops

from prednet_keras.layers.device_constants import scalar

__all__ = ["get_activation", "keras2_hard_sigmoid", "parse_output_mode"]

_PACKAGE = "prednet_keras"
_LAYER_OUTPUT_RE = re.compile(r"^(R|E|A|Ahat)(\d+)$")
_DEFAULT_OUTPUT_MODES = ("prediction", "error", "all")


@keras.saving.register_keras_serializable(package=_PACKAGE)
def keras2_hard_sigmoid(x):
    """The hard sigmoid of Keras 1 and 2: `clip(0.2 * x + 0.5, 0, 1)`.

    Keras 3's `keras.activations.hard_sigmoid` is `relu6(x + 3) / 6`, a
    different slope; PredNet's gates were trained with this one.
    """
    y = 0.2 * x + 0.5
    # The bounds as Keras makes them, made once on torch (device_constants: not a copy to the GPU per call).
    return ops.clip(y, scalar(0.0, y), scalar(1.0, y))


def get_activation(identifier):
    """Resolves an activation the way the original layer did.

    The string "hard_sigmoid" means Keras 2's hard sigmoid here, so that
    configurations written for the original (where it is the default gate
    activation) keep their meaning.
    """
    if identifier in ("hard_sigmoid", "keras2_hard_sigmoid"):
        return keras2_hard_sigmoid
    return keras.activations.get(identifier)


def parse_output_mode(output_mode, nb_layers):
    """Returns (layer type, layer number) for `R{l}`/`E{l}`/`A{l}`/`Ahat{l}`,
    (None, None) for the whole-model modes; raises on anything else."""
    if output_mode in _DEFAULT_OUTPUT_MODES:
        return None, None
    match = _LAYER_OUTPUT_RE.match(str(output_mode))
    if match and int(match.group(2)) < nb_layers:
        return match.group(1), int(match.group(2))
    layer_modes = [f"{kind}{n}" for n in range(nb_layers) for kind in ("R", "E", "A", "Ahat")]
    raise ValueError(
        f"Unknown output_mode {output_mode!r}. Expected one of "
        f"{list(_DEFAULT_OUTPUT_MODES) + layer_modes}."
    )


def _as_int_list(name, values):
    try:
        return [int(v) for v in values]
    except TypeError:
        raise ValueError(f"`{name}` must be a list of integers, got {values!r}.") from None


def _resolve_data_format(data_format, dim_ordering):
    if dim_ordering is not None:
        legacy = {"tf": "channels_last", "th": "channels_first"}
        if dim_ordering not in legacy:
            raise ValueError(f"dim_ordering must be 'tf' or 'th', got {dim_ordering!r}.")
        if data_format is not None and data_format != legacy[dim_ordering]:
            raise ValueError(
                f"data_format={data_format!r} contradicts dim_ordering={dim_ordering!r}."
            )
        data_format = legacy[dim_ordering]
    if data_format is None:
        data_format = keras.config.image_data_format()
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(
            f"data_format must be 'channels_last' or 'channels_first', got {data_format!r}."
        )
    return data_format


def _kernel_size(value):
    if isinstance(value, int):
        return (value, value)
    try:
        size = tuple(int(v) for v in value)
    except TypeError:
        raise ValueError(f"A filter size must be an int or a pair of ints, got {value!r}.") from None
    if len(size) != 2:
        raise ValueError(f"A filter size must be an int or a pair of ints, got {value!r}.")
    return size


def _serialize_activation(activation):
    if isinstance(activation, str):
        return activation
    return keras.saving.serialize_keras_object(activation)
