"""Each option reaches the backend (read back in a configured child process), and
unsupported or late requests fail clearly. TensorFlow always; JAX and torch when
installed. The children of this module run concurrently (one fixture)."""

import pytest

from prednet_keras import runtime
from prednet_keras.runtime import NOT_AVAILABLE, RuntimeConfig

from tests.runtime._helpers import gpu_may_exist, installed, ok, run_tasks

# Slow (a configured process per backend): in the full suite, not in the fast loop (pytest -m "not slow").
pytestmark = pytest.mark.slow

CONFIGS = {
    "tf_forced": RuntimeConfig(backend="tensorflow", threads=1, deterministic=True, tf32=False, onednn=False,
                               autotune=False),
    "tf_free": RuntimeConfig(backend="tensorflow", threads=2, interop_threads=1, onednn=True, precision="mixed_bfloat16"),
    "jax_forced": RuntimeConfig(backend="jax", threads=1, deterministic=True, tf32=False, autotune=False),
    "jax_loose": RuntimeConfig(backend="jax", cudnn=False, onednn=True, strict=False),
    "torch_forced": RuntimeConfig(
        backend="torch", threads=1, deterministic=True, cudnn=False, tf32=False, onednn=False
    ),
    "torch_free": RuntimeConfig(backend="torch", threads=2, interop_threads=1, precision="mixed_bfloat16"),
}
NO_GPU = {f"{b}_gpu": RuntimeConfig(backend=b, device="gpu") for b in runtime.BACKENDS}


def _wanted():
    jobs = {}
    for name, config in CONFIGS.items():
        if installed(config.backend):
            jobs[name] = (config, "readback")
    if not gpu_may_exist():
        for name, config in NO_GPU.items():
            if installed(config.backend):
                jobs[name] = (config, "readback")
    # Processes whose framework started before configure (environments prepared
    # for a config without threads / oneDNN, then configure asks for them).
    jobs["tf_late"] = (RuntimeConfig(backend="tensorflow", threads=1), "late_tensorflow")
    if installed("jax"):
        jobs["jax_late"] = (runtime.environment_for(RuntimeConfig(backend="jax", threads=1)), "late_jax")
    jobs["twice"] = (RuntimeConfig(backend="torch" if installed("torch") else "tensorflow"), "configure_twice")
    return jobs


@pytest.fixture(scope="module")
def results():
    return run_tasks(_wanted())


def _effective(results, name):
    if name not in results:
        pytest.skip(f"{name}: backend not installed")
    return ok(results[name])["effective"]


def test_tensorflow_forced_settings_reach_the_backend(results):
    eff = _effective(results, "tf_forced")
    assert eff["backend"] == "tensorflow" and eff["device"] == "cpu" and eff["gpu_count"] == 0
    assert (eff["threads"], eff["interop_threads"]) == (1, 1)
    assert eff["deterministic"] is True
    assert eff["tf32"] is False
    assert eff["onednn"] is False
    assert eff["jit_compile"] is False  # XLA off under op determinism
    assert eff["environment"]["TF_DETERMINISTIC_OPS"] == "1"
    assert eff["precision"] == "float32" and "bf16_support" not in eff
    assert eff["not_available"] == {}


def test_tensorflow_other_direction(results):
    eff = _effective(results, "tf_free")
    assert (eff["threads"], eff["interop_threads"]) == (2, 1)
    assert eff["deterministic"] is False
    assert eff["onednn"] is True
    assert eff["tf32"] is True  # TensorFlow's default flag (it only acts on GPUs)
    # The Keras dtype policy read back after a bfloat16 convolution ran on this CPU.
    assert eff["precision"] == "mixed_bfloat16" and eff["bf16_support"].startswith("CPU")


def test_jax_forced_settings_reach_the_backend(results):
    eff = _effective(results, "jax_forced")
    assert eff["backend"] == "jax" and eff["device"] == "cpu"
    assert eff["threads"] == 1 and eff["cpu_affinity"] == 1 and eff["cpu_ids"] == [eff["cpu_ids"][0]]
    assert eff["eigen_multithread"] is False
    assert eff["deterministic"] is True and "--xla_gpu_deterministic_ops=true" in eff["xla_flags"]
    # XLA reads the autotuning level with the other flags (a CPU run has none: False either way).
    assert "--xla_gpu_autotune_level=0" in eff["xla_flags"] and eff["autotune"] is False
    assert eff["matmul_precision"] == "highest" and eff["tf32"] is False
    assert eff["platforms"] == "cpu"


def test_jax_not_strict_records_what_does_not_exist(results):
    eff = _effective(results, "jax_loose")
    assert eff["cudnn"] == NOT_AVAILABLE and eff["onednn"] == NOT_AVAILABLE
    assert set(eff["not_available"]) == {"cudnn", "onednn"}
    assert eff["deterministic"] is False and "xla_gpu_deterministic_ops" not in eff["xla_flags"]


def test_torch_forced_settings_reach_the_backend(results):
    eff = _effective(results, "torch_forced")
    assert eff["backend"] == "torch" and eff["device"] == "cpu" and eff["keras_device"] == "cpu"
    assert (eff["threads"], eff["interop_threads"]) == (1, 1)
    assert eff["deterministic"] is True and eff["cudnn_deterministic"] is True
    assert eff["cudnn_benchmark"] is False
    assert eff["cudnn"] is False
    assert eff["tf32"] is False and eff["tf32_conv"] is False and eff["tf32_matmul"] is False
    assert eff["onednn"] is False
    assert eff["cublas_workspace_config"] == ":4096:8"


def test_torch_other_direction(results):
    eff = _effective(results, "torch_free")
    assert (eff["threads"], eff["interop_threads"]) == (2, 1)
    assert eff["deterministic"] is False and eff["cudnn"] is True
    assert eff["cublas_workspace_config"] is None
    # torch's own defaults, recorded as they are: TF32 convolutions on, matmuls off.
    assert eff["tf32_conv"] is True and eff["tf32_matmul"] is False
    assert eff["precision"] == "mixed_bfloat16"


@pytest.mark.parametrize("backend", runtime.BACKENDS)
def test_gpu_requested_without_gpu_is_an_error(results, backend):
    if gpu_may_exist():
        pytest.skip("nvidia-smi present: a GPU may be visible here")
    name = f"{backend}_gpu"
    if name not in results:
        pytest.skip(f"{backend} not installed")
    result = results[name]
    assert not result["ok"], "a GPU run without a GPU must not fall back to the CPU"
    assert result["error_type"] == "RuntimeSetupError"
    assert "GPU" in result["error"] or "cuda" in result["error"]
    assert "Refusing to run" in result["error"] or "sees only" in result["error"]
    # Never an error without words (JAX raises a bare AssertionError when no plugin provides CUDA).
    assert ": ." not in result["error"]
    if backend == "jax" and "sees only" not in result["error"]:
        assert "plugin" in result["error"], result["error"]


def test_tensorflow_refuses_late_configuration(results):
    errors = ok(results["tf_late"])["errors"]
    assert "TF_ENABLE_ONEDNN_OPTS" in errors["env"] and "fresh process" in errors["env"]
    assert "already started" in errors["started"]


def test_jax_refuses_pinning_after_its_devices_exist(results):
    if "jax_late" not in results:
        pytest.skip("jax not installed")
    errors = ok(results["jax_late"])["errors"]
    assert "already created its devices" in errors["started"]


def test_a_process_is_configured_once(results):
    result = ok(results["twice"])
    assert result["same"] is True
    assert "configured once" in result["error"]
