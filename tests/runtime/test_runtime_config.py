"""RuntimeConfig, environment_for, unsupported_settings and verify: pure logic, no child process
except the check that the runtime package imports no framework."""

import json
import os
import subprocess
import sys

import pytest

from prednet_keras import runtime
from prednet_keras.runtime import NOT_AVAILABLE, RuntimeConfig, RuntimeSetupError, environment_for, precision


# ------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"backend": "theano"}, "Unknown backend"),
        ({"device": "tpu"}, "Unknown device"),
        ({"device": "cpu:1"}, "whole CPU"),
        ({"device": "gpu:-1"}, "Unknown device"),
        ({"threads": 0}, ">= 1"),
        ({"threads": True}, "whole number"),
        ({"threads": 1.5}, "whole number"),
        ({"interop_threads": -2}, ">= 1"),
        ({"deterministic": "yes"}, "True or False"),
        ({"tf32": 1}, "True, False or None"),
        ({"onednn": "off"}, "True, False or None"),
        ({"precision": "float16"}, "Unknown precision 'float16'"),
        ({"precision": "tf32"}, "Unknown precision"),
    ],
)
def test_config_rejects_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RuntimeConfig(**kwargs)


def test_config_normalises_devices_and_round_trips():
    assert RuntimeConfig(device="GPU:1").device == "gpu:1"
    assert RuntimeConfig(device="cuda").device == "gpu"
    config = RuntimeConfig(backend="torch", device="cuda:0", threads=4, deterministic=True, tf32=False)
    assert (config.device_kind, config.gpu_index) == ("gpu", 0)
    again = RuntimeConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config
    with pytest.raises(ValueError, match="Unknown RuntimeConfig fields"):
        RuntimeConfig.from_dict({"backend": "jax", "gpus": 2})
    # Manifests from before `precision` existed: those runs were float32.
    old = {k: v for k, v in config.to_dict().items() if k != "precision"}
    assert RuntimeConfig.from_dict(old).precision == "float32"
    assert RuntimeConfig.from_dict(dict(old, precision="mixed_bfloat16")).precision == "mixed_bfloat16"


def test_a_gpu_without_bfloat16_is_named():
    assert "compute capability 7.0" in precision.bf16_capability_problem((7, 0))
    assert precision.bf16_capability_problem((9, 0)) is None
    assert precision.bf16_capability_problem(None) is None


def test_interop_threads_follow_threads_except_on_jax():
    assert RuntimeConfig(threads=3).effective_interop_threads == 3
    assert RuntimeConfig(threads=3, interop_threads=1).effective_interop_threads == 1
    assert RuntimeConfig(backend="jax", threads=3).effective_interop_threads is None


# -------------------------------------------------------------------- environment
BASE = {"PATH": "/usr/bin", "HOME": "/home/u", "XLA_FLAGS": "--xla_dump_to=/tmp/dump"}


def test_tensorflow_cpu_environment():
    env = environment_for(
        RuntimeConfig(backend="tensorflow", threads=2, interop_threads=1, deterministic=True, onednn=False),
        BASE,
    )
    assert env["KERAS_BACKEND"] == "tensorflow"
    assert env["CUDA_VISIBLE_DEVICES"] == ""  # a CPU run hides every GPU
    assert env["TF_DETERMINISTIC_OPS"] == "1"
    assert env["TF_ENABLE_ONEDNN_OPTS"] == "0"
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == env["TF_NUM_INTRAOP_THREADS"] == "2"
    assert env["TF_NUM_INTEROP_THREADS"] == "1"
    assert env["PATH"] == "/usr/bin" and env["XLA_FLAGS"] == BASE["XLA_FLAGS"]
    assert RuntimeConfig.from_dict(json.loads(env[runtime.CONFIG_ENV])).threads == 2
    assert "TF_FORCE_GPU_ALLOW_GROWTH" not in env


def test_switches_are_explicit_but_defaults_inherit():
    base = dict(BASE, TF_DETERMINISTIC_OPS="1", OMP_NUM_THREADS="7", TF_ENABLE_ONEDNN_OPTS="0")
    env = environment_for(RuntimeConfig(backend="tensorflow"), base)
    # deterministic=False is a decision: an inherited "1" must not flip it.
    assert env["TF_DETERMINISTIC_OPS"] == "0"
    # threads/onednn None: the user's environment stays (and is recorded).
    assert env["OMP_NUM_THREADS"] == "7" and env["TF_ENABLE_ONEDNN_OPTS"] == "0"


