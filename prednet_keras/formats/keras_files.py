"""Writing and reading model files safely: no truncated files, clear errors for bad ones.

A .keras file is a zip archive: config.json (the classes of the model and
their arguments), metadata.json and model.weights.h5. Keras rebuilds the model
from config.json, which makes it a way in for code: a Lambda layer's Python
bytecode; a class in a module whose import runs code (Keras before 3.9
imported any module a config named, CVE-2025-1550, and this package accepts
Keras 3.8); a Keras function that turns safe mode off or loads another file
(closed in later Keras releases, CVE-2025-8747 and CVE-2025-9906). The
archive itself can be a bomb (members that unpack to gigabytes) or name
paths outside any folder. `load_model` reads the zip directory and
config.json itself and refuses all of these before Keras sees the file; Keras
then loads it with safe_mode=True as a second line of defence.
"""

import contextlib
import json
import os
import re
import stat
import zipfile
import zlib

import keras

from prednet_keras.files.diskwrite import temp_path_for

__all__ = ["ModelFileError", "load_model", "save_model_atomically"]

CONFIG = "config.json"
# A PredNet's config.json is a few KB; 8 MiB leaves room for any model of
# ours while keeping json.loads from being handed gigabytes.
MAX_CONFIG_BYTES = 8 << 20
# Keras configs nest about 10 levels (the shipped model's: 10);
# past this a walk through it, Keras' included, is at risk of RecursionError.
MAX_CONFIG_DEPTH = 100
# Modules a config may name. Matched whole or up to a dot, so that
# keras_payload or prednet_keras_payload are no more accepted than os.
ALLOWED_MODULES = ("keras", "prednet_keras", "builtins")
# Keras modules whose functions are no part of a model: they load or fetch
# files or turn safe mode off (recent Keras refuses them itself too).
NON_MODELING_MODULES = ("backend", "config", "models", "preprocessing", "saving", "utils")
# Lambda layers run Python code; prednet-keras models have none (models/).
CODE_CLASSES = ("Lambda", "__lambda__")


class ModelFileError(ValueError):
    """A model file is missing, not a .keras file, corrupted, or refused as unsafe."""


