"""Reading the authors' released Keras 2 files: model JSON and HDF5 weights.

The released pair is `prednet_kitti_model.json` (Keras 2 `model.to_json()`)
and `prednet_kitti_weights.hdf5` (a full-model save; weights under
`model_weights/pred_net_1/pred_net_1/layer_{type}_{l}/kernel:0|bias:0`).
Weights-only saves hold the same layer groups at the file root. Arrays are
matched by their `layer_{type}_{l}/{kernel|bias}` names, never by position.

Only the PredNet layer's arguments and the input shape are taken from the
JSON, and nothing in it is ever run: a JSON holding code (a Lambda layer's
marshalled bytecode, a module to import) is refused rather than imported
without it, and so is one too large or too deeply nested to be a model's.
"""

import json
import os
import re

import numpy as np

__all__ = [
    "LegacyFormatError",
    "load_legacy_weights",
    "read_legacy_arrays",
    "import_legacy_model",
    "prednet_config_from_json",
]

_WEIGHT_NAME = re.compile(r"(?:^|/)layer_(a|ahat|c|f|i|o)_(\d+)/(kernel|bias)(?::\d+)?$")
# Keras 2 keys of a recurrent layer's config that Keras 3's PredNet does not take.
_DROPPED_KEYS = {
    "batch_input_shape",
    "input_dim",
    "input_length",
    "implementation",
    "trainable",
    "name",
    "dtype",
    "weights",
    "activity_regularizer",
    "consume_less",
}
# A PredNet's model JSON is a few KB.
MAX_JSON_BYTES = 8 << 20
# Keras 2 model JSONs nest under 10 levels; deeper is no model of theirs, and
# json.loads fails with RecursionError a little past 1,000.
MAX_JSON_DEPTH = 100


class LegacyFormatError(ValueError):
    """A file is not (or not a readable) Keras 2 PredNet file."""


def read_legacy_arrays(path):
    """Returns {"layer_{type}_{l}/{kernel|bias}": array} from a Keras 2 HDF5 file.

    Accepts full-model files (`model_weights/` group) and weights-only files.
    """
    import h5py

    if not os.path.exists(path):
        raise FileNotFoundError(f"Weights file not found: {path}")
    try:
        handle = h5py.File(path, "r")
    except OSError as error:
        raise LegacyFormatError(f"{path} is not a readable HDF5 file ({error}).") from None
    with handle:
        backend = _attr_text(handle.attrs.get("backend"))
        if backend == "theano":
            raise LegacyFormatError(
                f"{path} was saved with the Theano backend, whose convolution kernels are flipped; "
                "use the authors' TensorFlow-backend weights (tensorflow_weights/)."
            )
        root = handle["model_weights"] if "model_weights" in handle else handle
        arrays = {}
        owners = set()

        def visit(name, obj):
            if not isinstance(obj, h5py.Dataset):
                return
            match = _WEIGHT_NAME.search(name)
            if match is None:
                return
            key = f"layer_{match.group(1)}_{match.group(2)}/{match.group(3)}"
            owner = name[: match.start()].split("/")[0]
            owners.add(owner)
            if key in arrays:
                raise LegacyFormatError(
                    f"{path} holds more than one array named {key} (layers {sorted(owners)}); "
                    "it seems to contain several PredNet layers."
                )
            _check_dataset(obj, path)
            arrays[key] = np.asarray(obj[()])

        root.visititems(visit)
    if not arrays:
        raise LegacyFormatError(
            f"{path} does not hold a PredNet: no arrays named layer_{{a,ahat,c,f,i,o}}_{{l}}/kernel|bias."
        )
    return arrays


def _check_dataset(dataset, path):
    """Refuses a weights dataset before it is read: one whose shape claims more than the file
    stores or than PREDNET_MAX_UNPACKED allows (HDF5 reads unstored space as zeros, so a
    2 KB file can "hold" terabytes), or that holds no floating-point numbers."""
    from prednet_keras.data.errors import DataError
    from prednet_keras.data.guards import check_h5_storage, check_unpacking, declared_bytes

    where = f"{path}: dataset {dataset.name!r}"
    if dataset.dtype.kind != "f":
        raise LegacyFormatError(f"{where} holds {dataset.dtype}, not floating-point weights; refused.")
    try:
        check_h5_storage(dataset, path)
        check_unpacking(where, declared_bytes(dataset.shape, dataset.dtype), dataset.id.get_storage_size())
    except DataError as error:
        raise LegacyFormatError(str(error)) from None


