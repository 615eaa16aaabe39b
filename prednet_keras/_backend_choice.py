"""Which Keras backend to use when the user did not say, and what to install when
one is missing (imports no framework)."""

import json
import os
import sys

from prednet_keras import backends


class MissingDependencyError(ValueError):
    """A backend or optional extra the command needs is not installed.

    A ValueError, so that every command reports it as one line (a user's
    environment, not a bug).
    """


def _installed(name):
    backend = backends.find(name)
    return backend is not None and backend.installed()


def backend_installed(name):
    """Whether the framework of backend `name` (tensorflow, jax, torch) can be imported here, without importing it."""
    return _installed(name)


# The backend Keras writes into keras.json the first time it runs, whatever backend it ran with.
_KERAS_DEFAULT = backends.TENSORFLOW.name


def _fallback_order():
    # The table's order: the first installed is the default.
    return backends.names()


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
    if configured and (configured not in _fallback_order() or _installed(configured)):
        return
    for name in _fallback_order():
        if _installed(name):
            if name != (configured or _KERAS_DEFAULT):
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
    if configured in _fallback_order() and _installed(configured):
        return configured
    for name in _fallback_order():
        if _installed(name):
            return name
    return _fallback_order()[0]


def install_hint(backend):
    """The pip command that installs `backend` for prednet-keras."""
    entry = backends.find(backend)
    if entry is None:
        return f"pip install 'prednet-keras[{backend}]'"
    return f"pip install 'prednet-keras[{entry.extra}]'{entry.install_note}"


def require_backend(backend):
    """Raises MissingDependencyError naming the pip install when `backend` is missing."""
    entry = backends.find(backend)
    if entry is not None and not _installed(backend):
        others = [other.display_name for other in backends.BACKENDS if other is not entry and _installed(other.name)]
        also = f"; installed here: {', '.join(others)} (choose with --backend)" if others else ""
        raise MissingDependencyError(
            f"the {entry.display_name} backend is not installed: {install_hint(backend)}{also}"
        )

