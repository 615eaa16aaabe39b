"""Identical starting points for every arm of a comparison: initial weights and
data order generated with numpy from a seed, independently of backend and device.

Keras draws initial weights with the backend's own random generator, so the same
seed gives different weights on torch CPU and torch GPU (and across backends).
Here every weight is drawn with numpy instead, saved once to HDF5 and loaded into
each arm; checksums prove that two arms started alike.

Generation rule: the i-th variable of `model.weights` (trainable and non-trainable
weights, in Keras' order; random-seed state excluded) is drawn from its own stream
`numpy.random.default_rng(SeedSequence([seed, i]))`, following the distribution of
the initializer its layer declares for it (`<name>_initializer`, e.g.
`kernel_initializer`). Supported: the VarianceScaling family (glorot/he/lecun,
uniform/normal/truncated normal, fans computed as in Keras), RandomUniform,
RandomNormal, TruncatedNormal, Orthogonal, Zeros, Ones, Constant, and the LSTM
`unit_forget_bias` rule. Anything else (Identity, custom callables) raises,
rather than silently falling back to the backend's generator.

Importing this module imports numpy and h5py only; Keras is imported by the
functions that take a model.
"""

import hashlib
import json
import math
import os
import re
import sys
import warnings
from collections.abc import Mapping

import h5py
import numpy as np

__all__ = [
    "FORMAT",
    "compute_fans",
    "current_weights",
    "data_order",
    "initial_weights",
    "load_initial_weights",
    "nudge_by_ulp",
    "order_checksum",
    "read_initial_weights",
    "save_initial_weights",
    "weight_keys",
    "weights_checksum",
    "write_initial_weights",
]

FORMAT = "prednet-keras initial weights"
FORMAT_VERSION = 1
# Keras' stddev correction for a normal truncated at two standard deviations.
_TRUNCATED_STD = 0.87962566103423978
# An auto-generated name suffix ("conv2d_3"): differs between processes that build
# different numbers of layers before, never between identical architectures.
_AUTO_SUFFIX = re.compile(r"_\d+(?=/|$)")
# The SeedSequence spawn key of the stream that picks the weight `nudge_by_ulp` changes.
_NUDGE_STREAM = 1


# ------------------------------------------------------------------------- helpers
def _to_numpy(variable):
    from keras import ops

    # The backend tensor, not the Keras Variable: what the backend really holds.
    # TensorFlow and torch tensors trip numpy 2's copy-keyword DeprecationWarning
    # inside Keras; the values are unaffected.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*copy keyword.*")
        return np.array(ops.convert_to_numpy(variable.value), copy=True)


def _dtype(variable):
    return np.dtype(str(getattr(variable, "dtype", "float32")).replace("torch.", ""))


def _model_weights(model):
    weights = list(model.weights)
    if not weights:
        raise ValueError(
            f"{getattr(model, 'name', model)!r} has no weights: build it (call it on an input "
            "or call build(input_shape)) before generating or loading initial weights."
        )
    return weights


def current_weights(model):
    """The values the backend holds now for every weight of `model`, as numpy copies.

    Args:
        model: a built Keras layer or model.

    Returns:
        dict of weight key (see `weight_keys`) -> numpy array.
    """
    return {w.path: _to_numpy(w) for w in _model_weights(model)}


def weight_keys(model):
    """The keys under which a model's weights are generated, saved and checksummed:
    the variable paths of `model.weights`, in order.

    Args:
        model: a built Keras layer or model.
    """
    return [w.path for w in _model_weights(model)]


def _owners(model):
    """id(variable) -> the layer that created it."""
    owners = {}
    layers = model._flatten_layers(include_self=True, recursive=True)
    for layer in layers:
        for variable in getattr(layer, "_trainable_variables", []) + getattr(layer, "_non_trainable_variables", []):
            owners[id(variable)] = layer
    return owners


def _initializer_of(layer, variable):
    name = variable.name.split("/")[-1]
    candidates = [f"{name}_initializer"]
    if name == "recurrent_kernel":
        candidates.append("recurrent_initializer")
    for attribute in candidates:
        if hasattr(layer, attribute):
            return getattr(layer, attribute)
    return None


