"""The model registry (issue 27) and a user's own Keras model: named module:function or file.py:function,
trained by prednet-train and studied by prednet-study as the built-in models are."""

import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from prednet_keras import model_kinds
from prednet_keras.model_kinds.user import UserModelError
from prednet_keras.cli.eval import main as eval_main
from prednet_keras.cli.train import main as train_main
from prednet_keras.study.spec import rules as spec_rules
from prednet_keras.study.spec import SpecError, parse_spec

ROOT = Path(__file__).resolve().parents[2]

# A model file outside the package: the documented example (shipped as prednet_keras.examples.mnist_cnn), made tiny.
TINY_MODEL = """
from prednet_keras.examples.mnist_cnn import small_cnn


def tiny():
    return small_cnn(train_images=192, val_images=64, batch_size=32)


def not_a_user_model():
    return 42
"""

TINY_STUDY = """
name = "tiny-user"
model = "tiny_model.py:tiny"
seeds = 2
workers = 2

[train]
batch_size = 64

[runtime]
backend = "tensorflow"
device = "cpu"
deterministic = true

[configurations.one-thread]
threads = 1

[configurations.two-threads]
threads = 2
"""


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "tiny_model.py"
    path.write_text(TINY_MODEL)
    return path


def _run(module, *args, cwd):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True,
                          timeout=900, env=env, cwd=cwd)


# -- the registry (fast) ------------------------------------------------------------------------------------


def test_the_model_list_is_the_registry():
    assert model_kinds.names() == ("prednet", "prednet-chainer", "autoencoder")
    assert spec_rules.MODELS == model_kinds.names()
    assert model_kinds.get("prednet").session_protocol.can_resume
    # The study's own models resume from their checkpoints, and so does a user's model (below).
    assert model_kinds.get("autoencoder").session_protocol.can_resume
    assert model_kinds.get("prednet-chainer").session_protocol.can_resume
    assert model_kinds.get("prednet-chainer").arm_factors == {"tbptt": "chainer", "emulate_cpu_aliasing": False}
    with pytest.raises(ValueError, match="must be one of prednet, prednet-chainer, autoencoder"):
        model_kinds.get("resnet")


def test_a_new_kind_is_one_registration():
    class Toy(model_kinds.ModelKind):
        name = "toy-kind"

        def config_class(self):
            from prednet_keras.model_kinds.user import UserConfig

            return UserConfig

    kind = model_kinds.register(Toy())
    try:
        assert model_kinds.get("toy-kind") is kind and "toy-kind" in model_kinds.names()
        with pytest.raises(ValueError, match="already registered"):
            model_kinds.register(Toy())
    finally:
        from prednet_keras.model_kinds import base

        base._KINDS.pop("toy-kind")


def test_references_name_a_user_model(tmp_path):
    assert model_kinds.is_reference("mypkg.models:small_cnn") and model_kinds.is_reference("a/b.py:f")
    assert not model_kinds.is_reference("prednet") and not model_kinds.is_reference("x.py:1")
    kind = model_kinds.get("sub/m.py:fn")
    assert kind.session_protocol.can_resume and kind.output_name() == "fn"
    assert kind.canonical(tmp_path) == f"{(tmp_path / 'sub' / 'm.py').resolve()}:fn"


def test_a_spec_names_a_user_model_relative_to_its_folder(model_file):
    spec = parse_spec({"model": "tiny_model.py:tiny", "seeds": 2, "train": {"epochs": 2},
                       "configurations": {"a": {"threads": 1}, "b": {"threads": 2}}}, base=model_file.parent)
    assert spec.model == f"{model_file.resolve()}:tiny"
    assert spec.train == {"epochs": 2, "batch_size": None, "metric_updates": None}
    assert spec.run_options(spec.planned_runs()[0], "w.h5")["model"] == spec.model


