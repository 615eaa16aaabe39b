"""Reading (and writing) the Chainer PredNet model files of the study's authors.

Their `main.py` saves `serializers.save_npz(path, L.Classifier(prednet))`: an
ordinary NumPy `.npz` holding float32 arrays under

    predictor/ConvA{l}/W, b                 l >= 1, W (out, in, kh, kw)
    predictor/ConvP{l}/W, b
    predictor/ConvLSTM{l}/x_{i,f,c,o}{k}/W  k=0: the errors e_l, k=1: the upsampled r_{l+1}
    predictor/ConvLSTM{l}/h_{i,f,c,o}/W, b
    predictor/ConvLSTM{l}/c_{i,f,o}/W       per-pixel peepholes, (1, C_l, H_l, W_l)

Chainer convolutions are cross-correlations like Keras', so a kernel only
changes layout: (out, in, kh, kw) -> (kh, kw, in, out). Peepholes go from
(1, C, H, W) to (H, W, C). The file fixes the architecture: the channels come
from the ConvP kernels and the frame size from the layer-0 peepholes, so
`import_chainer_model` needs nothing else. Arrays are matched by name, never by
position, and nothing is assigned unless every array fits. Before numpy reads
the file, a member holding Python objects (a pickle, which loading would run)
or unpacking past PREDNET_MAX_UNPACKED is refused.
"""

import os
import re
import zipfile

import numpy as np

from prednet_keras.layers.chainer import find_chainer_prednet
from prednet_keras.formats.keras2 import describe_name_mismatch

__all__ = [
    "ChainerFormatError",
    "chainer_config_from_arrays",
    "find_chainer_prednet",
    "import_chainer_model",
    "load_chainer_weights",
    "read_chainer_arrays",
    "save_chainer_npz",
]

PREFIX = "predictor/"
_CONV_P = re.compile(r"^ConvP(\d+)/W$")


class ChainerFormatError(ValueError):
    """A file is not (or not a readable) Chainer PredNet model file."""


def read_chainer_arrays(path):
    """Returns {"ConvA1/W": array, ...} from a Chainer `.npz` model file.

    Keys are given without the "predictor/" prefix of a classifier-wrapped save;
    files saved from the bare PredNet (no prefix) are read as well.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(2, "Model file not found", path)
    if os.path.isdir(path):
        raise ChainerFormatError(f"{path} is a folder, not a Chainer .npz model file.")
    if not zipfile.is_zipfile(path):
        raise ChainerFormatError(
            f"{path} is not a NumPy .npz archive (what chainer.serializers.save_npz writes); "
            "truncated, or another format?"
        )
    _check_members(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            raw = {key: archive[key] for key in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise ChainerFormatError(f"{path} could not be read as an .npz archive ({error}).") from None
    prefixed = any(key.startswith(PREFIX) for key in raw)
    arrays = {}
    for key, value in raw.items():
        key = key.lstrip("/")
        if prefixed:
            if not key.startswith(PREFIX):
                continue
            key = key[len(PREFIX) :]
        arrays[key] = value
    if not any(_CONV_P.match(key) for key in arrays):
        if any(key.endswith(("/m", "/v")) for key in arrays):
            raise ChainerFormatError(
                f"{path} looks like a Chainer optimizer state (keys ending in /m and /v), not a model: "
                "import the matching .model file."
            )
        shown = ", ".join(sorted(raw)[:6]) or "nothing"
        raise ChainerFormatError(
            f"{path} does not hold a Chainer PredNet: no predictor/ConvP{{l}}/W arrays (found {shown}"
            f"{' ...' if len(raw) > 6 else ''})."
        )
    return arrays


def _check_members(path):
    """Refuses an .npz before numpy reads it: a member that is no numeric .npy array (a
    pickled object, which unpickling would run) or that would unpack to more than
    PREDNET_MAX_UNPACKED allows (a zip bomb). Reads the zip directory and each
    member's header only."""
    from prednet_keras.data.errors import DataError
    from prednet_keras.data.guards import ZIP_ERRORS, check_npy_payload, check_unpacking, read_npy_header

    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            for info in members:
                key = info.filename[: -len(".npy")] if info.filename.endswith(".npy") else info.filename
                where = f"{path}: array {key!r}"
                check_unpacking(where, info.file_size, info.compress_size)
                with archive.open(info) as member:
                    shape, dtype, header = read_npy_header(member, where)
                if dtype is not None and dtype.hasobject:
                    raise ChainerFormatError(
                        f"{where} holds Python objects (dtype {dtype}, stored as a pickle); refused: a Chainer model "
                        "file holds numeric arrays only, and unpickling runs code from the file."
                    )
                check_npy_payload(where, shape, dtype, header, info.file_size)
            # numpy unpacks every member into memory: together they must fit the limit too.
            check_unpacking(
                f"{path}: its {len(members)} arrays together",
                sum(info.file_size for info in members),
                sum(info.compress_size for info in members),
            )
    except DataError as error:
        raise ChainerFormatError(str(error)) from None
    except (OSError, NotImplementedError, *ZIP_ERRORS) as error:
        raise ChainerFormatError(f"{path} could not be read as an .npz archive ({error}).") from None