def compute_fans(shape):
    """(fan_in, fan_out) exactly as Keras computes them.

    Dense kernels (in, out); conv kernels (*kernel_size, in, out) multiply both by
    the receptive field size.

    Args:
        shape: the variable's shape.
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def _truncated_normal(rng, mean, stddev, shape):
    """Normal(mean, stddev) redrawn outside two standard deviations, like Keras'."""
    values = rng.standard_normal(shape)
    outside = np.abs(values) > 2.0
    while outside.any():
        values[outside] = rng.standard_normal(int(outside.sum()))
        outside = np.abs(values) > 2.0
    return mean + stddev * values


def _orthogonal(rng, gain, shape):
    """Keras' Orthogonal: QR of a normal matrix, signs fixed by diag(R).

    QR goes through LAPACK, whose last bits may differ between numpy builds; the
    saved file, not a regeneration elsewhere, is the shared starting point.
    """
    if len(shape) < 2:
        raise ValueError(f"Orthogonal needs a shape of rank >= 2, got {shape}.")
    rows, cols = math.prod(shape[:-1]), shape[-1]
    q, r = np.linalg.qr(rng.standard_normal((max(rows, cols), min(rows, cols))))
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return gain * q.reshape(shape)


def _sample(initializer, shape, rng, where):
    """Draws `shape` from `initializer`'s distribution with numpy (float64)."""
    import keras

    init = keras.initializers.get(initializer) if isinstance(initializer, (str, dict)) else initializer
    cls = keras.initializers
    if isinstance(init, cls.VarianceScaling):
        fan_in, fan_out = compute_fans(shape)
        scale = float(init.scale)
        if init.mode == "fan_in":
            scale /= max(1.0, fan_in)
        elif init.mode == "fan_out":
            scale /= max(1.0, fan_out)
        else:
            scale /= max(1.0, (fan_in + fan_out) / 2.0)
        if init.distribution == "truncated_normal":
            return _truncated_normal(rng, 0.0, math.sqrt(scale) / _TRUNCATED_STD, shape)
        if init.distribution == "untruncated_normal":
            return rng.normal(0.0, math.sqrt(scale), shape)
        limit = math.sqrt(3.0 * scale)
        return rng.uniform(-limit, limit, shape)
    if isinstance(init, cls.RandomUniform):
        return rng.uniform(float(init.minval), float(init.maxval), shape)
    if isinstance(init, cls.TruncatedNormal):
        return _truncated_normal(rng, float(init.mean), float(init.stddev), shape)
    if isinstance(init, cls.RandomNormal):
        return rng.normal(float(init.mean), float(init.stddev), shape)
    if isinstance(init, cls.Orthogonal):
        return _orthogonal(rng, float(init.gain), shape)
    if isinstance(init, cls.Zeros):
        return np.zeros(shape)
    if isinstance(init, cls.Ones):
        return np.ones(shape)
    if isinstance(init, cls.Constant):
        return np.full(shape, np.asarray(init.value, dtype=np.float64))
    raise ValueError(
        f"{where}: initializer {type(init).__name__} has no numpy equivalent here "
        "(supported: VarianceScaling family such as glorot_uniform/he_normal, RandomUniform, "
        "RandomNormal, TruncatedNormal, Orthogonal, Zeros, Ones, Constant). Use a supported initializer, "
        "or set this weight yourself after loading."
    )


