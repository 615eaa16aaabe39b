"""The environment a run's child process needs before it imports its framework (environment_for), the
variables recorded with a run (RECORDED_ENVIRONMENT), and the XLA_FLAGS helpers. No framework at import."""

import json
import os

from prednet_keras import backends

# The environment variable through which a parent hands its RuntimeConfig to a child.
CONFIG_ENV = "PREDNET_RUNTIME_CONFIG"
# The CUDA_VISIBLE_DEVICES the first parent saw ("<unset>" when it had none), so that
# environment_for stays idempotent: "gpu:1" keeps meaning the second GPU of the
# original list even when the environment passes through it twice.
PARENT_CVD_ENV = "PREDNET_PARENT_CUDA_VISIBLE_DEVICES"
_UNSET = "<unset>"

# Managed XLA flags (removed from the inherited XLA_FLAGS, then set as the config says).
XLA_DETERMINISTIC = "--xla_gpu_deterministic_ops"
XLA_EIGEN_THREADS = "--xla_cpu_multi_thread_eigen"
# Managed only when the config says (autotune None keeps a user's own level).
XLA_AUTOTUNE = "--xla_gpu_autotune_level"
_MANAGED_XLA_FLAGS = (XLA_DETERMINISTIC, XLA_EIGEN_THREADS)

_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_CUBLAS_DETERMINISTIC = ":4096:8"

# The environment variables recorded with a run: those that change how a framework
# computes or where it runs, by exact name. An allowlist, never a prefix: "TF_"
# also matches Terraform's TF_TOKEN_* credentials, and run folders get shared.
RECORDED_ENVIRONMENT = (
    # backend and placement
    "KERAS_BACKEND", "KERAS_TORCH_DEVICE", "JAX_PLATFORMS", "JAX_PLATFORM_NAME",
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES", PARENT_CVD_ENV,
    # threads
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY",
    "KMP_BLOCKTIME", "MKL_DYNAMIC",
    # determinism and precision
    "TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC", "CUBLAS_WORKSPACE_CONFIG", "PYTHONHASHSEED",
    "NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "JAX_DEFAULT_MATMUL_PRECISION",
    "JAX_ENABLE_X64", "TF_ENABLE_AUTO_MIXED_PRECISION",
    # kernels, compilers and memory
    "XLA_FLAGS", "TF_XLA_FLAGS", "TF_ENABLE_ONEDNN_OPTS", "TF_CUDNN_USE_AUTOTUNE",
    "TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_ALLOCATOR", "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR", "PYTORCH_CUDA_ALLOC_CONF",
    "TORCHINDUCTOR_CUDAGRAPHS", "TORCHINDUCTOR_CACHE_DIR",
    "JAX_COMPILATION_CACHE_DIR", "JAX_COMPILATION_CACHE_MAX_SIZE",
    # the model's own opt-in computation (layers/channel_alignment.py: padded convolution inputs)
    "PREDNET_CHANNEL_MULTIPLE",
    # sharing the GPU: CUDA's Multi-Process Service (a client with the pipe folder set joins its server)
    "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
    # which libraries load
    "LD_PRELOAD", "LD_LIBRARY_PATH",
)


def _split_flags(text):
    return [token for token in (text or "").split() if token]


def _flag_name(token):
    return token.split("=", 1)[0]


def _parent_visible_devices(base):
    if PARENT_CVD_ENV in base:
        value = base[PARENT_CVD_ENV]
        return None if value == _UNSET else value
    return base.get("CUDA_VISIBLE_DEVICES")


