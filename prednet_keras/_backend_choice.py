"""Which Keras backend to use when the user did not say (imports no framework)."""

import importlib.util
import json
import os
import sys

FALLBACK_ORDER = ("tensorflow", "jax", "torch")


def _installed(name):
    return importlib.util.find_spec(name) is not None


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