# ---------------------------------------------------------------------- generation
def initial_weights(model, seed):
    """Initial values for every weight of `model`, drawn with numpy from `seed`.

    The result depends only on the architecture and the seed, never on the
    backend, device or Keras' own random state.

    Args:
        model: a built Keras layer or model.
        seed: a non-negative integer.

    Returns:
        dict of weight key (see `weight_keys`) -> numpy array of the variable's
        shape and dtype, in `model.weights` order.

    Raises:
        ValueError: unbuilt model, or a weight whose initializer has no numpy equivalent.
    """
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"`seed` must be >= 0, got {seed}.")
    owners = _owners(model)
    values = {}
    for index, variable in enumerate(_model_weights(model)):
        key = variable.path
        shape = tuple(int(s) for s in variable.shape)
        layer = owners.get(id(variable))
        where = f"weight {key!r} ({type(layer).__name__ if layer is not None else 'unknown layer'})"
        initializer = None if layer is None else _initializer_of(layer, variable)
        if initializer is None:
            raise ValueError(
                f"{where}: cannot tell how this weight is initialised (no "
                f"`{variable.name}_initializer` on its layer)."
            )
        rng = np.random.default_rng(np.random.SeedSequence([seed, index]))
        if getattr(layer, "unit_forget_bias", False) and variable.name == "bias" and len(shape) == 1:
            # Keras' LSTM rule: [init(units), ones(units), init(2 * units)].
            units = shape[0] // 4
            value = np.concatenate([
                _sample(initializer, (units,), rng, where),
                np.ones(units),
                _sample(initializer, (2 * units,), rng, where),
            ])
        else:
            value = _sample(initializer, shape, rng, where)
        values[key] = np.asarray(value).astype(_dtype(variable))
    return values


def data_order(n, seed, epoch=None):
    """The order in which to visit n samples, from numpy only.

    Args:
        n: number of samples.
        seed: a non-negative integer.
        epoch: None for one fixed order; an integer for a different order per
            epoch that is still fixed by (seed, epoch).

    Returns:
        int64 array, a permutation of range(n).
    """
    seed = int(seed)
    if seed < 0 or int(n) < 0:
        raise ValueError(f"`n` and `seed` must be >= 0, got n={n}, seed={seed}.")
    rng = np.random.default_rng(seed if epoch is None else [seed, int(epoch)])
    return rng.permutation(int(n)).astype(np.int64)


# ----------------------------------------------------------------------- checksums
def weights_checksum(weights):
    """sha256 (hex) over names, dtypes, shapes and bytes of a set of weights.

    The same values under the same names give the same checksum in every backend
    and on every device (bytes are taken little-endian, C order).

    Args:
        weights: a built Keras model/layer (its weights under `weight_keys`) or a
            mapping of name -> array.
    """
    if isinstance(weights, Mapping):
        arrays = {str(k): np.asarray(v) for k, v in weights.items()}
    else:
        arrays = current_weights(weights)
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        array = array.astype(array.dtype.newbyteorder("<"), copy=False)
        digest.update(name.encode("utf-8") + b"\0")
        digest.update(f"{array.dtype.str}{array.shape}".encode("ascii") + b"\0")
        digest.update(array.tobytes())
    return digest.hexdigest()


def order_checksum(order):
    """sha256 (hex) of a data order (as little-endian int64).

    Args:
        order: sequence of sample indices.
    """
    return hashlib.sha256(np.asarray(order, dtype="<i8").tobytes()).hexdigest()