def test_jax_environment_manages_only_its_xla_flags():
    env = environment_for(RuntimeConfig(backend="jax", threads=1, deterministic=True), BASE)
    flags = env["XLA_FLAGS"].split()
    assert "--xla_dump_to=/tmp/dump" in flags
    assert "--xla_gpu_deterministic_ops=true" in flags
    assert "--xla_cpu_multi_thread_eigen=false" in flags
    assert env["JAX_PLATFORMS"] == "cpu"
    assert env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"

    inherited = dict(BASE, XLA_FLAGS="--xla_gpu_deterministic_ops=true --xla_dump_to=/d")
    env = environment_for(RuntimeConfig(backend="jax", device="gpu"), inherited)
    assert env["XLA_FLAGS"] == "--xla_dump_to=/d"  # deterministic=False removes the flag
    assert env["JAX_PLATFORMS"] == "cuda"  # a missing GPU is an error, not a CPU fallback
    env = environment_for(RuntimeConfig(backend="jax"), {"XLA_FLAGS": "--xla_gpu_deterministic_ops"})
    assert "XLA_FLAGS" not in env


def test_autotune_is_set_where_each_library_reads_it_and_only_when_asked():
    # Issue 37, Amendment 1: XLA times cuDNN's candidates while it compiles; under load the pick can change
    # from process to process. autotune=False takes XLA's fixed choice (level 0).
    inherited = dict(BASE, XLA_FLAGS="--xla_gpu_autotune_level=2 --xla_dump_to=/d")
    off = environment_for(RuntimeConfig(backend="jax", device="gpu", autotune=False), inherited)
    assert off["XLA_FLAGS"].split() == ["--xla_dump_to=/d", "--xla_gpu_autotune_level=0"]
    on = environment_for(RuntimeConfig(backend="jax", device="gpu", autotune=True), inherited)
    assert on["XLA_FLAGS"] == "--xla_dump_to=/d"  # XLA's default level, which tunes
    kept = environment_for(RuntimeConfig(backend="jax", device="gpu"), inherited)
    assert kept["XLA_FLAGS"] == inherited["XLA_FLAGS"]  # not asked: the user's own level stays
    assert environment_for(RuntimeConfig(backend="tensorflow", device="gpu", autotune=False), BASE)[
        "TF_CUDNN_USE_AUTOTUNE"] == "0"
    assert "TF_CUDNN_USE_AUTOTUNE" not in environment_for(RuntimeConfig(backend="tensorflow", device="gpu"), BASE)
    # A CPU run has no autotuning to turn on; off is what it has.
    assert "autotune" in runtime.unsupported_settings(RuntimeConfig(backend="torch", autotune=True))
    assert "autotune" not in runtime.unsupported_settings(RuntimeConfig(backend="torch", autotune=False))
    with pytest.raises(ValueError, match="`autotune` must be True, False or None"):
        RuntimeConfig(autotune="no")


