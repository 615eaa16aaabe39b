"""Malicious and hostile model files: refused, their code never run, nothing on disk changed (issue 24).

Each test builds a real hostile file of a few KB: a .keras archive with
Python bytecode, a module to import or a Keras function that is no part of a
model in its config.json, members named outside the archive, members or a
config.json that unpack to many MiB; a Keras 2 model JSON with a marshalled
Lambda, or weights claiming more than they store; a Chainer .npz carrying a
pickle or a bomb. A payload, if it ran, would create a marker file and set an
environment variable; a control first shows that it does run when the file is
loaded unsafely. Each test checks that the load is refused with one line
naming the file and the rule (the function's exception, and the command's
exit status 1 without a traceback), that no payload ran or nothing was
unpacked, and that every file under the test's folder is byte for byte what
it was.

The run-folder tests (a swapped checkpoint or initial_weights.h5) train a
tiny run in a subprocess first and take minutes: they are marked slow.
"""

import codecs
import json
import marshal
import os
import runpy
import stat
import subprocess
import sys
import tempfile
import tracemalloc
import warnings
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

import keras
from prednet_keras.cli.eval import main as eval_main
from prednet_keras.cli.imports import main as import_main
from prednet_keras.formats import keras2
from prednet_keras.formats.chainer import ChainerFormatError, import_chainer_model
from prednet_keras.formats.keras2 import LegacyFormatError, import_legacy_model
from prednet_keras.formats.keras_files import ModelFileError, load_model, save_model_atomically

from tests.layers.numpy_prednet import random_weights
from tests.legacy_files import write_model_json, write_weights_h5
from tests.reliability.faults import npy_header, snapshot, write_npz_member
from tests.study_models import numpy_chainer

MARKER = "PREDNET_TEST_PAYLOAD_MARKER"
RAN = "PREDNET_TEST_PAYLOAD_RAN"
# What every payload does if it runs: a marker file, and an environment variable.
PAYLOAD = f"import os; open(os.environ[{MARKER!r}], 'w').close(); os.environ[{RAN!r}] = '1'"


def payload_function():
    """A Python function whose body is PAYLOAD, as a lambda a Lambda layer would hold."""
    return eval(f"lambda x: (exec({PAYLOAD!r}), x)[1]")  # noqa: S307 (the payload under test)


class Pickled:
    """Unpickling it runs PAYLOAD (what np.load(allow_pickle=True) would do)."""

    def __reduce__(self):
        return exec, (PAYLOAD,)


@pytest.fixture()
def marker(tmp_path, monkeypatch):
    """The file the payload would create; the payload's variable is unset."""
    path = tmp_path / "payload-ran"
    monkeypatch.setenv(MARKER, str(path))
    monkeypatch.delenv(RAN, raising=False)
    return path


def never_ran(marker):
    assert not marker.exists(), "the payload ran: its marker file exists"
    assert RAN not in os.environ, "the payload ran: it set its environment variable"


def payload_is_live(run, folder, monkeypatch):
    """Runs `run()` (an unsafe load) with the marker in `folder`; whether the payload ran.

    The control that the injected payload is code that really runs."""
    real = os.environ[MARKER]
    control = folder / "control-marker"
    monkeypatch.setenv(MARKER, str(control))
    try:
        run()
    finally:
        monkeypatch.setenv(MARKER, real)
    ran = control.exists() and os.environ.pop(RAN, None) == "1"
    control.unlink(missing_ok=True)
    return ran


def refused_by_command(command, args, folder):
    """Runs a console command that must refuse its input; returns its one line without `Error: `.

    Checks exit status 1 from Click's own handling (an uncaught exception, which
    a user would see as a traceback, also gives status 1 under CliRunner), one
    `Error: ` line, and every file under `folder` unchanged, none added.
    """
    before = snapshot(folder)
    result = CliRunner().invoke(command, [str(a) for a in args])
    assert result.exc_info[0] is SystemExit, f"uncaught {result.exc_info[0].__name__}: {result.exception}"
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert snapshot(folder) == before
    return lines[0][len("Error: ") :]


