"""Which Keras backend to use when the user did not say, and what to install when
one is missing (imports no framework)."""

import importlib.util
import json
import os
import sys

FALLBACK_ORDER = ("tensorflow", "jax", "torch")
# The pip extra that installs each backend, and a name people recognise.
EXTRAS = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}
DISPLAY_NAMES = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}


class MissingDependencyError(ValueError):
    """A backend or optional extra the command needs is not installed.

    A ValueError, so that every command reports it as one line (a user's
    environment, not a bug).
    """


def _installed(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a broken install or a stub in sys.modules
        return False


def backend_installed(name):
    """Whether the framework of backend `name` (tensorflow, jax, torch) can be imported here, without importing it."""
    return _installed(name)


def keras_json_backend():
    """The backend named in Keras' config file (~/.keras/keras.json), or None."""
    keras_home = os.environ.get("KERAS_HOME", os.path.join(os.path.expanduser("~"), ".keras"))
    try:
        with open(os.path.join(keras_home, "keras.json")) as handle:
            return json.load(handle).get("backend")
    except (OSError, ValueError, AttributeError):
        return None


def choose_default_backend():
    """Sets KERAS_BACKEND when the user did not, and Keras would otherwise ask
    for a backend that is not installed.

    KERAS_BACKEND, when set, is always respected. Keras writes keras.json with
    "tensorflow" the first time it runs on a machine, whatever backend it ran
    with; on a machine without TensorFlow that file must not decide. TensorFlow
    stays the default wherever it is installed.
    """
    if "keras" in sys.modules or os.environ.get("KERAS_BACKEND"):
        return
    configured = keras_json_backend()
    if configured and (configured not in FALLBACK_ORDER or _installed(configured)):
        return
    for name in FALLBACK_ORDER:
        if _installed(name):
            if name != (configured or "tensorflow"):
                os.environ["KERAS_BACKEND"] = name
            return


def default_backend():
    """The backend a command uses when neither --backend nor KERAS_BACKEND says.

    The same rule as choose_default_backend, answered without importing Keras:
    KERAS_BACKEND, else keras.json's backend where it is installed, else the
    first installed of TensorFlow, JAX, PyTorch; "tensorflow" when none is (the
    command then says what to install).
    """
    named = os.environ.get("KERAS_BACKEND")
    if named:
        return named
    configured = keras_json_backend()
    if configured in FALLBACK_ORDER and _installed(configured):
        return configured
    for name in FALLBACK_ORDER:
        if _installed(name):
            return name
    return "tensorflow"


def install_hint(backend):
    """The pip command that installs `backend` for prednet-keras."""
    extra = EXTRAS.get(backend, backend)
    hint = f"pip install 'prednet-keras[{extra}]'"
    if backend == "tensorflow":
        hint += " (or [tensorflow-cpu] on a machine without a GPU)"
    return hint


def require_backend(backend):
    """Raises MissingDependencyError naming the pip install when `backend` is missing."""
    if backend in FALLBACK_ORDER and not _installed(backend):
        others = [DISPLAY_NAMES[n] for n in FALLBACK_ORDER if n != backend and _installed(n)]
        also = f"; installed here: {', '.join(others)} (choose with --backend)" if others else ""
        raise MissingDependencyError(
            f"the {DISPLAY_NAMES[backend]} backend is not installed: {install_hint(backend)}{also}"
        )