# ------------------------------------------------------------------------------ I/O
def _write_h5(path, weights, seed, checksum):
    import keras

    from prednet_keras.files.diskwrite import require_room, temp_path_for

    require_room(path, sum(np.asarray(value).nbytes + 1024 for value in weights.values()))
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    # The package's one temporary name beside the target (same file system, so os.replace is atomic).
    tmp = os.fspath(temp_path_for(os.path.abspath(path)))
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs["format"] = FORMAT
            f.attrs["format_version"] = FORMAT_VERSION
            f.attrs["seed"] = int(seed)
            f.attrs["checksum"] = checksum
            f.attrs["keras_version"] = keras.__version__
            f.attrs["keys"] = json.dumps(list(weights))
            group = f.create_group("weights")
            for index, (key, value) in enumerate(weights.items()):
                dataset = group.create_dataset(str(index), data=value)
                dataset.attrs["key"] = key
        os.replace(tmp, path)  # atomic: readers see the old file or the whole new one
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def read_initial_weights(path):
    """Reads a file written by `save_initial_weights`.

    Args:
        path: the HDF5 file.

    Returns:
        (weights: dict key -> array in saved order, info: dict with seed,
        checksum, keras_version, format_version).

    Raises:
        FileNotFoundError, ValueError (not such a file, or its checksum does not match).
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"No initial-weights file at {path}.")
    try:
        f = h5py.File(path, "r")
    except OSError as error:
        raise ValueError(f"{path} is not an HDF5 file: {error}") from None
    with f:
        if f.attrs.get("format") != FORMAT:
            raise ValueError(f"{path} is not a {FORMAT} file (format attribute {f.attrs.get('format')!r}).")
        version = int(f.attrs["format_version"])
        if version > FORMAT_VERSION:
            raise ValueError(f"{path} has format version {version}; this code reads up to {FORMAT_VERSION}.")
        keys = json.loads(f.attrs["keys"])
        group = f["weights"]
        weights = {}
        for index, key in enumerate(keys):
            dataset = group[str(index)]
            stored = dataset.attrs["key"]
            if stored != key:
                raise ValueError(f"{path} is inconsistent: entry {index} is {stored!r}, expected {key!r}.")
            weights[key] = dataset[()]
        info = {
            "seed": int(f.attrs["seed"]),
            "checksum": str(f.attrs["checksum"]),
            "keras_version": str(f.attrs.get("keras_version", "")),
            "format_version": version,
        }
    actual = weights_checksum(weights)
    if actual != info["checksum"]:
        raise ValueError(f"{path} is corrupt: checksum {actual} does not match the stored {info['checksum']}.")
    return weights, info


def save_initial_weights(model, path, seed, overwrite=False):
    """Generates the initial weights of `model` from `seed` and writes them to `path`.

    The write is atomic. An existing file is never replaced silently: if it holds
    exactly the weights this call would write, it is kept and reused; otherwise a
    FileExistsError is raised unless `overwrite=True`.

    Args:
        model: a built Keras layer or model.
        path: the HDF5 file to write.
        seed: a non-negative integer.
        overwrite: replace an existing file with different content.

    Returns:
        the weights checksum (see `weights_checksum`).
    """
    weights = initial_weights(model, seed)
    checksum = weights_checksum(weights)
    if os.path.exists(path) and not overwrite:
        try:
            _, info = read_initial_weights(path)
            existing = info["checksum"]
        except (ValueError, OSError, KeyError) as error:
            existing = f"unreadable ({error})"
        if existing == checksum:
            return checksum
        raise FileExistsError(
            f"{path} already exists with other content (checksum {existing}, this model and seed "
            f"{seed} give {checksum}). Choose another path or pass overwrite=True."
        )
    _write_h5(path, weights, seed, checksum)
    return checksum


def write_initial_weights(path, weights, seed):
    """Writes a mapping of name -> array in this module's format (atomically).

    For starting points made outside a model, e.g. `nudge_by_ulp` of a seed's
    weights. Returns the weights checksum.
    """
    weights = {str(k): np.asarray(v) for k, v in weights.items()}
    checksum = weights_checksum(weights)
    _write_h5(path, weights, seed, checksum)
    return checksum


def nudge_by_ulp(weights, seed):
    """One floating-point weight moved one unit in the last place towards +inf.

    The noise floor of Summers & Dinneen (2021): runs started from weights that
    differ in one bit of one number show how far training drifts from the
    smallest change a starting point can have, the baseline a hardware effect
    has to be told apart from. The weight is drawn uniformly among every
    floating-point number of every array (arrays in the sorted order of their
    keys, each in C order) by a numpy generator of `seed`, so every arm and
    every machine nudges the same weight for a seed.

    Args:
        weights: a mapping of name -> array (e.g. `read_initial_weights`' weights).
        seed: the seed the weights were made from (a non-negative integer).

    Returns:
        (nudged, change): the weights, a copy of the one array that changed; and
        what changed: key, index (flat, C order), dtype, before and after (as
        floats), before_bits and after_bits (hex of the bits).

    Raises:
        ValueError: no floating-point weight to nudge.
    """
    arrays = {key: np.asarray(value) for key, value in weights.items()}
    floating = [key for key in sorted(arrays) if np.issubdtype(arrays[key].dtype, np.floating) and arrays[key].size]
    if not floating:
        raise ValueError("No floating-point weight to nudge by one ulp.")
    sizes = [arrays[key].size for key in floating]
    # Its own stream: default_rng(seed) is the data order's, and SeedSequence([seed, i]) weight i's.
    rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(_NUDGE_STREAM,)))
    position = int(rng.integers(sum(sizes)))
    which = int(np.searchsorted(np.cumsum(sizes), position, side="right"))
    key, index = floating[which], position - sum(sizes[:which])
    array = np.array(arrays[key], order="C")
    flat = array.reshape(-1)
    before = flat[index]
    flat[index] = np.nextafter(before, np.array(np.inf, dtype=array.dtype))
    change = {"key": key, "index": index, "dtype": array.dtype.name, "before": float(before),
              "after": float(flat[index]), "before_bits": _bits(before), "after_bits": _bits(flat[index])}
    return {name: array if name == key else value for name, value in arrays.items()}, change


def _bits(value):
    """The bits of a numpy scalar as hex, most significant first: 0x3dcccccd for float32 0.1."""
    data = value.tobytes()
    return f"0x{int.from_bytes(data, sys.byteorder):0{2 * len(data)}x}"


def _match(model_keys, file_keys, path):
    """Pairs file entries with model weights: by key, or by position when the two
    architectures differ only in auto-generated name suffixes."""
    if set(model_keys) == set(file_keys) and len(model_keys) == len(file_keys):
        return {key: key for key in model_keys}, "path"
    if len(model_keys) == len(file_keys) and all(
        _AUTO_SUFFIX.sub("", a) == _AUTO_SUFFIX.sub("", b) for a, b in zip(model_keys, file_keys)
    ):
        return dict(zip(model_keys, file_keys)), "order"
    missing = [k for k in model_keys if k not in file_keys]
    unexpected = [k for k in file_keys if k not in model_keys]
    raise ValueError(
        f"{path}: the initial-weights file does not fit this model ({len(model_keys)} weights, file has "
        f"{len(file_keys)}). Missing in file: {missing[:5]}{' ...' if len(missing) > 5 else ''}; "
        f"not in model: {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}."
    )


def load_initial_weights(model, path):
    """Loads a file written by `save_initial_weights` into `model`, and proves it.

    Entries are matched by weight key; when the keys differ only by Keras'
    auto-generated suffixes (a model built after other layers in the same
    process), by position. Shapes and dtypes must match exactly. After assigning,
    every weight is read back from the backend and compared bit for bit.

    Args:
        model: a built Keras layer or model with the same architecture.
        path: the HDF5 file.

    Returns:
        dict with checksum (of the weights now in the model, under the file's
        keys: equal to the file's checksum), seed, matched_by ("path" or
        "order"), count.

    Raises:
        FileNotFoundError; ValueError for a file that does not fit the model.
    """
    weights, info = read_initial_weights(path)
    variables = _model_weights(model)
    by_key = {v.path: v for v in variables}
    pairs, matched_by = _match([v.path for v in variables], list(weights), path)
    problems = []
    for model_key, file_key in pairs.items():
        variable, value = by_key[model_key], weights[file_key]
        shape = tuple(int(s) for s in variable.shape)
        if shape != value.shape:
            problems.append(f"  {model_key}: model {shape}, file {value.shape}")
        elif _dtype(variable) != value.dtype:
            problems.append(f"  {model_key}: model dtype {_dtype(variable)}, file {value.dtype}")
    if problems:
        raise ValueError(f"{path} does not fit this model:\n" + "\n".join(problems))
    for model_key, file_key in pairs.items():
        by_key[model_key].assign(weights[file_key])
    loaded = {file_key: _to_numpy(by_key[model_key]) for model_key, file_key in pairs.items()}
    checksum = weights_checksum(loaded)
    if checksum != info["checksum"]:
        different = [k for k in loaded if not np.array_equal(loaded[k], weights[k])]
        raise ValueError(f"Loading {path} did not take: the backend holds other values for {different[:5]}.")
    return {"checksum": checksum, "seed": info["seed"], "matched_by": matched_by, "count": len(pairs)}