def _attr_text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def describe_name_mismatch(expected, found):
    """'missing in the file: ...; not in the layer: ...' for two sets of array names, or '' if equal."""
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    details = []
    if missing:
        details.append(f"missing in the file: {', '.join(missing)}")
    if extra:
        details.append(f"not in the layer: {', '.join(extra)}")
    return "; ".join(details)


def load_legacy_weights(target, path):
    """Loads the authors' Keras 2 PredNet weights into a PredNet layer or a model holding one.

    Args:
        target: a built `PredNet` layer, or a model with exactly one.
        path: a Keras 2 HDF5 file (full model or weights only), e.g.
            `prednet_kitti_weights.hdf5`.

    Returns:
        The PredNet layer that received the weights.

    Raises:
        LegacyFormatError: the file is unreadable or holds no PredNet.
        ValueError: the file's arrays do not match the layer (missing, extra,
            or a different shape); nothing is assigned in that case.
    """
    from prednet_keras.models.lotter import find_prednet

    layer = find_prednet(target)
    if not layer.built:
        raise ValueError("Build the PredNet layer (call it on an input) before loading weights into it.")
    arrays = read_legacy_arrays(path)
    expected = {}
    for conv in layer.cell.conv_layers:
        expected[f"{conv.name}/kernel"] = conv.kernel
        expected[f"{conv.name}/bias"] = conv.bias
    mismatch = describe_name_mismatch(expected, arrays)
    if mismatch:
        raise ValueError(f"{path} does not match this PredNet ({layer.nb_layers} layers): {mismatch}.")
    mismatched = [
        f"{key}: file {arrays[key].shape} vs layer {tuple(variable.shape)}"
        for key, variable in expected.items()
        if tuple(arrays[key].shape) != tuple(variable.shape)
    ]
    if mismatched:
        raise ValueError(f"{path} has arrays of other shapes than this PredNet: " + "; ".join(mismatched))
    for key, variable in expected.items():
        variable.assign(arrays[key].astype(variable.dtype))
    return layer


def prednet_config_from_json(text, source="model JSON"):
    """Reads a Keras 2 model JSON and returns (PredNet kwargs, input shape without batch).

    Legacy keys are translated (`dim_ordering`) or dropped (Keras 2 recurrent
    keys Keras 3 no longer has).
    """
    try:
        document = json.loads(text)
    except RecursionError:
        raise LegacyFormatError(
            f"{source} is nested too deeply (more than {MAX_JSON_DEPTH} levels); refused."
        ) from None
    except json.JSONDecodeError as error:
        raise LegacyFormatError(f"{source} is not valid JSON ({error}).") from None
    _refuse_code(document, source)
    layers = _model_layers(document)
    prednets = [layer for layer in layers if isinstance(layer, dict) and layer.get("class_name") == "PredNet"]
    if len(prednets) != 1:
        raise LegacyFormatError(f"{source} holds {len(prednets)} PredNet layers; expected exactly one.")
    config = prednets[0].get("config", {})
    if not isinstance(config, dict):
        raise LegacyFormatError(f"{source}: the PredNet's config is not an object.")
    config = dict(config)
    input_shape = None
    for layer in layers:
        layer_config = layer.get("config") if isinstance(layer, dict) else None
        if not isinstance(layer_config, dict):
            continue
        shape = layer_config.get("batch_input_shape") or layer_config.get("batch_shape")
        if shape is not None:
            input_shape = tuple(shape[1:])
            break
    for key in _DROPPED_KEYS:
        config.pop(key, None)
    for key, value in config.items():
        # PredNet takes names, numbers and lists of them; an object here would be
        # handed to Keras' deserializer (activations), which can name code.
        if not _plain(value):
            raise LegacyFormatError(
                f"{source}: PredNet argument {key!r} is an object ({json.dumps(value)[:80]}), where PredNet takes "
                "a name, a number or a list of them; refused."
            )
    return config, input_shape