def test_torch_environment():
    env = environment_for(RuntimeConfig(backend="torch", deterministic=True), BASE)
    assert env["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert env["KERAS_TORCH_DEVICE"] == "cpu"
    env = environment_for(RuntimeConfig(backend="torch", device="gpu"), dict(BASE, CUBLAS_WORKSPACE_CONFIG=":16:8"))
    assert "CUBLAS_WORKSPACE_CONFIG" not in env
    assert env["KERAS_TORCH_DEVICE"] == "cuda"
    assert "CUDA_VISIBLE_DEVICES" not in env


def test_gpu_index_counts_within_the_inherited_visible_devices():
    base = dict(BASE, CUDA_VISIBLE_DEVICES="2,3")
    assert environment_for(RuntimeConfig(backend="jax", device="gpu:1"), base)["CUDA_VISIBLE_DEVICES"] == "3"
    assert environment_for(RuntimeConfig(backend="jax", device="gpu"), base)["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert environment_for(RuntimeConfig(backend="torch", device="gpu:1"), BASE)["CUDA_VISIBLE_DEVICES"] == "1"
    with pytest.raises(ValueError, match="exposes 2 GPU"):
        environment_for(RuntimeConfig(backend="jax", device="gpu:2"), base)
    # A CPU parent (GPUs hidden) can still start a GPU child with the original list.
    cpu_env = environment_for(RuntimeConfig(backend="torch"), base)
    assert environment_for(RuntimeConfig(backend="torch", device="gpu:0"), cpu_env)["CUDA_VISIBLE_DEVICES"] == "2"


@pytest.mark.parametrize(
    "config",
    [
        RuntimeConfig(backend="tensorflow", threads=2, deterministic=True, onednn=True),
        RuntimeConfig(backend="jax", device="gpu:1", threads=1, deterministic=True),
        RuntimeConfig(backend="torch", device="gpu:0", deterministic=True, tf32=False),
        RuntimeConfig(backend="torch", device="gpu"),
    ],
)
def test_environment_for_is_idempotent_and_pure(config):
    base = dict(BASE, CUDA_VISIBLE_DEVICES="4,5")
    snapshot = dict(base)
    once = environment_for(config, base)
    assert base == snapshot
    assert environment_for(config, once) == once


# ------------------------------------------------------------------- unsupported
def test_unsupported_combinations_are_named():
    problems = runtime.unsupported_settings(RuntimeConfig(backend="tensorflow", cudnn=False))
    assert "cudnn" in problems and "torch" in problems["cudnn"]
    assert "cudnn" in runtime.unsupported_settings(RuntimeConfig(backend="jax", device="gpu", cudnn=False))
    assert runtime.unsupported_settings(RuntimeConfig(backend="torch", device="gpu", cudnn=False)) == {}
    assert "tf32" in runtime.unsupported_settings(RuntimeConfig(backend="torch", tf32=True))
    assert runtime.unsupported_settings(RuntimeConfig(backend="torch", tf32=False)) == {}
    assert "onednn" in runtime.unsupported_settings(RuntimeConfig(backend="jax", onednn=False))
    assert "interop_threads" in runtime.unsupported_settings(RuntimeConfig(backend="jax", interop_threads=2))
    assert "threads" in runtime.unsupported_settings(RuntimeConfig(backend="jax", threads=4), available_cpus=2)
    assert runtime.unsupported_settings(RuntimeConfig(backend="tensorflow", threads=64), available_cpus=2) == {}
    # On torch, Keras' jit_compile=True is torch.compile of the training step.
    assert runtime.unsupported_settings(RuntimeConfig(backend="torch", xla=True)) == {}
    assert "xla" in runtime.unsupported_settings(RuntimeConfig(backend="tensorflow", deterministic=True, xla=True))


def test_configure_refuses_unsupported_before_touching_the_process():
    before = dict(os.environ)
    with pytest.raises(RuntimeSetupError, match="cuDNN cannot be switched off"):
        runtime.configure(RuntimeConfig(backend="tensorflow", cudnn=False))
    assert dict(os.environ) == before


def test_configure_refuses_a_process_running_another_backend():
    import keras

    other = next(b for b in runtime.BACKENDS if b != keras.backend.backend())
    before = dict(os.environ)
    with pytest.raises(RuntimeSetupError, match="already imported with the"):
        runtime.configure(RuntimeConfig(backend=other))
    assert dict(os.environ) == before


# ------------------------------------------------------------------------- verify
def _effective(**overrides):
    effective = {
        "backend": "torch", "device": "cpu", "gpu_count": 0, "threads": 2, "interop_threads": 2,
        "deterministic": True, "cudnn": True, "cudnn_deterministic": True, "cudnn_benchmark": False,
        "tf32": False, "onednn": True, "precision": "float32", "not_available": {},
    }
    effective.update(overrides)
    return effective


def test_verify_lists_every_setting_not_in_force():
    config = RuntimeConfig(backend="torch", threads=2, deterministic=True, tf32=False)
    runtime.verify(config, _effective())
    with pytest.raises(RuntimeSetupError) as info:
        runtime.verify(config, _effective(threads=8, deterministic=False, device="gpu", precision="mixed_bfloat16"))
    text = str(info.value)
    assert "threads: requested 2, effective 8" in text
    assert "deterministic: requested True, effective False" in text
    assert "device: requested 'cpu', effective 'gpu'" in text
    assert "precision: requested 'float32', effective 'mixed_bfloat16'" in text


def test_verify_accepts_not_available_only_when_not_strict():
    loose = RuntimeConfig(backend="jax", cudnn=False, strict=False)
    effective = {
        "backend": "jax", "device": "cpu", "deterministic": False, "cudnn": NOT_AVAILABLE, "precision": "float32",
        "not_available": {"cudnn": "no switch"},
    }
    runtime.verify(loose, effective)
    with pytest.raises(RuntimeSetupError, match="cudnn"):
        runtime.verify(RuntimeConfig(backend="jax", cudnn=False), effective)


# ----------------------------------------------------------- no framework imported
def test_runtime_package_imports_no_framework():
    """The runtime package, imported in a fresh process, computes environments, checks and a fingerprint
    without importing a framework."""
    code = """
import json, sys
from prednet_keras import runtime as module
config = module.RuntimeConfig(backend="torch", device="gpu:0", threads=2, deterministic=True)
module.environment_for(config)
module.unsupported_settings(config)
fp = module.fingerprint()
loaded = [m for m in ("keras", "tensorflow", "jax", "torch") if m in sys.modules]
print(json.dumps({"loaded": loaded, "keys": sorted(fp)}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["loaded"] == []
    assert {"os", "cpu", "gpu", "python", "packages", "blas", "environment"} <= set(result["keys"])


def test_a_run_records_whether_it_shared_the_gpu_through_mps():
    recorded = runtime.relevant_environment({"CUDA_MPS_PIPE_DIRECTORY": "/tmp/mps/pipe", "HOME": "/root",
                                             "XLA_PYTHON_CLIENT_PREALLOCATE": "false"})
    assert recorded == {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/mps/pipe", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
