"""What happens when a process that loaded prednet_keras first imports Keras or TensorFlow.

The package root imports no framework (every --help and the data tools stay
fast), yet two things must happen at the moment a framework arrives, whoever
imports it (our commands, a user's `import keras`, a Keras load_model):

- TensorFlow writes start-up lines from C++ straight to file descriptor 2
  (absl's "All log messages before absl::InitializeLog()", oneDNN and CPU
  feature notices), before any Python setting can stop them. They are captured
  while the framework imports and dropped; anything else written then (errors,
  Python warnings) is passed on. PREDNET_VERBOSE=1 (the commands' -v) keeps all.
- Keras resolves "prednet_keras>PredNet" in a .keras file only if the class was
  registered, so once Keras has loaded, the modules holding prednet_keras'
  serializable objects are imported. `import prednet_keras, keras;
  keras.saving.load_model(...)` keeps working without an eager root.

A missing backend (Keras imports it while it imports itself) becomes one
MissingDependencyError naming the pip install.
"""

import importlib
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile

VERBOSE_ENV = "PREDNET_VERBOSE"
# Modules holding the objects registered with keras.saving.register_keras_serializable.
SERIALIZABLE_MODULES = (
    "prednet_keras.layers",
    "prednet_keras.models.lotter",
    "prednet_keras.models.chainer_protocol",
    "prednet_keras.models.autoencoder_protocol",
)
_WATCHED = ("keras", "tensorflow")
# How many prednet_keras submodules are being imported right now, and whether Keras arrived during one.
_STATE = {"importing_own": 0, "registration_pending": False}
_CHATTER = (
    re.compile(r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$"),
    # absl INFO/WARNING lines from C++: I1204 17:00:00.000000  1234 port.cc:153] ...
    re.compile(r"^[IW]\d{4} [\d:.]+\s+\d+ [\w./-]+:\d+\] "),
    # the second line of cpu_feature_guard's notice
    re.compile(r"^To enable the following instructions: .* in other operations, rebuild TensorFlow"),
)


def verbose():
    """Whether framework start-up output is to be shown (PREDNET_VERBOSE set and not 0)."""
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0")


def is_chatter(line):
    """Whether `line` is framework start-up noise (see the module docstring)."""
    return any(pattern.match(line) for pattern in _CHATTER)


class _QuietStderr:
    """Captures file descriptor 2 and passes on all but start-up chatter on exit."""

    def __enter__(self):
        sys.stderr.flush()
        self._saved = os.dup(2)
        self._capture = tempfile.TemporaryFile()
        os.dup2(self._capture.fileno(), 2)
        return self

    def __exit__(self, *exc):
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._capture.seek(0)
        text = self._capture.read().decode("utf-8", errors="replace")
        self._capture.close()
        kept = [line for line in text.splitlines() if not is_chatter(line)]
        if kept:
            sys.stderr.write("\n".join(kept) + "\n")
            sys.stderr.flush()
        return False


class _Loader(importlib.abc.Loader):
    """Delegates to the real loader, then does what the module's arrival calls for (see _Finder)."""

    def __init__(self, loader, name):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        if self._name in _WATCHED:
            self._exec_framework(module)
        else:
            self._exec_own(module)

    def _exec_framework(self, module):
        try:
            if verbose():
                self._loader.exec_module(module)
            else:
                with _QuietStderr():
                    self._loader.exec_module(module)
        except ModuleNotFoundError as error:
            _raise_missing_backend(error)
            raise
        if self._name == "keras":
            # Registering imports our layer modules; in the middle of importing one of them (it
            # imported Keras) that would meet it half-initialised, so wait until it is done.
            if _STATE["importing_own"]:
                _STATE["registration_pending"] = True
            else:
                register_serializables()

    def _exec_own(self, module):
        _STATE["importing_own"] += 1
        try:
            self._loader.exec_module(module)
        finally:
            _STATE["importing_own"] -= 1
        if not _STATE["importing_own"] and _STATE["registration_pending"]:
            register_serializables()

    def __getattr__(self, name):  # get_resource_reader, is_package, ... of the real loader
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the loaders of Keras, TensorFlow and prednet_keras' own submodules (the latter only
    to know when none of them is half-imported)."""

    def __init__(self):
        self._finding = set()

    def find_spec(self, name, path=None, target=None):
        if not (name in _WATCHED or name.startswith("prednet_keras.")):
            return None
        if name in self._finding or name in sys.modules:
            return None
        self._finding.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding.discard(name)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, name)
        return spec


def _raise_missing_backend(error):
    from prednet_keras import _backend_choice, backends

    package = (error.name or "").split(".")[0]
    missing = next((backend for backend in backends.BACKENDS if backend.package == package), None)
    if missing is not None:
        raise _backend_choice.MissingDependencyError(
            f"Keras is set to use the {missing.display_name} backend "
            f"(KERAS_BACKEND={os.environ.get('KERAS_BACKEND', '')!r}), which is not installed: "
            f"{_backend_choice.install_hint(missing.name)}"
        ) from None


def register_serializables():
    """Imports the modules that register prednet_keras' objects with Keras (idempotent)."""
    _STATE["registration_pending"] = False
    for name in SERIALIZABLE_MODULES:
        importlib.import_module(name)


def install():
    """Watches for the first import of Keras or TensorFlow in this process.

    When Keras is already imported, registers prednet_keras' objects now.
    """
    if "keras" in sys.modules:
        register_serializables()
        return
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
