"""Which Keras backend to use when the user did not say (imports no framework)."""

import importlib.util
import json
import os
import sys

FALLBACK_ORDER = ("tensorflow", "jax", "torch")


def configured_backend():
    """The backend named by KERAS_BACKEND or ~/.keras/keras.json, or None."""
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    keras_home = os.environ.get("KERAS_HOME", os.path.join(os.path.expanduser("~"), ".keras"))
    try:
        with open(os.path.join(keras_home, "keras.json")) as handle:
            return json.load(handle).get("backend")
    except (OSError, ValueError, AttributeError):
        return None


def choose_default_backend():
    """Sets KERAS_BACKEND to the first installed of tensorflow, jax, torch when
    nothing is configured and Keras is not imported yet. TensorFlow stays the
    default wherever it is installed."""
    if "keras" in sys.modules or configured_backend():
        return
    for name in FALLBACK_ORDER:
        if importlib.util.find_spec(name) is not None:
            if name != "tensorflow":
                os.environ["KERAS_BACKEND"] = name
            return