def refused_as_model(path, folder):
    """keras_files.load_model and `prednet-eval PATH` both refuse `path`; returns the message."""
    before = snapshot(folder)
    with pytest.raises(ModelFileError) as caught:
        load_model(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and "\n" not in message, message
    assert snapshot(folder) == before
    assert refused_by_command(eval_main, [path], folder) == message
    return message


def rewrite(source, target, config=None, drop=(), add=None):
    """A copy of the .keras archive `source` at `target`, with config.json replaced by `config`
    (dict, str or bytes) when given, the members in `drop` left out, then `add(archive)` called."""
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w") as copy:
        for info in original.infolist():
            if info.filename in drop:
                continue
            data = original.read(info.filename)
            if info.filename == "config.json" and config is not None:
                data = json.dumps(config).encode() if isinstance(config, dict) else config
                data = data.encode() if isinstance(data, str) else data
                info = zipfile.ZipInfo("config.json", info.date_time)
                info.compress_type = zipfile.ZIP_DEFLATED
            copy.writestr(info, data)
        if add is not None:
            add(copy)
    return target


def config_of(path):
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("config.json"))


def write_zeros(archive, name, count):
    """Adds member `name`: `count` zero bytes, deflated a MiB at a time (a few KB on disk, no memory)."""
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    with archive.open(info, "w", force_zip64=True) as member:
        block = bytes(1 << 20)
        while count:
            member.write(block[: min(count, len(block))])
            count -= min(count, len(block))


