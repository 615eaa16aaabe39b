"""The backends' table (issue 38): prednet_keras/backends.py is the only module that tells backends apart by
name, every function it names exists, and a throwaway backend added to a copy of the table is offered where
backends are listed (the runtime option's choices and check, the commands' --backend, the study spec's rule, the
default backend, the missing-backend message) and asked what it honours (unsupported settings, jit_compile, the
child's environment), with no other file changed."""

import ast
import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from prednet_keras import _backend_choice, backends
from prednet_keras.backends import BACKENDS, Backend, LazyFunction
from prednet_keras.runtime.config import jit_compile_for, runtime_config_class, unsupported_settings
from prednet_keras.runtime.environment import environment_for
from prednet_keras.runtime.options import RUNTIME_OPTIONS, backend_option
from prednet_keras.study.spec import rules as spec_rules
from prednet_keras.options.value_rules import RuleError

from tests.runtime.test_runtime_options_table import command_for

PACKAGE = Path(backends.__file__).parent
NAMES = set(backends.names())
# Where a backend's name is compared though no backend is meant, and why.
NOT_A_BACKEND = {
    ("pretrained/released.py", "tensorflow"): "the authors' archive keeps the TensorFlow-backend weights in "
                                              "tensorflow_weights/; the test is on a file's path",
}


def compared_names(source):
    """The backend names a piece of source compares a value with: `==`, `!=`, `in`, `not in` (a tuple or list
    of them included), a dict's key or a subscript (a mapping keyed by backend name), a str.startswith or
    .endswith argument, or a `case` pattern."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and node.value in NAMES):
            continue
        parent = parents.get(node)
        if isinstance(parent, (ast.Tuple, ast.List, ast.Set)):
            parent = parents.get(parent)
        compared = (
            isinstance(parent, (ast.Compare, ast.MatchValue))
            or (isinstance(parent, ast.Dict) and node in parent.keys)
            or (isinstance(parent, ast.Subscript) and parent.slice is not None
                and (parent.slice is node or node in getattr(parent.slice, "elts", ())))
            or (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute)
                and parent.func.attr in ("startswith", "endswith"))
        )
        if compared:
            found.append((node.lineno, node.col_offset, node.value))
    return [(line, name) for line, _, name in sorted(found)]


def test_the_check_finds_each_way_of_comparing_a_name():
    source = """
if backend == "torch": pass
if "jax" != backend: pass
if backend in ("tensorflow", "jax"): pass
advice = {"jax": 1}
advice["torch"]
type(value).__module__.startswith("torch")
match backend:
    case "tensorflow": pass
