"""A test's work on another backend: a fresh process on the CPU (the backend is fixed when Keras starts), run from
the checkout."""

import importlib.util
import os
import subprocess
import sys

from prednet_keras import backends

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTALLED = [backend.name for backend in backends.BACKENDS if importlib.util.find_spec(backend.package) is not None]


def others():
    """The installed backends other than this process's."""
    import keras

    return [name for name in INSTALLED if name != keras.backend.backend()]


def environment(backend):
    """os.environ for a child on `backend`: the checkout first on its path, the CPU only, TensorFlow's C++ log quiet."""
    return dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu",
                CUDA_VISIBLE_DEVICES="")


def run_module(backend, module, *args):
    """`python -m module args` on `backend`; asserts that it succeeded (its stderr's end as the message)."""
    done = subprocess.run([sys.executable, "-m", module, *map(str, args)], env=environment(backend), cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done