def find_layer(config, class_name):
    return next(layer for layer in config["config"]["layers"] if layer["class_name"] == class_name)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A real, clean .keras file of a 2-layer PredNet training model (about 60 KB)."""
    import prednet_keras

    model = prednet_keras.build_training_model(nt=3, frame_shape=(8, 8, 3), stack_sizes=(3, 4), R_stack_sizes=(3, 4),
                                               A_filt_sizes=(3,), Ahat_filt_sizes=(3, 3), R_filt_sizes=(3, 3))
    path = tmp_path_factory.mktemp("tiny") / "tiny.keras"
    save_model_atomically(model, path)
    return path


def test_clean_files_still_load(tiny_model):
    """The control: the checks refuse nothing a Keras save of ours writes."""
    from prednet_keras import pretrained

    assert load_model(tiny_model).count_params() > 0
    assert load_model(pretrained.path() / "model.keras", compile=False).count_params() > 0


# Python bytecode: a Lambda layer ------------------------------------------------------------------


@pytest.fixture(scope="module")
def lambda_file(tmp_path_factory):
    """A .keras file Keras wrote for a model with a Lambda layer, its bytecode then swapped for PAYLOAD's.
    (Built with a harmless lambda: a functional model calls its Lambda while it is built.)"""
    from keras.src.utils.python_utils import func_dump

    folder = tmp_path_factory.mktemp("lambda")
    inputs = keras.Input((2,))
    keras.Model(inputs, keras.layers.Lambda(lambda x: x * 2, name="double")(inputs)).save(folder / "benign.keras")
    config = config_of(folder / "benign.keras")
    function = find_layer(config, "Lambda")["config"]["function"]
    assert function["class_name"] == "__lambda__"
    function["config"]["code"] = func_dump(payload_function())[0]
    return rewrite(folder / "benign.keras", folder / "lambda.keras", config=config)


@pytest.mark.parametrize("process", ["safe", "after-enable-unsafe-deserialization"])
def test_lambda_bytecode_is_refused_unrun(process, lambda_file, marker, tmp_path, monkeypatch, request):
    from keras.src.backend.common import global_state
    from keras.src.saving.serialization_lib import in_safe_mode

    path = tmp_path / "lambda.keras"
    path.write_bytes(lambda_file.read_bytes())
    control = tmp_path.parent / f"{tmp_path.name}-control"
    control.mkdir()
    copy = control / "lambda.keras"
    copy.write_bytes(path.read_bytes())
    if process == "safe":
        assert payload_is_live(lambda: keras.saving.load_model(copy, safe_mode=False), control, monkeypatch)
    else:
        # Anything in the process calling this makes Keras ignore load_model's safe_mode=True.
        previous = in_safe_mode()
        request.addfinalizer(lambda: global_state.set_global_attribute("safe_mode_saving", previous))
        keras.config.enable_unsafe_deserialization()
        assert payload_is_live(lambda: keras.saving.load_model(copy, safe_mode=True), control, monkeypatch)
    mode = in_safe_mode()

    message = refused_as_model(path, tmp_path)
    assert message == (
        f"{path}: config.json holds a Lambda layer 'double' at config.layers[1], code that loading would run; "
        "refused: model files are loaded in Keras' safe mode (safe_mode=True), and prednet-keras models have no "
        "Lambda layers."
    )
    never_ran(marker)
    assert in_safe_mode() == mode


# A module that would run code on import -----------------------------------------------------------


@pytest.mark.parametrize(
    "module, class_name",
    [
        ("prednet_payload", "PredNet"),  # a module on the path, outside keras and prednet_keras
        ("keras_payload", "PredNet"),  # starts like keras
        ("prednet_keras_payload.layers", "PredNet"),  # starts like prednet_keras
        ("os", "system"),  # a function of the standard library, as an activation
    ],
)
def test_a_module_outside_keras_is_never_imported(module, class_name, tiny_model, marker, tmp_path, monkeypatch):
    package = module.split(".")[0]
    site = tmp_path / "site"
    site.mkdir()
    if package != "os":
        source = site / f"{package}.py"
        source.write_text(f"{PAYLOAD}\nclass PredNet:\n    pass\n")
        control = tmp_path.parent / f"{tmp_path.name}-control"
        control.mkdir()
        assert payload_is_live(lambda: runpy.run_path(str(source)), control, monkeypatch)
        if "." in module:  # a package: the payload in its __init__
            (site / package).mkdir()
            source.rename(site / package / "__init__.py")
            (site / package / "layers.py").write_text("")
        monkeypatch.syspath_prepend(str(site))
    config = config_of(tiny_model)
    prednet = find_layer(config, "PredNet")
    if package == "os":
        prednet["config"]["A_activation"] = {"module": "os", "class_name": "function", "config": "system",
                                             "registered_name": None}
        place = "config.layers[1].config.A_activation"
        named = "'function' from module 'os'"
    else:
        # Without registered_name, Keras finds a class by its module.
        prednet.update(module=module, class_name=class_name, registered_name=None)
        place = "config.layers[1]"
        named = f"{class_name!r} from module {module!r}"
    path = rewrite(tiny_model, tmp_path / "module.keras", config=config)

    message = refused_as_model(path, tmp_path)
    assert message == (
        f"{path}: config.json names {named} at {place}; refused: a model file may name classes and functions "
        "of keras and prednet_keras only (importing another module can run its code)."
    )
    never_ran(marker)
    assert package == "os" or package not in sys.modules


# A Keras function that is no part of a model ------------------------------------------------------


@pytest.mark.parametrize("function", ["keras.config.enable_unsafe_deserialization", "keras.utils.get_file",
                                      "keras.src.saving.saving_api.load_model"])
def test_a_keras_function_outside_modelling_is_refused(function, tiny_model, tmp_path):
    from keras.src.saving.serialization_lib import in_safe_mode

    module, name = function.rsplit(".", 1)
    config = config_of(tiny_model)
    find_layer(config, "PredNet")["config"]["error_activation"] = {
        "module": module, "class_name": "function", "config": name, "registered_name": None}
    path = rewrite(tiny_model, tmp_path / "function.keras", config=config)
    mode = in_safe_mode()

    message = refused_as_model(path, tmp_path)
    assert message == (
        f"{path}: config.json names the function {function} at config.layers[1].config.error_activation, which "
        "is no part of a model (it reads or writes files or changes Keras' settings); refused."
    )
    assert in_safe_mode() == mode


# Members outside the archive ----------------------------------------------------------------------


@pytest.mark.parametrize("member", ["climbing", "absolute", "backslashes", "symlink", "twice"])
def test_members_outside_the_archive_are_refused(member, tiny_model, tmp_path):
    escaped = f"escaped-{tmp_path.name}"
    outside = tmp_path / "outside"
    outside.mkdir()
    names = {
        "climbing": f"assets/../../{escaped}",
        "absolute": str(outside / escaped),
        "backslashes": f"assets\\..\\..\\{escaped}",
        "symlink": "assets/link",
        "twice": "config.json",
    }
    name = names[member]

    def add(archive):
        info = zipfile.ZipInfo(name)
        if member == "symlink":
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, str(outside / escaped))
        elif member == "twice":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # zipfile's "Duplicate name" warning
                archive.writestr(info, json.dumps(config_of(tiny_model)))
        else:
            archive.writestr(info, PAYLOAD)

    path = rewrite(tiny_model, tmp_path / "members.keras", add=add)

    message = refused_as_model(path, tmp_path)
    rule = {
        "symlink": "is a symbolic link; refused.",
        "twice": "appears twice; refused (readers disagree on which one counts).",
    }.get(member, "is an absolute path or climbs out with '..'; refused (a .keras file holds config.json, "
                  "metadata.json and model.weights.h5).")
    assert message == f"{path}: member {name!r} {rule}"
    for base in [Path("/"), Path(tempfile.gettempdir()), outside, *tmp_path.parents]:
        assert not (base / escaped).exists()


# A decompression bomb -----------------------------------------------------------------------------


@pytest.mark.parametrize("bomb", ["over-the-size-limit", "over-the-ratio-limit", "many-members"])
def test_a_bomb_is_refused_before_unpacking(bomb, tiny_model, tmp_path, monkeypatch):
    if bomb == "over-the-size-limit":
        monkeypatch.setenv("PREDNET_MAX_UNPACKED", "1M")
        path = rewrite(tiny_model, tmp_path / "bomb.keras", drop=("model.weights.h5",),
                       add=lambda archive: write_zeros(archive, "model.weights.h5", 16 << 20))
    elif bomb == "over-the-ratio-limit":  # default limits; Keras' own guard starts at 256 MiB
        path = rewrite(tiny_model, tmp_path / "bomb.keras", drop=("model.weights.h5",),
                       add=lambda archive: write_zeros(archive, "model.weights.h5", 80 << 20))
    else:  # each member under the limit, together over it (Keras unpacks assets/ to disk)
        monkeypatch.setenv("PREDNET_MAX_UNPACKED", "16M")

        def add(archive):
            for index in range(24):
                write_zeros(archive, f"assets/part-{index}", 1 << 20)

        path = rewrite(tiny_model, tmp_path / "bomb.keras", add=add)
    assert path.stat().st_size < 200_000

    tracemalloc.start()
    try:
        message = refused_as_model(path, tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # nothing unpacked
    if bomb == "over-the-size-limit":
        assert message == (
            f"{path}: member 'model.weights.h5': unpacks to 16.0 MiB, more than the 1.0 MiB allowed "
            "(PREDNET_MAX_UNPACKED); refused before unpacking"
        )
    elif bomb == "over-the-ratio-limit":
        assert message.startswith(f"{path}: member 'model.weights.h5': ")
        assert "unpack to 80.0 MiB" in message and "more than the 200 to 1 allowed" in message
        assert message.endswith("PREDNET_MAX_UNPACK_RATIO); refused before unpacking (a zip bomb?)")
    else:
        assert message.startswith(f"{path}: its 27 members together: unpacks to 24.")
        assert message.endswith("more than the 16.0 MiB allowed (PREDNET_MAX_UNPACKED); refused before unpacking")


# An enormous or deeply nested config.json ---------------------------------------------------------


@pytest.mark.parametrize("config", ["enormous", "nested-past-recursion", "nested-150", "not-an-object", "not-utf8"])
def test_an_enormous_or_deep_config_is_refused(config, tiny_model, tmp_path):
    original = config_of(tiny_model)
    if config == "enormous":  # valid JSON: the real config and 9 MiB of spaces, 9 KB deflated
        text = json.dumps(original) + " " * (9 << 20)
    elif config == "nested-past-recursion":  # json.loads raises RecursionError
        find_layer(original, "PredNet")["config"]["stack_sizes"] = "NESTED"
        text = json.dumps(original).replace('"NESTED"', "[" * 5000 + "]" * 5000)
    elif config == "nested-150":  # parses, but deeper than any model's
        nested = 3
        for _ in range(150):
            nested = [nested]
        find_layer(original, "PredNet")["config"]["stack_sizes"] = nested
        text = json.dumps(original)
    elif config == "not-an-object":
        text = json.dumps([original])
    else:
        text = json.dumps(original).encode().replace(b'"PredNet"', b'"Pred\xffNet"')
    path = rewrite(tiny_model, tmp_path / "config.keras", config=text)
    assert path.stat().st_size < 200_000

    message = refused_as_model(path, tmp_path)
    expected = {
        "enormous": f"{path}: config.json unpacks to 9.0 MiB, more than the 8.0 MiB a model's configuration may "
                    "take (a PredNet's is a few KB); refused before reading it.",
        "nested-past-recursion": f"{path}: config.json is nested too deeply (more than 100 levels); refused.",
        "not-an-object": f"{path}: config.json is not a Keras model configuration (no class_name at its top); "
                         "refused.",
    }
    if config in expected:
        assert message == expected[config]
    elif config == "nested-150":
        assert message.startswith(f"{path}: config.json is nested too deeply (more than 100 levels, at "
                                  "config.layers[1].config.stack_sizes[0][0]")
    else:
        assert message.startswith(f"{path}: config.json is not valid JSON ('utf-8' codec can't decode byte 0xff")


# Keras 2 files with code or bombs (prednet-import) ------------------------------------------------


STACK, R_STACK, FILT, FRAME, NT = (3, 4), (3, 4), 3, (8, 8), 3


@pytest.fixture()
def released(tmp_path):
    """A Keras 2 model JSON and full-model weights file in the layout of the authors' release."""
    write_model_json(tmp_path / "model.json", STACK, R_STACK, FILT, NT, FRAME)
    write_weights_h5(tmp_path / "weights.hdf5", random_weights(STACK, R_STACK, FILT, np.random.default_rng(0)), nt=NT)
    return tmp_path / "model.json", tmp_path / "weights.hdf5"


