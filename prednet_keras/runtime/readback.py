"""Reading back what is in force in a configured process, per backend, and verifying it against what was
requested. Looks only at the framework the process runs."""

import importlib
import os
import sys

from prednet_keras import backends
from prednet_keras.runtime.environment import (
    XLA_AUTOTUNE,
    XLA_DETERMINISTIC,
    XLA_EIGEN_THREADS,
    relevant_environment,
    truthy,
    xla_flag,
)
from prednet_keras.runtime.machine import bf16_support
from prednet_keras.runtime.process import GPU_PLATFORMS, NOT_AVAILABLE, RuntimeSetupError, available_cpus


def read_back():
    """What is actually in force in this process, queried from the active backend.

    Imports Keras (and with it the backend its environment names) if needed; call
    it after `configure`.

    Returns:
        a JSON-ready dict. Keys common to every backend: backend, backend_version,
        keras_version, device ("cpu" or "gpu"), devices, gpu_count, threads,
        interop_threads, cpu_affinity, deterministic, cudnn, tf32, onednn,
        autotune (whether GPU kernels are picked by timing them: False on a CPU),
        xla_flags, precision (the Keras dtype policy in force; with a mixed one
        also bf16_support), environment. None means the backend has no such setting; "auto"
        means the backend sizes the pool itself. Backend-specific keys are added
        (e.g. cudnn_deterministic on torch, matmul_precision on JAX).
    """
    keras = sys.modules.get("keras") or importlib.import_module("keras")
    backend = keras.backend.backend()
    out = {
        "backend": backend,
        "keras_version": keras.__version__,
        "cpu_affinity": available_cpus(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    out.update(backends.named(backend).read_back())
    out["precision"] = keras.config.dtype_policy().name
    if out["precision"] != "float32":
        out["bf16_support"] = bf16_support(out.get("device"))
    out["environment"] = relevant_environment()
    return out


def read_tensorflow():
    """What is in force in TensorFlow (Backend.read_back)."""
    import tensorflow as tf
    from tensorflow.python.framework import config as tf_config

    gpus = tf.config.get_visible_devices("GPU")
    logical = tf.config.list_logical_devices()
    intra = tf.config.threading.get_intra_op_parallelism_threads()
    inter = tf.config.threading.get_inter_op_parallelism_threads()
    try:
        from tensorflow.python.util import _pywrap_util_port

        onednn = bool(_pywrap_util_port.IsMklEnabled())
    except Exception:
        onednn = None
    try:
        auto_jit = tf.config.optimizer.get_jit()
    except Exception:
        auto_jit = None
    build = {k: v for k, v in tf.sysconfig.get_build_info().items() if isinstance(v, (str, bool, int))}
    return {
        "backend_version": tf.__version__,
        "device": "gpu" if gpus else "cpu",
        "devices": [d.name for d in logical],
        "gpu_count": len(gpus),
        "threads": intra or "auto",
        "interop_threads": inter or "auto",
        "deterministic": bool(tf_config.is_op_determinism_enabled()),
        # No switch exists: on a GPU cuDNN is always used, on a CPU never.
        "cudnn": True if gpus else None,
        "tf32": bool(tf.config.experimental.tensor_float_32_execution_enabled()),
        "tf32_applies": bool(gpus),
        "onednn": onednn,
        "autotune": bool(gpus) and os.environ.get("TF_CUDNN_USE_AUTOTUNE", "1").lower() not in ("0", "false"),
        "tf_auto_jit": auto_jit if isinstance(auto_jit, (str, bool)) else str(auto_jit),
        "build": build,
    }


def read_torch():
    """What is in force in torch (Backend.read_back)."""
    import torch

    gpu = torch.cuda.is_available()
    try:
        from keras.src.backend.torch.core import get_device

        keras_device = str(get_device())
    except Exception:
        keras_device = None
    conv_tf32 = bool(torch.backends.cudnn.allow_tf32)
    matmul_tf32 = bool(torch.backends.cuda.matmul.allow_tf32)
    out = {
        "backend_version": torch.__version__,
        "device": "gpu" if gpu and str(keras_device).startswith("cuda") else "cpu",
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if gpu else ["cpu"],
        "gpu_count": torch.cuda.device_count() if gpu else 0,
        "keras_device": keras_device,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "deterministic": bool(torch.are_deterministic_algorithms_enabled()),
        "cudnn": bool(torch.backends.cudnn.enabled),
        "cudnn_available": bool(torch.backends.cudnn.is_available()),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "autotune": gpu and bool(torch.backends.cudnn.benchmark),
        # torch's defaults differ by op: TF32 convolutions on, TF32 matmuls off.
        "tf32": conv_tf32 if conv_tf32 == matmul_tf32 else f"mixed (conv {conv_tf32}, matmul {matmul_tf32})",
        "tf32_conv": conv_tf32,
        "tf32_matmul": matmul_tf32,
        "tf32_applies": gpu,
        "onednn": bool(torch.backends.mkldnn.enabled),
        "onednn_available": bool(torch.backends.mkldnn.is_available()),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }
    for name, getter in (
        ("fp32_precision_matmul", lambda: torch.backends.cuda.matmul.fp32_precision),
        ("fp32_precision_conv", lambda: torch.backends.cudnn.conv.fp32_precision),
    ):
        try:
            out[name] = str(getter())
        except Exception:  # older torch without the fp32_precision API
            pass
    return out


def read_jax():
    """What is in force in JAX (Backend.read_back)."""
    import jax

    devices = jax.devices()
    gpus = [d for d in devices if d.platform in GPU_PLATFORMS]
    flags = os.environ.get("XLA_FLAGS", "")
    precision = jax.config.jax_default_matmul_precision
    eigen = xla_flag(flags, XLA_EIGEN_THREADS)
    return {
        "backend_version": jax.__version__,
        "device": "gpu" if gpus else "cpu",
        "devices": [f"{d.platform}:{d.id} {getattr(d, 'device_kind', '')}".strip() for d in devices],
        "gpu_count": len(gpus),
        "threads": available_cpus(),  # the CPU thread pool follows affinity
        "interop_threads": None,
        "eigen_multithread": eigen is None or truthy(eigen),
        # XLA parses XLA_FLAGS when it starts (and aborts on unknown flags), so the
        # process environment is what the compiler runs with.
        "deterministic": truthy(xla_flag(flags, XLA_DETERMINISTIC)),
        "cudnn": True if gpus else None,
        "matmul_precision": None if precision is None else str(precision),
        # JAX's default precision lets NVIDIA GPUs use TF32 for float32.
        "tf32": str(precision).lower() not in ("highest", "float32", "precision.highest"),
        "tf32_applies": bool(gpus),
        "onednn": None,
        # XLA's default level times candidates; level 0 takes its fixed choice.
        "autotune": bool(gpus) and xla_flag(flags, XLA_AUTOTUNE) not in ("0",),
        "platforms": jax.config.jax_platforms,
        "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
    }


def verify(config, effective):
    """Raises RuntimeSetupError listing every requested setting not in force.

    Settings left at None are not checked (their effective value is only
    recorded). A setting recorded as "not available" passes when the config is
    not strict.

    Args:
        config: the requested RuntimeConfig.
        effective: what `configure`/`read_back` returned.
    """
    mismatches = []

    def check(name, requested, key=None):
        actual = effective.get(key or name)
        if actual == NOT_AVAILABLE and not config.strict:
            return
        if actual != requested:
            mismatches.append(f"  {name}: requested {requested!r}, effective {actual!r}")

    check("backend", config.backend)
    check("device", config.device_kind)
    if config.gpu_index is not None and effective.get("device") == "gpu":
        check("gpu_count", 1)
    if config.threads is not None:
        check("threads", config.threads)
    if config.effective_interop_threads is not None:
        check("interop_threads", config.effective_interop_threads)
    check("deterministic", config.deterministic)
    if backends.named(config.backend).cudnn_switches:
        check("cudnn", config.cudnn)
        if config.deterministic:
            check("cudnn_deterministic", True)
            if config.autotune is None:
                check("cudnn_benchmark", False)
    elif not config.cudnn:
        check("cudnn", False)
    if config.tf32 is not None:
        check("tf32", config.tf32)
    if config.onednn is not None:
        check("onednn", config.onednn)
    if config.autotune is not None:
        check("autotune", config.autotune)
    check("precision", config.precision)
    if config.strict and effective.get("not_available"):
        mismatches.append(f"  not available (strict): {sorted(effective['not_available'])}")
    if mismatches:
        raise RuntimeSetupError(
            f"Requested settings did not take effect on {config.backend}:\n" + "\n".join(mismatches)
        )