def _refuse_code(document, source):
    """Refuses a model JSON that holds code or is nested deeper than any model's.

    Keras 2 stored a Lambda layer's function as marshalled bytecode (or as a
    module and a name to import); loading it runs it. Walked without
    recursion, which the nesting being checked could exhaust.
    """
    stack = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise LegacyFormatError(f"{source} is nested too deeply (more than {MAX_JSON_DEPTH} levels); refused.")
        if isinstance(node, list):
            stack.extend((value, depth + 1) for value in node)
            continue
        if not isinstance(node, dict):
            continue
        class_name = node.get("class_name")
        inner = node.get("config")
        holds_code = class_name in ("Lambda", "__lambda__") or "function_type" in node or (
            isinstance(inner, dict) and "function_type" in inner
        )
        if holds_code:
            name = inner.get("name") if isinstance(inner, dict) else None
            what = f"layer {name!r} ({class_name})" if name else "a serialized lambda"
            raise LegacyFormatError(
                f"{source}: {what} holds Python code (marshalled bytecode or a function "
                "to import) that loading it would run; refused: prednet-import takes the PredNet and its input "
                "shape only and never runs code from a file."
            )
        module = node.get("module")
        allowed = isinstance(module, str) and module.split(".", 1)[0] in ("keras", "prednet_keras")
        if module is not None and not allowed:
            raise LegacyFormatError(
                f"{source}: {class_name or 'an object'!r} names the module {module!r}; refused: importing it "
                "could run its code."
            )
        stack.extend((value, depth + 1) for value in node.values())


def _plain(value):
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, str))


def _model_layers(document):
    if not isinstance(document, dict):
        raise LegacyFormatError("The model JSON must be an object with 'class_name' and 'config'.")
    if document.get("class_name") == "PredNet":
        return [document]
    config = document.get("config")
    if isinstance(config, dict) and "layers" in config:
        return config["layers"]
    if isinstance(config, list):  # Keras 1 Sequential
        return config
    raise LegacyFormatError("The model JSON has no list of layers (config.layers).")


def import_legacy_model(model_json, weights_h5, output_mode="prediction", nt=None, extrap_start_time=None):
    """Builds a Keras 3 model from the authors' Keras 2 JSON + HDF5 pair.

    Args:
        model_json: path of the Keras 2 model JSON (e.g. prednet_kitti_model.json).
        weights_h5: path of the weights (e.g. prednet_kitti_weights.hdf5).
        output_mode: PredNet output mode of the new model; None keeps the JSON's.
        nt: sequence length; None keeps the JSON's input length.
        extrap_start_time: feed predictions back from this step on (None: off).

    Returns:
        A `keras.Model` (input `(nt, H, W, C)`, a PredNet with return_sequences=True)
        holding the released weights.
    """
    import keras

    from prednet_keras.layers.lotter import PredNet

    if not os.path.exists(model_json):
        raise FileNotFoundError(2, "Model JSON not found", model_json)
    if not os.path.exists(weights_h5):
        raise FileNotFoundError(2, "Weights file not found", weights_h5)
    size = os.path.getsize(model_json)
    if size > MAX_JSON_BYTES:
        raise LegacyFormatError(
            f"{model_json} is {size:,} bytes, more than the {MAX_JSON_BYTES:,} a model JSON may take "
            "(a PredNet's is a few KB); refused before reading it."
        )
    with open(model_json, "rb") as handle:
        text = handle.read()
    try:
        text = text.decode("utf-8")
    except UnicodeDecodeError as error:
        raise LegacyFormatError(f"{model_json} is not UTF-8 text ({error}).") from None
    config, input_shape = prednet_config_from_json(text, source=model_json)
    if input_shape is None or len(input_shape) != 4:
        raise LegacyFormatError(f"{model_json} gives no 4-d input shape (time, rows, cols, channels).")
    if output_mode is not None:
        config["output_mode"] = output_mode
    if extrap_start_time is not None:
        config["extrap_start_time"] = extrap_start_time
    config.update(return_sequences=True, return_state=False, stateful=False)
    try:
        layer = PredNet(**config)
    except TypeError as error:
        raise LegacyFormatError(f"{model_json}: the PredNet config has an argument Keras 3 cannot take ({error}).") from None
    steps = nt if nt is not None else input_shape[0]
    inputs = keras.Input(shape=(steps,) + tuple(input_shape[1:]), name="frames")
    model = keras.Model(inputs, layer(inputs), name="prednet")
    load_legacy_weights(layer, weights_h5)
    return model