def keras2_lambda(name="lambda_1"):
    """A Keras 2 Lambda layer config: the function as Keras 2's func_dump wrote it (base64 of marshal)."""
    code = codecs.encode(marshal.dumps(payload_function().__code__), "base64").decode("ascii")
    return {"class_name": "Lambda", "name": name,
            "config": {"name": name, "trainable": True, "function": [code, None, None], "function_type": "lambda",
                       "output_shape": None, "output_shape_type": "raw", "arguments": {}},
            "inbound_nodes": [[["pred_net_1", 0, 0, {}]]]}


@pytest.mark.parametrize(
    "place", ["lambda-layer", "inside-time-distributed", "named-function", "activation-bytecode",
              "activation-module", "nested-past-recursion", "too-large"],
)
def test_a_keras2_json_with_code_is_refused_unrun(place, released, marker, tmp_path, monkeypatch):
    from keras.src.utils.python_utils import func_load

    model_json, weights = released
    document = json.loads(model_json.read_text())
    layers = document["config"]["layers"]
    prednet = next(layer for layer in layers if layer["class_name"] == "PredNet")
    code = keras2_lambda()["config"]["function"][0]
    control = tmp_path.parent / f"{tmp_path.name}-control"
    control.mkdir()
    assert payload_is_live(lambda: func_load(code)(None), control, monkeypatch)  # what loading it would do
    if place == "lambda-layer":
        layers.append(keras2_lambda())
        rule = "layer 'lambda_1' (Lambda) holds Python code"
    elif place == "inside-time-distributed":
        layers[2]["config"]["layer"] = keras2_lambda("lambda_2")
        rule = "layer 'lambda_2' (Lambda) holds Python code"
    elif place == "named-function":  # Keras 2.2: a module to import and a function of it to call
        layer = keras2_lambda()
        layer["config"].update(function="system", function_type="function", module="os")
        layers.append(layer)
        rule = "layer 'lambda_1' (Lambda) holds Python code"
    elif place == "activation-bytecode":  # a Keras 3 lambda where PredNet takes an activation's name
        prednet["config"]["A_activation"] = {"class_name": "__lambda__",
                                             "config": {"code": code, "defaults": None, "closure": None}}
        rule = "a serialized lambda holds Python code"
    elif place == "activation-module":
        prednet["config"]["LSTM_activation"] = {"module": "os", "class_name": "function", "config": "system"}
        rule = "'function' names the module 'os'; refused: importing it could run its code."
    elif place == "nested-past-recursion":
        prednet["config"]["stack_sizes"] = "NESTED"
        text = json.dumps(document).replace('"NESTED"', "[" * 5000 + "]" * 5000)
        rule = "is nested too deeply (more than 100 levels); refused."
    else:  # the size cap, scaled down to 1 KiB (the file is about 3 KB)
        monkeypatch.setattr(keras2, "MAX_JSON_BYTES", 1024)
        rule = "bytes, more than the 1,024 a model JSON may take (a PredNet's is a few KB); refused before reading it."
    if place != "nested-past-recursion":
        text = json.dumps(document)
    model_json.write_text(text)
    output = tmp_path / "imported.keras"

    with pytest.raises(LegacyFormatError) as caught:
        import_legacy_model(str(model_json), str(weights))
    message = refused_by_command(import_main, [model_json, weights, "-o", output], tmp_path)
    assert message == str(caught.value)
    assert message.startswith(f"{model_json}: ") or message.startswith(f"{model_json} ")
    assert rule in message, message
    if "holds Python code" in rule:
        assert message.endswith("that loading it would run; refused: prednet-import takes the PredNet and its "
                                "input shape only and never runs code from a file.")
    assert not output.exists()
    never_ran(marker)