"""
    assert [name for _, name in compared_names(source)] == ["torch", "jax", "tensorflow", "jax", "jax", "torch",
                                                            "torch", "tensorflow"]
    # Plain data is not a comparison: a default, a list of package names, a help text.
    assert compared_names('default = "tensorflow"\nnames = ["jax", "jaxlib"]\nhelp = "one of jax, torch"') == []


def test_no_module_but_the_table_compares_a_backends_name():
    compared = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "backends.py":
            continue
        for line, name in compared_names(path.read_text(encoding="utf-8")):
            if (relative, name) not in NOT_A_BACKEND:
                compared.append(f"prednet_keras/{relative}:{line}: {name!r}")
    assert not compared, ("backend names compared outside prednet_keras/backends.py (ask the table instead):\n"
                          + "\n".join(compared))


def _defines(module, function):
    """Whether `module` defines `function` at its top level, read from its source (nothing imported)."""
    spec = importlib.util.find_spec(module)
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function
               for node in tree.body)


def test_every_function_the_table_names_exists():
    named = [(backend.name, field.name, getattr(backend, field.name))
             for backend in BACKENDS for field in dataclasses.fields(backend)
             if isinstance(getattr(backend, field.name), LazyFunction)]
    assert len(named) >= 3 * 7  # the seven every backend has: environment, apply_switches, read_back, ...
    missing = [f"{name}.{field}: {lazy.path}" for name, field, lazy in named
               if not _defines(*lazy.path.split(":"))]
    assert not missing, f"the table names functions that do not exist: {missing}"


def test_the_table_keeps_what_users_and_files_have_seen():
    # The order picks the default backend (TensorFlow where installed) and lists the backends everywhere.
    assert backends.names() == ("tensorflow", "jax", "torch")
    assert [b.display_name for b in BACKENDS] == ["TensorFlow", "JAX", "PyTorch"]
    assert _backend_choice.install_hint("tensorflow") == (
        "pip install 'prednet-keras[tensorflow]' (or [tensorflow-cpu] on a machine without a GPU)")
    assert _backend_choice.install_hint("torch") == "pip install 'prednet-keras[torch]'"
    assert backends.find("theano") is None
    with pytest.raises(KeyError, match="no backend 'theano'"):
        backends.named("theano")


# ----------------------------------------------------------------------------------------- a throwaway backend
def _numpy_environment(config, env, base):
    env["NUMPY_BACKEND_THREADS"] = str(config.threads or 0)


def _not_reached(*args, **kwargs):
    raise AssertionError("nothing here starts the framework")


# Keras' NumPy backend (inference only), as docs/architecture.md's "Adding a backend" adds it.
NUMPY = Backend(
    "numpy", "NumPy", package="numpy", extra="numpy",
    unsupported={"cudnn": "NumPy runs on the CPU only; it has no cuDNN to switch off.",
                 "interop_threads": "NumPy has no inter-op thread pool to size."},
    jit_by_default=False,
    environment=_numpy_environment,
    apply_switches=_not_reached, read_back=_not_reached, gpu_capability=_not_reached, gpu_info=_not_reached,
    profiler=_not_reached, device_peak=_not_reached,
)
TABLE = BACKENDS + (NUMPY,)
OPTIONS = tuple(backend_option(TABLE) if option.name == "backend" else option for option in RUNTIME_OPTIONS)


@pytest.fixture
def with_numpy(monkeypatch):
    """The table with the throwaway backend, as every caller that looks a backend up sees it."""
    monkeypatch.setattr(backends, "BACKENDS", TABLE)
    return TABLE


def test_a_throwaway_backend_is_a_choice_of_the_commands_and_the_spec(with_numpy):
    help_text = CliRunner().invoke(command_for(OPTIONS), ["--help"], terminal_width=200).output
    assert "[tensorflow|jax|torch|numpy]" in help_text
    assert "else the first installed of tensorflow, jax, torch, numpy]" in help_text
    result = CliRunner().invoke(command_for(OPTIONS), ["--backend", "numpy"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["backend"] == "numpy"
    assert spec_rules.runtime_rules(OPTIONS)["backend"].check("numpy") == "numpy"
    config_class = runtime_config_class(OPTIONS)
    assert 'backend: Keras backend, one of "tensorflow", "jax", "torch", "numpy".' in config_class.__doc__
    with pytest.raises(ValueError, match=r"expected one of \['tensorflow', 'jax', 'torch', 'numpy'\]"):
        config_class(backend="mlx")
    # The real commands and spec do not offer it: only the copy of the table changed.
    assert "numpy" not in CliRunner().invoke(command_for(RUNTIME_OPTIONS), ["--help"], terminal_width=200).output
    with pytest.raises(RuleError):
        spec_rules.RUNTIME_RULES["backend"].check("numpy")


def test_a_throwaway_backend_is_chosen_and_named_where_backends_are_listed(with_numpy, monkeypatch, tmp_path):
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setattr(_backend_choice, "_installed", lambda name: name == "numpy")
    assert _backend_choice.default_backend() == "numpy"
    with pytest.raises(_backend_choice.MissingDependencyError) as caught:
        _backend_choice.require_backend("jax")
    assert str(caught.value).endswith("installed here: NumPy (choose with --backend)")
    assert _backend_choice.install_hint("numpy") == "pip install 'prednet-keras[numpy]'"


def test_a_throwaway_backend_is_asked_what_it_honours(with_numpy):
    config_class = runtime_config_class(OPTIONS)
    config = config_class(backend="numpy", threads=2, interop_threads=3, cudnn=False, strict=False)
    assert unsupported_settings(config) == {
        "cudnn": "NumPy runs on the CPU only; it has no cuDNN to switch off.",
        "interop_threads": "NumPy has no inter-op thread pool to size.",
    }
    assert config.effective_interop_threads == 3  # no pool: `threads` does not size one
    assert jit_compile_for(config, {}) is False  # eager unless asked, as torch
    env = environment_for(config, {})
    assert env["KERAS_BACKEND"] == "numpy" and env["NUMPY_BACKEND_THREADS"] == "2"
    assert env["OMP_NUM_THREADS"] == "2"  # what every backend gets
