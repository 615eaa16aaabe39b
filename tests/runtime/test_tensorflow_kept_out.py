"""A torch or JAX process configured by runtime.configure trains, seeds, saves and loads a model without
TensorFlow imported, where Keras alone would import it (runtime.apply.keep_tensorflow_out_of_keras)."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Slow: each case starts two framework processes.
pytestmark = pytest.mark.slow

USE = """
import json, sys
import numpy as np
if {configure}:
    from prednet_keras import runtime
    runtime.configure(runtime.RuntimeConfig(backend="{backend}", device="cpu", threads=1))
import keras
keras.utils.set_random_seed(7)
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
model.compile(optimizer="adam", loss="mse")
loss = model.fit(np.ones((4, 3), "float32"), np.zeros((4, 2), "float32"), verbose=0).history["loss"][0]
model.save(sys.argv[1])
again = keras.saving.load_model(sys.argv[1])
same = all(np.array_equal(a, b) for a, b in zip(model.get_weights(), again.get_weights()))
print(json.dumps({{"loss": loss, "same": same, "tensorflow_imported": "tensorflow" in sys.modules}}))
"""


def _use(backend, configure, path):
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-c", USE.format(backend=backend, configure=configure), str(path)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_a_configured_process_of_another_backend_never_imports_tensorflow(backend, tmp_path):
    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"needs {backend}")
    configured = _use(backend, True, tmp_path / "configured.keras")
    assert configured["tensorflow_imported"] is False
    assert configured["same"] is True
    # The control: Keras alone imports TensorFlow wherever it is installed, and computes the same.
    alone = _use(backend, False, tmp_path / "alone.keras")
    assert alone["tensorflow_imported"] is (importlib.util.find_spec("tensorflow") is not None)
    assert configured["loss"] == alone["loss"]