@pytest.mark.parametrize("claim", ["unstored", "over-the-limit"])
def test_keras2_weights_claiming_more_than_they_hold_are_refused_unread(claim, released, tmp_path, monkeypatch):
    model_json, weights = released
    name = "model_weights/pred_net_1/pred_net_1/layer_a_0/kernel:0"
    with h5py.File(weights, "a") as handle:
        del handle[name]
        if claim == "unstored":  # 7 MiB declared, not one chunk stored: HDF5 reads zeros
            handle.create_dataset(name, shape=(3, 3, 3, 1 << 16), dtype="float32", chunks=(3, 3, 3, 1024))
        else:  # 3.4 MiB of zeros, stored gzipped in a few KB
            monkeypatch.setenv("PREDNET_MAX_UNPACKED", "1M")
            handle.create_dataset(name, data=np.zeros((3, 3, 3, 1 << 15), "float32"), compression="gzip",
                                  chunks=(3, 3, 3, 4096))
    assert weights.stat().st_size < 200_000
    output = tmp_path / "imported.keras"

    with pytest.raises(LegacyFormatError) as caught:
        import_legacy_model(str(model_json), str(weights))
    message = refused_by_command(import_main, [model_json, weights, "-o", output], tmp_path)
    assert message == str(caught.value) and message.startswith(f"{weights}: dataset '/{name}'"), message
    if claim == "unstored":
        assert "stores only 0 of its 64 chunks; what is missing would read as zeros" in message
    else:
        assert message.endswith("unpacks to 3.4 MiB, more than the 1.0 MiB allowed (PREDNET_MAX_UNPACKED); "
                                "refused before unpacking")
    assert not output.exists()