def chainer_config_from_arrays(arrays, source="the file"):
    """The ChainerPredNet arguments a set of Chainer arrays describes.

    Returns:
        dict with stack_sizes, R_stack_sizes, filter_size and frame_size (H, W).
    """
    layers = sorted(int(m.group(1)) for m in map(_CONV_P.match, arrays) if m)
    if layers != list(range(len(layers))):
        raise ChainerFormatError(f"{source} has ConvP arrays for layers {layers}; expected 0..{len(layers) - 1}.")
    stack, r_stack = [], []
    for l in layers:
        kernel = arrays[f"ConvP{l}/W"]
        if kernel.ndim != 4:
            raise ChainerFormatError(f"{source}: ConvP{l}/W has shape {kernel.shape}, expected (out, in, kh, kw).")
        stack.append(int(kernel.shape[0]))
        r_stack.append(int(kernel.shape[1]))
    filter_size = int(arrays["ConvP0/W"].shape[2])
    peephole = arrays.get("ConvLSTM0/c_i/W")
    if peephole is None or peephole.ndim != 4:
        raise ChainerFormatError(
            f"{source} has no ConvLSTM0/c_i/W peephole of shape (1, C, H, W), which gives the frame size."
        )
    frame_size = (int(peephole.shape[2]), int(peephole.shape[3]))
    return {"stack_sizes": stack, "R_stack_sizes": r_stack, "filter_size": filter_size, "frame_size": frame_size}


def _chainer_layout(layer):
    """{chainer key: (keras variable, to_keras(array), to_chainer(array))} for a built ChainerPredNet."""

    def conv_to_keras(w):
        return np.transpose(w, (2, 3, 1, 0))

    def conv_to_chainer(k):
        return np.transpose(k, (3, 2, 0, 1))

    def peephole_to_keras(w):
        return np.transpose(w[0], (1, 2, 0))

    def peephole_to_chainer(k):
        return np.transpose(k, (2, 0, 1))[np.newaxis]

    def same(x):
        return x

    layout = {}
    for sub in layer.cell.weight_layers:
        name = sub.name
        match = re.match(r"^(ConvLSTM\d+)_(.+)$", name)
        link = f"{match.group(1)}/{match.group(2)}" if match else name
        if hasattr(sub, "use_bias"):  # a Conv2D
            layout[f"{link}/W"] = (sub.kernel, conv_to_keras, conv_to_chainer)
            if sub.use_bias:
                layout[f"{link}/b"] = (sub.bias, same, same)
        else:  # a Peephole
            layout[f"{link}/W"] = (sub.kernel, peephole_to_keras, peephole_to_chainer)
    return layout