@pytest.mark.parametrize("changes, message", [
    ({"model": "missing.py:tiny"}, "[train]: --model: no such file"),
    ({"train": {"nt": 3}}, "[train]: unknown option nt for model"),
    ({"train": {"epochs": 0}}, "[train] epochs: must be a whole number from 1 to 100,000"),
    ({"configurations": {"a": {"tbptt": "clean"}}}, "[configurations.a]: unknown key tbptt"),
    ({"configurations": {"a": {"precision": "mixed_bfloat16"}}}, "is for model prednet only"),
])
def test_bad_user_model_specs_are_refused(model_file, changes, message):
    data = {"model": "tiny_model.py:tiny", "configurations": {"a": {"threads": 1}}, **changes}
    with pytest.raises(SpecError) as error:
        parse_spec(data, base=model_file.parent)
    assert message in str(error.value)


def test_prednet_train_refuses_options_that_do_not_apply_to_a_user_model(model_file, tmp_path):
    result = CliRunner().invoke(train_main, ["--model", f"{model_file}:tiny", "--nt", "4", "-o", str(tmp_path / "r")])
    assert result.exit_code == 2 and "--nt does not apply to --model" in result.output
    result = CliRunner().invoke(train_main, ["--model", "resnet", "-o", str(tmp_path / "r")])
    assert result.exit_code == 2 and "'resnet' is not one of 'prednet', 'prednet-chainer', 'autoencoder'" in result.output
    assert not (tmp_path / "r").exists()


def test_a_function_that_returns_no_user_model_is_named(model_file):
    with pytest.raises(UserModelError, match="returned int, not a prednet_keras.model_kinds.UserModel"):
        model_kinds.get(f"{model_file}:not_a_user_model").load()
    with pytest.raises(UserModelError, match="defines no 'nothing'"):
        model_kinds.get(f"{model_file}:nothing").load()


def test_faults_in_the_users_file_are_user_errors_told_in_one_line(tmp_path, monkeypatch):
    # The fault is in the user's code, not in this package: a ValueError (one line from every command),
    # naming the reference, what failed and the cause.
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_package_here\n")
    with pytest.raises(UserModelError, match=r"broken.py:fn: importing .*broken.py raised ModuleNotFoundError: "
                                             r"No module named 'no_such_package_here'"):
        model_kinds.get(f"{broken}:fn").load()
    raising = tmp_path / "raising.py"
    raising.write_text("def fn():\n    raise RuntimeError('no data here')\n")
    with pytest.raises(UserModelError, match="raising.py:fn: calling it raised RuntimeError: no data here"):
        model_kinds.get(f"{raising}:fn").load()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserModelError, match="no module named 'not_a_module_anywhere'"):
        model_kinds.get("not_a_module_anywhere:fn").load()
    assert issubclass(UserModelError, ValueError)


def test_a_module_reference_is_imported_from_the_path(tmp_path, monkeypatch):
    (tmp_path / "my_user_models.py").write_text("def answer():\n    return 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    kind = model_kinds.get("my_user_models:answer")
    assert kind.canonical() == "my_user_models:answer"
    with pytest.raises(UserModelError, match="my_user_models:answer returned int"):
        kind.load()


def _user_run_folder(folder, reference, val):
    """A complete run folder of a user model, as far as prednet-eval reads it before loading a model."""
    folder.mkdir(parents=True)
    manifest = {"format": "prednet-keras-run", "format_version": 1, "status": "complete",
                "options": {"model": reference, "seed": 0},
                "result": {"val": val, "weights_checksum": "0" * 64}}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (folder / "model.keras").write_bytes(b"not read: the run is refused before its model is loaded")
    return folder


def test_prednet_eval_refuses_a_user_model_run_in_one_line(model_file, tmp_path):
    reference = f"{model_file.resolve()}:tiny"
    folder = _user_run_folder(tmp_path / "runs" / "cnn", reference, {"loss": 0.25, "accuracy": 0.875})
    result = CliRunner().invoke(eval_main, [str(folder)])
    assert result.exit_code == 1 and result.exception is not None and isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"Error: {folder} is a run of the user's model {reference}")
    assert "prednet-eval scores only video prediction and the MNIST autoencoder" in lines[0]
    assert f"(loss 0.25, accuracy 0.875) are in manifest.json (result.val) of {folder}." in lines[0]
    assert not (folder / "eval").exists()
    # A run without val_data says where its loss is; a folder of runs is refused before anything is evaluated.
    plain = _user_run_folder(tmp_path / "runs" / "plain", reference, None)
    result = CliRunner().invoke(eval_main, [str(plain)])
    assert result.exit_code == 1 and "recorded no validation metrics" in result.output
    assert "history.csv" in result.output and len(result.output.strip().splitlines()) == 1
    result = CliRunner().invoke(eval_main, [str(tmp_path / "runs")])
    assert result.exit_code == 1 and f"Error: {folder} is a run of the user's model" in result.output
    assert not (plain / "eval").exists() and not (tmp_path / "eval-comparison").exists()