# Chainer .npz files with a pickle or a bomb (prednet-import --from chainer) -----------------------


@pytest.mark.parametrize("where", ["extra-array", "kernel-itself"])
def test_a_chainer_file_with_a_pickle_is_refused_unrun(where, marker, tmp_path, monkeypatch):
    weights = numpy_chainer.random_weights((3, 4), (3, 4), 3, 8, 8, np.random.default_rng(0))
    arrays = {f"predictor/{key}": value for key, value in weights.items()}
    key = "predictor/extra" if where == "extra-array" else "predictor/ConvP0/W"
    arrays[key] = np.array([Pickled()], dtype=object)
    path = tmp_path / "prednet.model"
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    control = tmp_path.parent / f"{tmp_path.name}-control"
    control.mkdir()

    def unpickle():
        with np.load(path, allow_pickle=True) as archive:
            archive[key]

    assert payload_is_live(unpickle, control, monkeypatch)
    output = tmp_path / "imported.keras"

    with pytest.raises(ChainerFormatError) as caught:
        import_chainer_model(path)
    message = refused_by_command(import_main, ["--from", "chainer", path, "-o", output], tmp_path)
    assert message == str(caught.value) == (
        f"{path}: array {key!r} holds Python objects (dtype object, stored as a pickle); refused: a Chainer "
        "model file holds numeric arrays only, and unpickling runs code from the file."
    )
    assert not output.exists()
    never_ran(marker)


