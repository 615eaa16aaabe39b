"""The default backend when the user names none (no framework is imported here)."""

import json

import pytest

from prednet_keras import _backend_choice


def choose(monkeypatch, tmp_path, installed, keras_json=None, env=None):
    # setenv first so that monkeypatch restores the variable that choose_default_backend sets.
    monkeypatch.setenv("KERAS_BACKEND", "placeholder")
    monkeypatch.delenv("KERAS_BACKEND")
    if env:
        monkeypatch.setenv("KERAS_BACKEND", env)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    if keras_json:
        (tmp_path / "keras.json").write_text(json.dumps({"backend": keras_json}))
    monkeypatch.setattr(_backend_choice, "_installed", lambda name: name in installed)
    monkeypatch.delitem(__import__("sys").modules, "keras", raising=False)
    _backend_choice.choose_default_backend()
    return __import__("os").environ.get("KERAS_BACKEND")


def test_tensorflow_stays_the_default_where_installed(monkeypatch, tmp_path):
    assert choose(monkeypatch, tmp_path, {"tensorflow", "jax", "torch"}) is None


def test_without_tensorflow_an_installed_backend_is_chosen(monkeypatch, tmp_path):
    assert choose(monkeypatch, tmp_path, {"jax", "torch"}) == "jax"
    assert choose(monkeypatch, tmp_path, {"torch"}) == "torch"


def test_keras_json_naming_a_missing_backend_does_not_decide(monkeypatch, tmp_path):
    # Keras writes "tensorflow" to keras.json on first use, even on a machine without it.
    assert choose(monkeypatch, tmp_path, {"torch"}, keras_json="tensorflow") == "torch"
    assert choose(monkeypatch, tmp_path, {"jax", "torch"}, keras_json="torch") is None


def test_an_explicit_choice_is_respected(monkeypatch, tmp_path):
    assert choose(monkeypatch, tmp_path, {"jax"}, env="torch") == "torch"


def default(monkeypatch, tmp_path, installed, keras_json=None, env=None):
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    if env:
        monkeypatch.setenv("KERAS_BACKEND", env)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    if keras_json:
        (tmp_path / "keras.json").write_text(json.dumps({"backend": keras_json}))
    monkeypatch.setattr(_backend_choice, "_installed", lambda name: name in installed)
    return _backend_choice.default_backend()


def test_default_backend_is_answered_without_keras(monkeypatch, tmp_path):
    assert default(monkeypatch, tmp_path, {"tensorflow", "jax"}) == "tensorflow"
    assert default(monkeypatch, tmp_path, {"jax", "torch"}) == "jax"
    assert default(monkeypatch, tmp_path, {"torch"}, keras_json="tensorflow") == "torch"
    assert default(monkeypatch, tmp_path, {"tensorflow", "torch"}, keras_json="torch") == "torch"
    assert default(monkeypatch, tmp_path, {"tensorflow"}, env="jax") == "jax"
    # Nothing installed: TensorFlow, which the command then names with its pip install.
    assert default(monkeypatch, tmp_path, set()) == "tensorflow"


def test_a_missing_backend_names_the_pip_install(monkeypatch):
    monkeypatch.setattr(_backend_choice, "_installed", lambda name: name in {"tensorflow"})
    with pytest.raises(_backend_choice.MissingDependencyError) as caught:
        _backend_choice.require_backend("jax")
    assert str(caught.value) == (
        "the JAX backend is not installed: pip install 'prednet-keras[jax]'; "
        "installed here: TensorFlow (choose with --backend)"
    )
    assert isinstance(caught.value, ValueError)  # every command reports it as one line
    _backend_choice.require_backend("tensorflow")