def save_model_atomically(model, path):
    """Saves `model` to `path` (.keras) through a temporary file in the same folder,
    so an interruption never leaves a truncated file and an old file survives
    until the new one is complete."""
    path = os.fspath(path)
    if not path.endswith(".keras"):
        raise ValueError(f"A model file must end in .keras, got {path}.")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    temporary = os.fspath(temp_path_for(os.path.abspath(path)))
    try:
        model.save(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def load_model(path, compile=True):
    """`keras.saving.load_model` in safe mode, with errors that name the file and the problem.

    The archive and its config.json are checked first (see the module's
    docstring); a file that fails a check is refused with ModelFileError
    before Keras reads it.
    """
    from prednet_keras._framework_import import register_serializables

    register_serializables()  # a .keras file names our layers; Keras must know them

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(2, "Model file not found", path)
    if os.path.isdir(path):
        raise ModelFileError(f"{path} is a folder, not a .keras model file.")
    if not zipfile.is_zipfile(path):
        raise ModelFileError(f"{path} is not a Keras 3 .keras file (not a zip archive; truncated or corrupted?).")
    if not path.endswith(".keras"):
        # Keras picks its loader by the name: a zip named .h5 would reach its
        # HDF5 loader, which ignored safe_mode in older Keras (CVE-2025-9905).
        raise ModelFileError(f"{path} is a zip archive but not named .keras; only Keras 3 .keras files are loaded.")
    _check_archive(path)
    try:
        with _safe_mode():
            model = keras.saving.load_model(path, compile=compile, safe_mode=True)
    except (zipfile.BadZipFile, KeyError, OSError, EOFError) as error:
        raise ModelFileError(f"{path} could not be read as a Keras model ({error}).") from None
    except (TypeError, ValueError) as error:
        raise ModelFileError(f"{path} could not be loaded: {_cause(error)}") from None
    _check_finite_weights(model, path)
    return model


def _check_archive(path):
    """Refuses a .keras file whose zip directory or config.json is unsafe to hand to Keras.

    Reads the zip directory and config.json only (after checking its size).
    The sizes in the directory bind: Python's zipfile stops a member at its
    declared size and fails its checksum if more would follow.

    Raises:
        ModelFileError: naming the file, the member or place in config.json, and the rule.
    """
    from prednet_keras.data.errors import DataError
    from prednet_keras.data.guards import check_unpacking, format_bytes

    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            seen = set()
            for info in members:
                name = info.filename
                if _outside(name):
                    raise ModelFileError(
                        f"{path}: member {name!r} is an absolute path or climbs out with '..'; refused "
                        "(a .keras file holds config.json, metadata.json and model.weights.h5)."
                    )
                if stat.S_ISLNK(info.external_attr >> 16):
                    raise ModelFileError(f"{path}: member {name!r} is a symbolic link; refused.")
                if name in seen:
                    raise ModelFileError(
                        f"{path}: member {name!r} appears twice; refused (readers disagree on which one counts)."
                    )
                seen.add(name)
                check_unpacking(f"{path}: member {name!r}", info.file_size, info.compress_size)
            # Many members, each under the limit, can still fill memory or disk together.
            check_unpacking(
                f"{path}: its {len(members)} members together",
                sum(info.file_size for info in members),
                sum(info.compress_size for info in members),
            )
            if CONFIG not in seen:
                raise ModelFileError(f"{path} has no {CONFIG}: not a Keras 3 .keras file.")
            size = archive.getinfo(CONFIG).file_size
            if size > MAX_CONFIG_BYTES:
                raise ModelFileError(
                    f"{path}: {CONFIG} unpacks to {format_bytes(size)}, more than the "
                    f"{format_bytes(MAX_CONFIG_BYTES)} a model's configuration may take (a PredNet's is a few KB); "
                    "refused before reading it."
                )
            text = archive.read(CONFIG)
    except DataError as error:
        raise ModelFileError(str(error)) from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as error:
        raise ModelFileError(f"{path} could not be read as a Keras model ({error}).") from None
    _check_config(path, text)


def _outside(name):
    """Whether a member name would be written outside the folder it is unpacked into."""
    return (
        name.startswith(("/", "\\"))
        or "\\" in name
        or re.match(r"^[A-Za-z]:", name) is not None
        or ".." in name.split("/")
        or "\0" in name
    )


def _check_config(path, text):
    try:
        config = json.loads(text)
    except RecursionError:
        raise ModelFileError(
            f"{path}: {CONFIG} is nested too deeply (more than {MAX_CONFIG_DEPTH} levels); refused."
        ) from None
    except ValueError as error:  # invalid JSON or not UTF-8
        raise ModelFileError(f"{path}: {CONFIG} is not valid JSON ({error}); refused.") from None
    if not isinstance(config, dict) or "class_name" not in config:
        raise ModelFileError(
            f"{path}: {CONFIG} is not a Keras model configuration (no class_name at its top); refused."
        )
    # Iterative: a recursive walk would itself fail on the nesting it checks.
    stack = [(config, "", 1)]
    while stack:
        node, place, depth = stack.pop()
        if depth > MAX_CONFIG_DEPTH:
            shown = place if len(place) <= 80 else place[:80] + "..."
            raise ModelFileError(
                f"{path}: {CONFIG} is nested too deeply (more than {MAX_CONFIG_DEPTH} levels, at {shown}); refused."
            )
        if isinstance(node, dict):
            _check_object(path, node, place or "the top")
            stack.extend((value, f"{place}.{key}" if place else str(key), depth + 1) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((value, f"{place}[{index}]", depth + 1) for index, value in enumerate(node))


def _check_object(path, node, place):
    """Refuses one object of a config that would run or import code."""
    class_name = node.get("class_name")
    if not isinstance(class_name, str):
        return  # a plain dict of arguments names no class
    if class_name in CODE_CLASSES:
        inner = node.get("config")
        name = inner.get("name") if isinstance(inner, dict) else None
        kind = "Python bytecode (a serialized lambda)" if class_name == "__lambda__" else f"a Lambda layer {name!r}"
        raise ModelFileError(
            f"{path}: {CONFIG} holds {kind} at {place}, code that loading would run; refused: model files are "
            "loaded in Keras' safe mode (safe_mode=True), and prednet-keras models have no Lambda layers."
        )
    module = node.get("module")
    if module is None:
        return
    if not isinstance(module, str) or module.split(".", 1)[0] not in ALLOWED_MODULES or module.startswith("builtins."):
        raise ModelFileError(
            f"{path}: {CONFIG} names {class_name!r} from module {module!r} at {place}; refused: a model file may "
            "name classes and functions of keras and prednet_keras only (importing another module can run its code)."
        )
    if class_name == "function":
        parts = module.split(".")
        public = parts[2:] if parts[:2] == ["keras", "src"] else parts[1:]
        if public and public[0] in NON_MODELING_MODULES:
            raise ModelFileError(
                f"{path}: {CONFIG} names the function {module}.{node.get('config')} at {place}, which is no part "
                "of a model (it reads or writes files or changes Keras' settings); refused."
            )


@contextlib.contextmanager
def _safe_mode():
    """Safe mode for the load, whatever the process set before.

    keras.config.enable_unsafe_deserialization(), called anywhere in the
    process, sets a global that wins over load_model's safe_mode argument.
    """
    try:
        from keras.src.saving.serialization_lib import SafeModeScope
    except ImportError:  # moved in another Keras; the checks above still hold
        yield
        return
    with SafeModeScope(True):
        yield


def _check_finite_weights(model, path):
    """A NaN or infinite weight (a diverged run saved, or corrupted bytes) makes every output untrustworthy,
    yet clipping layers can still turn it into plausible-looking frames: refuse the file."""
    import numpy as np

    for weight in model.weights:
        values = keras.ops.convert_to_numpy(weight)
        bad = ~np.isfinite(values)
        if bad.any():
            raise ModelFileError(
                f"{path}: weight {weight.path} holds {int(bad.sum()):,} NaN or infinite values of {values.size:,}; "
                "the model is broken (a diverged run or a corrupted file) and cannot be used."
            )


def _cause(error):
    """The error's message on one line without the object configs Keras embeds in it (thousands of
    characters of JSON that hide the cause); the cause itself, Keras' "Exception encountered", is kept whole."""
    text = " ".join(str(error).split())
    head, _, cause = text.partition(" Exception encountered: ")
    head = head.split(" config={", 1)[0].split(" Full object config:", 1)[0].rstrip(" .")
    cause = cause.split(" Full object config:", 1)[0].strip()
    return f"{head}. Cause: {cause}" if cause else head