def test_a_chainer_bomb_is_refused_before_unpacking(tmp_path, monkeypatch):
    monkeypatch.setenv("PREDNET_MAX_UNPACKED", "1M")
    weights = numpy_chainer.random_weights((3, 4), (3, 4), 3, 8, 8, np.random.default_rng(0))
    others = {f"predictor/{key}": value for key, value in weights.items() if key != "ConvP0/W"}
    path = write_npz_member(tmp_path / "bomb.model", "predictor/ConvP0/W", npy_header((4, 1 << 20), np.float32),
                            zeros=16 << 20, others=others)
    assert path.stat().st_size < 200_000
    output = tmp_path / "imported.keras"

    tracemalloc.start()
    try:
        with pytest.raises(ChainerFormatError) as caught:
            import_chainer_model(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # nothing unpacked
    message = refused_by_command(import_main, ["--from", "chainer", path, "-o", output], tmp_path)
    assert message == str(caught.value) == (
        f"{path}: array 'predictor/ConvP0/W': unpacks to 16.0 MiB, more than the 1.0 MiB allowed "
        "(PREDNET_MAX_UNPACKED); refused before unpacking"
    )
    assert not output.exists()


# A swapped checkpoint or initial-weights file (prednet-train; slow) -------------------------------


TRAIN = ["--stack-sizes", "3,4", "--nt", "3", "--batch-size", "1", "--steps-per-epoch", "1", "--epochs", "1",
         "--val-sequences", "2", "--val-fraction", "0.25", "--quiet"]


def prednet_train(args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-m", "prednet_keras.cli.train", *map(str, args)], capture_output=True,
                          text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def frames_npz(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "frames.npz"
    np.savez(path, frames=(np.random.default_rng(0).random((24, 16, 16, 3)) * 255).astype("uint8"))
    return path


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, frames_npz):
    """A run folder after one completed epoch of a tiny run: --resume --epochs 2 continues it."""
    folder = tmp_path_factory.mktemp("run") / "run"
    result = prednet_train([*TRAIN, "--data", frames_npz, "-o", folder])
    if result.returncode != 0:  # pytest.fail, not assert: the xfail cases expect an AssertionError of their own
        pytest.fail(f"the tiny run failed: {result.stdout}{result.stderr}")
    return folder


def swap_checkpoint(path, change):
    with h5py.File(path, "a") as handle:
        if change == "optimizer-extra":
            count = len(handle["optimizer/vars"])
            handle.create_dataset(f"optimizer/vars/{count}", data=np.zeros(3, "float32"))
        elif change == "unknown-layer":
            handle.create_dataset("layers/payload/vars/0", data=np.zeros(3, "float32"))
        else:
            name = "layers/pred_net/cell/conv_layers/conv2d/vars/0"
            kernel = handle[name][()]
            del handle[name]
            handle.create_dataset(name, data=np.zeros(kernel.shape[:-1] + (kernel.shape[-1] + 1,), kernel.dtype))


def swap_initial_weights(path, change):
    from prednet_keras.models import starting_point

    weights, info = starting_point.read_initial_weights(path)
    if change == "initial-shape":
        key = next(key for key, value in weights.items() if value.ndim == 4)
        weights[key] = np.zeros(weights[key].shape[:-1] + (weights[key].shape[-1] + 1,), weights[key].dtype)
    else:
        weights["payload/extra"] = np.zeros(3, "float32")
    starting_point.write_initial_weights(path, weights, info["seed"])  # a well-formed file, checksum and all


# Files a prednet-train command writes by design: the manifest records each --resume and session, and
# newer versions lock a run folder through a file beside it (session/lock.py, .prednet-locks/<name>.lock).
LOCKS = ".prednet-locks/"


@pytest.mark.slow
@pytest.mark.parametrize(
    "change",
    [
        "optimizer-extra",
        "unknown-layer",
        "kernel-shape",
        "initial-shape",
        "initial-extra",
    ],
)
def test_a_swapped_weights_file_in_a_run_folder_is_refused(change, trained_run, frames_npz, tmp_path):
    if change.startswith("initial"):
        # The starting point a run is given (--init-weights; a study's seeds come this way): copied into the
        # run folder as initial_weights.h5 and read before the first epoch, the same way as a --resume of a
        # run killed before its first epoch ended reads that copy again (where such a run is kept).
        swapped = tmp_path / "start.h5"
        swapped.write_bytes((trained_run / "initial_weights.h5").read_bytes())
        swap_initial_weights(swapped, change)
        new = tmp_path / "new"
        command = [*TRAIN, "--data", frames_npz, "--init-weights", swapped, "-o", new]
        named = (f"Error: {swapped}", f"Error: {new / 'initial_weights.h5'}")
        kept = lambda name: not name.startswith(("new/", LOCKS))  # noqa: E731 (the new run's own files)
    else:
        folder = tmp_path / "run"
        subprocess.run(["cp", "-a", str(trained_run), str(folder)], check=True)
        swapped = folder / "checkpoints" / "epoch-0001.weights.h5"
        swap_checkpoint(swapped, change)
        command = ["--resume", "--epochs", "2", "--quiet", "-o", folder]
        named = (f"Error: {swapped}",)
        kept = lambda name: name != "run/manifest.json" and not name.startswith(LOCKS)  # noqa: E731 (see below)
    before = {name: digest for name, digest in snapshot(tmp_path).items() if kept(name)}

    result = prednet_train(command)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and errors[0].startswith(named) and len(errors[0]) < 500, output
    assert {name: digest for name, digest in snapshot(tmp_path).items() if kept(name)} == before