def load_chainer_weights(target, path):
    """Loads an authors' Chainer model file into a built ChainerPredNet (or a model holding one).

    Args:
        target: a built `ChainerPredNet`, or a model with exactly one.
        path: a `serializers.save_npz` file of `L.Classifier(PredNet)` (or of the bare PredNet).

    Returns:
        The layer that received the weights.

    Raises:
        ChainerFormatError: the file is unreadable or holds no Chainer PredNet.
        ValueError: the file's frame size, channels or arrays do not fit the
            layer; nothing is assigned in that case.
    """
    layer = find_chainer_prednet(target)
    if not layer.built:
        raise ValueError("Build the ChainerPredNet (call it on frames) before loading weights into it.")
    arrays = read_chainer_arrays(path)
    file_config = chainer_config_from_arrays(arrays, source=os.fspath(path))
    cell = layer.cell
    if tuple(file_config["frame_size"]) != tuple(cell.frame_size):
        (fh, fw), (h, w) = file_config["frame_size"], cell.frame_size
        raise ValueError(
            f"{path} was trained on {fh}x{fw} frames (H x W; its peephole weights are per pixel) but this "
            f"layer is for {h}x{w} frames. Use frames of {fh}x{fw} (e.g. --size {fh}x{fw})."
        )
    for name, mine in (("stack_sizes", cell.stack_sizes), ("R_stack_sizes", cell.R_stack_sizes)):
        if list(file_config[name]) != list(mine):
            raise ValueError(
                f"{path} has {name} {tuple(file_config[name])} but this layer has {tuple(mine)}: "
                "the channels must match."
            )
    if file_config["filter_size"] != cell.filter_size:
        raise ValueError(f"{path} has {file_config['filter_size']}x{file_config['filter_size']} kernels but "
                         f"this layer {cell.filter_size}x{cell.filter_size}.")
    layout = _chainer_layout(layer)
    mismatch = describe_name_mismatch(layout, arrays)
    if mismatch:
        raise ValueError(f"{path} does not match this ChainerPredNet: {mismatch}.")
    converted = {}
    problems = []
    for key, (variable, to_keras, _) in layout.items():
        value = np.asarray(arrays[key])
        expected = tuple(int(s) for s in variable.shape)
        try:
            value = to_keras(value)
        except (ValueError, IndexError):
            pass
        if tuple(value.shape) != expected:
            problems.append(f"{key}: file {tuple(arrays[key].shape)} does not give the layer's {expected}")
        converted[key] = value
    if problems:
        raise ValueError(f"{path} has arrays of other shapes than this ChainerPredNet: " + "; ".join(problems))
    for key, (variable, _, _) in layout.items():
        variable.assign(converted[key].astype(variable.dtype))
    return layer


def save_chainer_npz(target, path):
    """Writes a ChainerPredNet's weights in the Chainer layout (`serializers.load_npz`
    into `L.Classifier(net.PredNet(W, H, channels))` reads it).

    Args:
        target: a built ChainerPredNet, or a model holding one.
        path: the .npz file to write.
    """
    from keras import ops

    layer = find_chainer_prednet(target)
    arrays = {}
    for key, (variable, _, to_chainer) in _chainer_layout(layer).items():
        arrays[PREFIX + key] = to_chainer(np.asarray(ops.convert_to_numpy(variable))).astype(np.float32)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def import_chainer_model(path, size=None, nt=None, output_mode="prediction"):
    """Builds a Keras 3 model from an authors' Chainer model file.

    Args:
        path: the `.model` / `.npz` file (e.g. fpsi_500000_20v.model).
        size: (H, W) the frames will have; the file's frame size must be the
            same (checked, with a clear error). None: the file's.
        nt: sequence length of the model's input; None: any length.
        output_mode: ChainerPredNet output mode ("prediction" = next frame).

    Returns:
        A `keras.Model`: frames (batch, nt, H, W, C) -> a ChainerPredNet with
        return_sequences=True holding the file's weights.
    """
    import keras

    from prednet_keras.layers.chainer import ChainerPredNet

    arrays = read_chainer_arrays(path)
    config = chainer_config_from_arrays(arrays, source=os.fspath(path))
    if size is not None and tuple(int(s) for s in size) != tuple(config["frame_size"]):
        (fh, fw), (h, w) = config["frame_size"], size
        raise ValueError(
            f"{path} was trained on {fh}x{fw} frames (H x W) and its peephole weights are per pixel, so it "
            f"cannot run on {h}x{w} frames. Use --size {fh}x{fw} (and frames of that size)."
        )
    layer = ChainerPredNet(**config, output_mode=output_mode, return_sequences=True, name="chainer_prednet")
    height, width = config["frame_size"]
    inputs = keras.Input(shape=(nt, height, width, config["stack_sizes"][0]), name="frames")
    model = keras.Model(inputs, layer(inputs), name="chainer_prednet")
    load_chainer_weights(layer, path)
    return model