# -- training and a study (slow: real training processes) --------------------------------------------------


def _history(folder):
    with open(folder / "history.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def _check_user_run(folder, reference, updates):
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["options"]["model"] == reference
    file_hash = hashlib.sha256(Path(reference.rpartition(":")[0]).read_bytes()).hexdigest()
    assert manifest["model"]["reference"] == reference and manifest["model"]["file_sha256"] == file_hash
    assert manifest["protocol"]["file_sha256"] == file_hash
    rows = _history(folder)
    assert [int(r["update"]) for r in rows] == list(range(1, updates + 1))
    assert manifest["metric"]["name"] == "mean_last_20_updates"
    assert set(manifest["result"]["val"]) == {"loss", "accuracy"}
    assert {"model.keras", "initial_weights.h5", "history.csv", "loss.png"} <= {p.name for p in folder.iterdir()}
    return manifest


@pytest.mark.slow
def test_prednet_train_trains_a_user_model_from_a_file(model_file, tmp_path):
    folder = tmp_path / "run"
    result = _run("prednet_keras.cli.train", "--model", "tiny_model.py:tiny", "--epochs", "2", "--quiet",
                  "-o", folder, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = _check_user_run(folder, f"{model_file.resolve()}:tiny", updates=2 * 6)
    assert manifest["options"]["epochs"] == 2 and manifest["result"]["protocol"]["epochs"] == 2
    assert [int(r["epoch"]) for r in _history(folder)] == [1] * 6 + [2] * 6
    # prednet-eval knows the run from its manifest: one line, exit 1, nothing written.
    result = _run("prednet_keras.cli.eval", folder, cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert result.stderr.strip().count("\n") == 0 and "result.val" in result.stderr
    assert not (folder / "eval").exists()
    # A loose copy of its model.keras (no manifest) is no autoencoder: refused, not a broadcast error.
    (tmp_path / "loose.keras").write_bytes((folder / "model.keras").read_bytes())
    result = _run("prednet_keras.cli.eval", tmp_path / "loose.keras", cwd=tmp_path)
    assert result.returncode == 1 and "neither an autoencoder nor a video predictor" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_study_of_a_user_model(model_file, tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY_STUDY)
    out = tmp_path / "study"
    result = _run("prednet_keras.cli.study", "run", tmp_path / "tiny.toml", "-o", out, "--quiet", cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    reference = f"{model_file.resolve()}:tiny"
    folders = sorted(p for p in (out / "runs").glob("*/seed-*") if p.is_dir())
    assert [f"{p.parent.name}/{p.name}" for p in folders] == [
        "one-thread/seed-0000-r1", "one-thread/seed-0001-r1", "two-threads/seed-0000-r1", "two-threads/seed-0001-r1"]
    manifests = [_check_user_run(folder, reference, updates=3) for folder in folders]
    # Each seed's runs started from the seed's weights and saw the same order, in both configurations.
    for seed in (0, 1):
        same_seed = [m for m in manifests if m["seeds"]["seed"] == seed]
        assert len({m["initial_weights"]["checksum"] for m in same_seed}) == 1
        assert len({m["seeds"]["data_order_checksum"] for m in same_seed}) == 1
    assert (out / "report" / "report.md").is_file()


@pytest.mark.slow
def test_prednet_train_tells_a_broken_user_model_in_one_line(tmp_path):
    (tmp_path / "wrong.py").write_text("def fn():\n    return 42\n")
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    result = subprocess.run([sys.executable, "-m", "prednet_keras.cli.train", "--model", "wrong.py:fn", "-o", "run"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert f"Error: {tmp_path.resolve()}/wrong.py:fn returned int, not a prednet_keras.model_kinds.UserModel" in result.stderr
    assert not (tmp_path / "run").exists()