def environment_for(config, base_env=None):
    """The environment a child process needs before it imports the framework.

    Settings left at None inherit what `base_env` says (a user's OMP_NUM_THREADS
    or TF_ENABLE_ONEDNN_OPTS stays; the effective value is read back and recorded
    anyway). Switches that are True/False are always written out explicitly, so an
    inherited variable cannot silently flip them. Calling it on its own output gives
    the same output.

    Args:
        config: a RuntimeConfig.
        base_env: the environment to start from; default os.environ (not changed).

    Returns:
        a new dict of environment variables.

    Raises:
        ValueError: "gpu:N" names a GPU the inherited CUDA_VISIBLE_DEVICES does not list.
    """
    from prednet_keras._backend_choice import require_backend

    require_backend(config.backend)
    base = dict(os.environ if base_env is None else base_env)
    env = dict(base)
    backend = config.backend
    env["KERAS_BACKEND"] = backend
    env[CONFIG_ENV] = json.dumps(config.to_dict(), sort_keys=True)

    # Devices. Hiding GPUs is what makes a CPU run a CPU run on every backend
    # (Keras on torch and TensorFlow would otherwise pick a visible GPU).
    parent_cvd = _parent_visible_devices(base)
    env[PARENT_CVD_ENV] = _UNSET if parent_cvd is None else parent_cvd
    if config.device_kind == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    elif config.gpu_index is None:
        if parent_cvd is None:
            env.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            env["CUDA_VISIBLE_DEVICES"] = parent_cvd
    else:
        if parent_cvd is None:
            env["CUDA_VISIBLE_DEVICES"] = str(config.gpu_index)
        else:
            listed = [d.strip() for d in parent_cvd.split(",") if d.strip()]
            if config.gpu_index >= len(listed):
                raise ValueError(
                    f"Device {config.device} requested but CUDA_VISIBLE_DEVICES={parent_cvd!r} "
                    f"exposes {len(listed)} GPU(s)."
                )
            env["CUDA_VISIBLE_DEVICES"] = listed[config.gpu_index]

    # Threads: the API calls in configure() are what counts for TensorFlow and
    # torch; the variables also bound OpenMP/BLAS pools that start before them.
    if config.threads is not None:
        for name in _THREAD_VARS:
            env[name] = str(config.threads)
    # The backend's own: placement, threads, determinism, kernels.
    backends.named(backend).environment(config, env, base)
    return env


def tensorflow_environment(config, env, base):
    """TensorFlow's variables in the child's environment `env` (Backend.environment)."""
    if config.device_kind == "gpu":
        env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
    if config.threads is not None:
        env["TF_NUM_INTRAOP_THREADS"] = str(config.threads)
        env["TF_NUM_INTEROP_THREADS"] = str(config.effective_interop_threads)
    # For the record: configure() uses enable_op_determinism(), the modern form.
    env["TF_DETERMINISTIC_OPS"] = "1" if config.deterministic else "0"
    if config.autotune is not None:
        env["TF_CUDNN_USE_AUTOTUNE"] = "1" if config.autotune else "0"
    if config.onednn is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = "1" if config.onednn else "0"


def torch_environment(config, env, base):
    """torch's variables in the child's environment `env` (Backend.environment)."""
    from prednet_keras.runtime import compile_cache

    env["KERAS_TORCH_DEVICE"] = "cpu" if config.device_kind == "cpu" else "cuda"
    env.update(compile_cache.inductor_environment(config, base))
    if config.deterministic:
        # cuBLAS needs a fixed workspace to be deterministic.
        env["CUBLAS_WORKSPACE_CONFIG"] = _CUBLAS_DETERMINISTIC
    else:
        env.pop("CUBLAS_WORKSPACE_CONFIG", None)


def jax_environment(config, env, base):
    """JAX's variables in the child's environment `env`, its XLA_FLAGS made from `base`'s (Backend.environment)."""
    # Naming the platform makes a missing GPU an error instead of a CPU fallback.
    env["JAX_PLATFORMS"] = "cpu" if config.device_kind == "cpu" else "cuda"
    # Several runs may share one GPU; JAX would otherwise take most of its memory.
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    managed = _MANAGED_XLA_FLAGS + ((XLA_AUTOTUNE,) if config.autotune is not None else ())
    flags = [t for t in _split_flags(base.get("XLA_FLAGS")) if _flag_name(t) not in managed]
    if config.deterministic:
        flags.append(f"{XLA_DETERMINISTIC}=true")
    if config.autotune is False:
        # Level 0: XLA's fixed choice of algorithms, nothing timed (True: its default level, which times).
        flags.append(f"{XLA_AUTOTUNE}=0")
    if config.threads == 1:
        # Affinity sizes the thread pool; this keeps Eigen from splitting work too.
        flags.append(f"{XLA_EIGEN_THREADS}=false")
    if flags:
        env["XLA_FLAGS"] = " ".join(flags)
    else:
        env.pop("XLA_FLAGS", None)


def relevant_environment(env=None):
    """The variables of RECORDED_ENVIRONMENT that are set: how a framework computes here.

    Args:
        env: mapping to filter; default os.environ.
    """
    env = os.environ if env is None else env
    return {key: env[key] for key in sorted(RECORDED_ENVIRONMENT) if key in env}


def xla_flag(flags_text, name):
    """Value of --name in an XLA_FLAGS string ("true" for a bare flag), else None."""
    value = None
    for token in _split_flags(flags_text):
        if _flag_name(token) == name:
            value = token.split("=", 1)[1] if "=" in token else "true"
    return value


def truthy(value):
    """Whether an environment variable's value says yes ("1", "true", "yes")."""
    return value is not None and value.strip().lower() in ("1", "true", "yes")
