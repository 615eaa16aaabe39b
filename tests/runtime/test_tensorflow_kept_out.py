"""A process that runtime.configure set up for torch or JAX seeds, trains, saves and loads a model without
TensorFlow imported, where Keras alone would import it (runtime.apply.keep_tensorflow_out_of_keras)."""

import pytest

from prednet_keras import runtime
from tests.runtime._helpers import installed, ok, run_tasks

# Slow: four framework processes.
pytestmark = pytest.mark.slow


def test_a_configured_process_of_another_backend_never_imports_tensorflow(tmp_path):
    backends = [b for b in ("torch", "jax") if installed(b)]
    if not backends:
        pytest.skip("needs torch or jax")
    jobs = {}
    for backend in backends:
        config = runtime.RuntimeConfig(backend=backend, device="cpu", threads=1)
        for configure in ("1", "0"):
            jobs[backend, configure] = (config, "seed_train_save_load", tmp_path / f"{backend}-{configure}.keras",
                                        configure)
    results = {job: ok(result) for job, result in run_tasks(jobs).items()}
    for backend in backends:
        configured, alone = results[backend, "1"], results[backend, "0"]
        assert configured["tensorflow_imported"] is False
        assert configured["weights_back"] is True
        # The control: in the same environment Keras alone imports TensorFlow wherever it is installed, and
        # computes the same.
        assert alone["tensorflow_imported"] is installed("tensorflow")
        assert configured["loss"] == alone["loss"]
