"""Run set-up: backend, device, CPU threads, determinism, cuDNN, TF32, oneDNN, XLA and the
numeric precision, applied before the framework starts, read back afterwards, and recorded.

Most of these switches are fixed when a framework is imported or first touches a
device, so a process can be configured once. The intended use is one process per
run:

    parent:  childproc.start(["-m", MODULE, ...], config)   # environment_for(config), no framework imported
    child:   effective = configure(config)            # first thing, before any model
             ...                                      # (or configure_from_environment())

`configure` refuses (RuntimeSetupError) when the process already runs a framework
with settings that can no longer change, applies the in-process switches, reads
back what is in force and refuses again if a requested setting did not take effect.
`fingerprint()` describes the machine and software for the run's manifest.

This module imports no framework at module level; it imports only the backend
being configured, and `fingerprint`/`read_back` look only at frameworks that are
already imported. See docs/runtime.md for what each switch means per backend.
"""

import dataclasses
import importlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

__all__ = [
    "BACKENDS",
    "NOT_AVAILABLE",
    "RECORDED_ENVIRONMENT",
    "RuntimeConfig",
    "RuntimeSetupError",
    "configure",
    "configure_from_environment",
    "environment_for",
    "fingerprint",
    "precision_problem",
    "read_back",
    "record",
    "relevant_environment",
    "unsupported_message",
    "unsupported_settings",
    "verify",
]

BACKENDS = ("tensorflow", "jax", "torch")
NOT_AVAILABLE = "not available"
# Keras dtype policies a run may ask for: float32 throughout, or float32 variables with
# bfloat16 convolutions (PredNet keeps its states, errors and loss in float32; see
# layers/lotter.py).
PRECISIONS = ("float32", "mixed_bfloat16")

# The environment variable through which a parent hands its RuntimeConfig to a child.
CONFIG_ENV = "PREDNET_RUNTIME_CONFIG"
# The CUDA_VISIBLE_DEVICES the first parent saw ("<unset>" when it had none), so that
# environment_for stays idempotent: "gpu:1" keeps meaning the second GPU of the
# original list even when the environment passes through it twice.
PARENT_CVD_ENV = "PREDNET_PARENT_CUDA_VISIBLE_DEVICES"
_UNSET = "<unset>"

# Managed XLA flags (removed from the inherited XLA_FLAGS, then set as the config says).
_XLA_DETERMINISTIC = "--xla_gpu_deterministic_ops"
_XLA_EIGEN_THREADS = "--xla_cpu_multi_thread_eigen"
_MANAGED_XLA_FLAGS = (_XLA_DETERMINISTIC, _XLA_EIGEN_THREADS)

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
    # which libraries load
    "LD_PRELOAD", "LD_LIBRARY_PATH",
)

_GPU_PLATFORMS = ("gpu", "cuda", "rocm")
_DEVICE_RE = re.compile(r"^(cpu|gpu|cuda)(?::(\d+))?$")

# One configuration per process; configure() remembers it.
_CONFIGURED = {"config": None, "effective": None}


class RuntimeSetupError(RuntimeError):
    """A run cannot be set up as requested (unsupported, too late, or not in force)."""


# --------------------------------------------------------------------------- config
@dataclass
class RuntimeConfig:
    """How one run process is set up.

    Args:
        backend: Keras backend, one of "tensorflow", "jax", "torch".
        device: "cpu", "gpu" (the GPUs the process may see; Keras uses the first)
            or "gpu:N" (only GPU N, numbered within the CUDA_VISIBLE_DEVICES of the
            process that calls environment_for). "cuda" and "cuda:N" are aliases.
        threads: CPU threads for compute (TensorFlow intra-op, torch
            set_num_threads, JAX CPU affinity); None leaves the backend's default.
        interop_threads: TensorFlow inter-op / torch interop threads; None means
            the same as `threads`. JAX has no such pool.
        deterministic: deterministic kernels (TensorFlow op determinism, torch
            deterministic algorithms, XLA --xla_gpu_deterministic_ops).
        cudnn: cuDNN on or off; off is real only on torch.
        tf32: TF32 for float32 convolutions and matrix products on NVIDIA GPUs;
            None keeps the backend's default (which differs between backends).
        onednn: oneDNN kernels on the CPU (TensorFlow TF_ENABLE_ONEDNN_OPTS, torch
            mkldnn); None keeps the default.
        strict: when True an unsupported setting is an error; when False it is
            recorded as "not available" and the run goes on.
        xla: the `jit_compile` the training code should pass to Keras (XLA on
            TensorFlow, one jitted step on JAX, torch.compile of the step on torch);
            None lets Keras choose, except that deterministic TensorFlow runs get
            False and torch runs eager.
        precision: the Keras dtype policy of every layer built in the process:
            "float32", or "mixed_bfloat16" (float32 weights, bfloat16 compute). Set
            in-process by `configure`, after a check that this backend and device
            can run bfloat16 convolutions. Independent of `tf32`, which says how
            float32 convolutions and products run on NVIDIA GPUs.
        devices: devices of this host to train on, data-parallel (Keras'
            DataParallel, set up by `distribution.configure` in the training
            process); more than 1 exists on JAX only (`distribution.request_problem`).
    """

    backend: str = "tensorflow"
    device: str = "cpu"
    threads: int | None = None
    deterministic: bool = False
    cudnn: bool = True
    tf32: bool | None = None
    onednn: bool | None = None
    strict: bool = True
    xla: bool | None = None
    interop_threads: int | None = None
    precision: str = "float32"
    devices: int = 1

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"Unknown backend {self.backend!r}: expected one of {list(BACKENDS)}.")
        device = str(self.device).strip().lower()
        match = _DEVICE_RE.match(device)
        if not match:
            raise ValueError(f"Unknown device {self.device!r}: expected 'cpu', 'gpu' or 'gpu:N'.")
        if match.group(1) == "cpu" and match.group(2) is not None:
            raise ValueError(f"Device {self.device!r}: a CPU run uses the whole CPU; use 'cpu' and `threads`.")
        kind = "cpu" if match.group(1) == "cpu" else "gpu"
        self.device = kind if match.group(2) is None else f"{kind}:{int(match.group(2))}"
        for name in ("threads", "interop_threads", "devices"):
            value = getattr(self, name)
            if value is None and name != "devices":
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"`{name}` must be a whole number >= 1{'' if name == 'devices' else ' or None'}, got {value!r}.")
            if value < 1:
                raise ValueError(f"`{name}` must be >= 1, got {value}.")
        for name in ("deterministic", "cudnn", "strict"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"`{name}` must be True or False, got {getattr(self, name)!r}.")
        for name in ("tf32", "onednn", "xla"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), bool):
                raise ValueError(f"`{name}` must be True, False or None, got {getattr(self, name)!r}.")
        if self.precision not in PRECISIONS:
            raise ValueError(f"Unknown precision {self.precision!r}: expected one of {', '.join(PRECISIONS)}.")

    @property
    def device_kind(self):
        """"cpu" or "gpu"."""
        return self.device.split(":")[0]

    @property
    def gpu_index(self):
        """N of "gpu:N", else None."""
        return int(self.device.split(":")[1]) if ":" in self.device else None

    @property
    def effective_interop_threads(self):
        """The inter-op thread count that will be requested (None: default)."""
        if self.backend == "jax":
            return self.interop_threads
        return self.interop_threads if self.interop_threads is not None else self.threads

    def to_dict(self):
        """A JSON-ready dict of the fields."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data):
        """The config a `to_dict` produced; unknown keys are an error.

        Args:
            data: mapping of field names to values.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"Unknown RuntimeConfig fields {unknown}; known: {sorted(known)}.")
        return cls(**data)


# ------------------------------------------------------------------ what is possible
def _available_cpus():
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def unsupported_settings(config, available_cpus=None):
    """The settings of `config` that its backend or device cannot honour.

    Pure except for reading this process's CPU affinity (JAX threads are set by
    pinning to CPUs, so there cannot be more threads than allowed CPUs).

    Args:
        config: a RuntimeConfig.
        available_cpus: CPUs this process may run on; default: read from the OS.

    Returns:
        dict of field name -> reason, empty when everything is supported.
    """
    problems = {}
    backend = config.backend
    if not config.cudnn and backend != "torch":
        problems["cudnn"] = (
            f"cuDNN cannot be switched off on {backend}: "
            + ("TensorFlow" if backend == "tensorflow" else "XLA")
            + " sends every GPU convolution to cuDNN. Only torch has a real cuDNN off."
        )
    if config.tf32 and config.device_kind == "cpu":
        problems["tf32"] = "TF32 is a mode of NVIDIA GPUs (Ampere and newer); a CPU run has none."
    if config.onednn is not None and backend == "jax":
        problems["onednn"] = "JAX (XLA:CPU) has no oneDNN switch; oneDNN is a TensorFlow and torch option."
    if config.interop_threads is not None and backend == "jax":
        problems["interop_threads"] = "JAX has no inter-op thread pool to size."
    if config.threads is not None and backend == "jax":
        if not hasattr(os, "sched_setaffinity"):
            problems["threads"] = "JAX threads are set through CPU affinity, which this OS does not offer."
        else:
            cpus = _available_cpus() if available_cpus is None else available_cpus
            if config.threads > cpus:
                problems["threads"] = (
                    f"JAX threads are set by pinning the process to CPUs; only {cpus} "
                    f"CPU(s) are available, {config.threads} requested."
                )
    if config.xla and config.deterministic and backend == "tensorflow":
        problems["xla"] = (
            "XLA with TensorFlow op determinism: not every op is deterministic under XLA "
            "(Keras itself turns XLA off when op determinism is on)."
        )
    return problems


def unsupported_message(config, problems):
    """The error text for unsupported settings in strict mode.

    Args:
        config: the RuntimeConfig.
        problems: what `unsupported_settings` returned.
    """
    return (
        f"Unsupported on {config.backend} / {config.device} (strict; with strict=False, or "
        "--no-strict, they are recorded as 'not available' instead):\n"
        + "\n".join(f"  {k}: {v}" for k, v in problems.items())
    )


def _jit_compile_for(config, problems):
    """The Keras `jit_compile` argument that matches the config."""
    if config.xla is not None and "xla" not in problems:
        return config.xla
    if config.backend == "tensorflow" and config.deterministic:
        return False
    if config.backend == "torch":
        # Keras' own choice too: torch.compile only when asked for.
        return False
    return "auto"


# ------------------------------------------------------------------------ environment
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

    if backend == "jax":
        # Naming the platform makes a missing GPU an error instead of a CPU fallback.
        env["JAX_PLATFORMS"] = "cpu" if config.device_kind == "cpu" else "cuda"
        # Several runs may share one GPU; JAX would otherwise take most of its memory.
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if backend == "torch":
        env["KERAS_TORCH_DEVICE"] = "cpu" if config.device_kind == "cpu" else "cuda"
    if backend == "tensorflow" and config.device_kind == "gpu":
        env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"

    # Threads: the API calls in configure() are what counts for TensorFlow and
    # torch; the variables also bound OpenMP/BLAS pools that start before them.
    if config.threads is not None:
        for name in _THREAD_VARS:
            env[name] = str(config.threads)
        if backend == "tensorflow":
            env["TF_NUM_INTRAOP_THREADS"] = str(config.threads)
            env["TF_NUM_INTEROP_THREADS"] = str(config.effective_interop_threads)

    # Determinism.
    if backend == "tensorflow":
        # For the record: configure() uses enable_op_determinism(), the modern form.
        env["TF_DETERMINISTIC_OPS"] = "1" if config.deterministic else "0"
    if backend == "torch":
        if config.deterministic:
            # cuBLAS needs a fixed workspace to be deterministic.
            env["CUBLAS_WORKSPACE_CONFIG"] = _CUBLAS_DETERMINISTIC
        else:
            env.pop("CUBLAS_WORKSPACE_CONFIG", None)
    if backend == "jax":
        flags = [t for t in _split_flags(base.get("XLA_FLAGS")) if _flag_name(t) not in _MANAGED_XLA_FLAGS]
        if config.deterministic:
            flags.append(f"{_XLA_DETERMINISTIC}=true")
        if config.threads == 1:
            # Affinity sizes the thread pool; this keeps Eigen from splitting work too.
            flags.append(f"{_XLA_EIGEN_THREADS}=false")
        if flags:
            env["XLA_FLAGS"] = " ".join(flags)
        else:
            env.pop("XLA_FLAGS", None)

    if backend == "tensorflow" and config.onednn is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = "1" if config.onednn else "0"
    return env


def relevant_environment(env=None):
    """The variables of RECORDED_ENVIRONMENT that are set: how a framework computes here.

    Args:
        env: mapping to filter; default os.environ.
    """
    env = os.environ if env is None else env
    return {key: env[key] for key in sorted(RECORDED_ENVIRONMENT) if key in env}


# ------------------------------------------------------------------------- configure
def _jax_initialised():
    """Whether JAX has already created its device backends (then flags are fixed)."""
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge

        return bool(getattr(xla_bridge, "_backends", {}))
    except Exception:  # private API moved: assume the worst
        return True


def _check_process_state(config, target, changed):
    """Raises when this process already runs a framework the config cannot reach."""
    keras = sys.modules.get("keras")
    if keras is not None:
        try:
            active = keras.backend.backend()
        except Exception:  # partially imported keras
            active = os.environ.get("KERAS_BACKEND")
        if active != config.backend:
            raise RuntimeSetupError(
                f"Keras is already imported with the {active} backend; this process cannot "
                f"switch to {config.backend}. Start a fresh process with environment_for(config)."
            )
    framework = config.backend
    late = [key for key in changed if key != "KERAS_BACKEND" and not key.startswith("PREDNET_")]
    if framework in sys.modules and late:
        details = ", ".join(
            f"{key}: {os.environ.get(key)!r} -> {target.get(key)!r}" for key in late
        )
        raise RuntimeSetupError(
            f"{framework} is already imported, and it reads these environment variables when it "
            f"starts, so they can no longer change: {details}. Start the run in a fresh process "
            f"whose environment comes from environment_for(config)."
        )
    if config.backend == "jax" and config.threads is not None and _jax_initialised():
        raise RuntimeSetupError(
            "JAX has already created its devices; CPU affinity (how JAX threads are set) must be "
            "applied before that. Configure at the very start of the process."
        )


def _pin_cpus(count):
    """Pins every thread of this process to the first `count` allowed CPUs.

    Threads created earlier (BLAS pools started by numpy) are pinned too, since
    sched_setaffinity(0) only covers the calling thread and its future children.
    """
    allowed = sorted(os.sched_getaffinity(0))
    chosen = set(allowed[:count])
    try:
        tasks = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tasks = []
    for tid in tasks:
        try:
            os.sched_setaffinity(tid, chosen)
        except OSError:  # a thread that ended meanwhile
            pass
    os.sched_setaffinity(0, chosen)
    return sorted(chosen)


def _apply_tensorflow(config):
    import tensorflow as tf

    try:
        if config.device_kind == "cpu":
            tf.config.set_visible_devices([], "GPU")
        else:
            gpus = tf.config.list_physical_devices("GPU")
            if not gpus:
                cuda_build = tf.sysconfig.get_build_info().get("is_cuda_build", False)
                raise RuntimeSetupError(
                    f"Device {config.device} requested but TensorFlow sees no GPU "
                    f"(CUDA build: {cuda_build}; CUDA_VISIBLE_DEVICES="
                    f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}). Refusing to run on the CPU instead. "
                    + _NO_GPU_ADVICE["tensorflow"]
                )
            for gpu in gpus:
                tf.config.experimental.set_memory_growth(gpu, True)
        if config.threads is not None:
            tf.config.threading.set_intra_op_parallelism_threads(config.threads)
        if config.effective_interop_threads is not None:
            tf.config.threading.set_inter_op_parallelism_threads(config.effective_interop_threads)
    except RuntimeError as error:
        if isinstance(error, RuntimeSetupError):
            raise
        raise RuntimeSetupError(
            f"TensorFlow has already started its runtime, so devices and threads are fixed: {error}. "
            "Configure at the very start of the process."
        ) from None

    from tensorflow.python.framework import config as tf_config

    if config.deterministic:
        tf_config.enable_op_determinism()
    else:
        tf_config.disable_op_determinism()
    if config.tf32 is not None:
        tf.config.experimental.enable_tensor_float_32_execution(config.tf32)


def _apply_torch(config):
    import torch

    if config.threads is not None:
        torch.set_num_threads(config.threads)
    if config.effective_interop_threads is not None:
        try:
            torch.set_num_interop_threads(config.effective_interop_threads)
        except RuntimeError as error:
            raise RuntimeSetupError(
                f"torch has already run parallel work, so its interop threads are fixed: {error}. "
                "Configure at the very start of the process."
            ) from None
    torch.use_deterministic_algorithms(config.deterministic)
    torch.backends.cudnn.deterministic = config.deterministic
    if config.deterministic:
        # Autotuning picks kernels by timing, which differs from run to run.
        torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.enabled = config.cudnn
    if config.tf32 is not None:
        torch.backends.cudnn.allow_tf32 = config.tf32
        torch.backends.cuda.matmul.allow_tf32 = config.tf32
    if config.onednn is not None:
        torch.backends.mkldnn.enabled = config.onednn
    if config.device_kind == "gpu" and not torch.cuda.is_available():
        raise RuntimeSetupError(
            f"Device {config.device} requested but torch sees no GPU (torch {torch.__version__}, "
            f"CUDA {torch.version.cuda}; CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}). Refusing to run on the CPU instead. "
            + _NO_GPU_ADVICE["torch"]
        )


def _apply_jax(config):
    import jax

    if config.tf32 is not None:
        # Applies to convolutions as well as matrix products (both take `precision`).
        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if config.tf32 else "highest")
    try:
        devices = jax.devices()
    except Exception as error:  # no CUDA plugin or no GPU: RuntimeError or AssertionError
        raise RuntimeSetupError(
            f"JAX could not start the {os.environ.get('JAX_PLATFORMS')!r} platform for device "
            f"{config.device}: {type(error).__name__}: {error}. Refusing to run elsewhere. "
            + (_NO_GPU_ADVICE["jax"] if config.device_kind == "gpu" else "")
        ) from None
    if config.device_kind == "gpu" and not any(d.platform in _GPU_PLATFORMS for d in devices):
        raise RuntimeSetupError(
            f"Device {config.device} requested but JAX sees only {[str(d) for d in devices]}. "
            + _NO_GPU_ADVICE["jax"]
        )


def _apply_precision(keras, config):
    """Sets the Keras dtype policy of `config`; returns why it cannot run here, or None.

    The policy is always set, float32 included, so that a policy left over in the
    process cannot change a float32 run. When bfloat16 cannot run, the policy goes
    back to float32.
    """
    keras.config.set_dtype_policy(config.precision)
    problem = precision_problem(config.precision, config.device_kind)
    if problem is None:
        return None
    keras.config.set_dtype_policy("float32")
    return f"precision {config.precision} is not available on {config.backend} / {config.device}: {problem}."


def precision_problem(precision, device_kind=None):
    """Why `precision` cannot run on this process's Keras backend and device, or None.

    bfloat16 is tried for real: a convolution on the backend's default device must
    return bfloat16; a GPU must also have bfloat16 arithmetic (compute capability
    8.0 or newer). Imports Keras.

    Args:
        precision: one of PRECISIONS.
        device_kind: "cpu" or "gpu"; None: read back from the backend.
    """
    if precision == "float32":
        return None
    keras = importlib.import_module("keras")
    backend = keras.backend.backend()
    if (device_kind or read_back()["device"]) == "gpu":
        problem = _bf16_gpu_problem(backend)
        if problem is not None:
            return problem
    try:
        ops = keras.ops
        x = ops.ones((1, 4, 4, 2), dtype="bfloat16")
        y = ops.conv(x, ops.ones((3, 3, 2, 2), dtype="bfloat16"), padding="same")
        got = keras.backend.standardize_dtype(y.dtype)
    except Exception as error:  # the backend's own refusal, whatever its type
        return f"a bfloat16 convolution failed: {type(error).__name__}: {' '.join(str(error).split())[:300]}"
    return None if got == "bfloat16" else f"a bfloat16 convolution returned {got}"


def _bf16_gpu_problem(backend):
    """Why the GPU cannot compute in bfloat16 (compute capability below 8.0), or None."""
    capability = _gpu_capability(backend)
    if capability is not None and capability < (8, 0):
        return (
            f"the GPU has compute capability {capability[0]}.{capability[1]}; bfloat16 arithmetic needs 8.0 "
            "(Ampere) or newer"
        )
    return None


def _gpu_capability(backend):
    """(major, minor) of the first GPU the backend uses, or None when it does not say."""
    try:
        if backend == "torch":
            import torch

            return tuple(torch.cuda.get_device_capability(0))
        if backend == "jax":
            import jax

            text = getattr(jax.devices()[0], "compute_capability", None)
            return tuple(int(v) for v in str(text).split(".")[:2]) if text else None
        if backend == "tensorflow":
            import tensorflow as tf

            details = tf.config.experimental.get_device_details(tf.config.get_visible_devices("GPU")[0])
            return tuple(details["compute_capability"]) if details.get("compute_capability") else None
    except Exception:  # no such device information: the convolution probe decides
        return None
    return None


def _bf16_support(device):
    """How this machine computes bfloat16: recorded beside a mixed precision."""
    if device == "gpu":
        return "GPU"
    cpuinfo = _read_text("/proc/cpuinfo") or ""
    flags = set((re.findall(r"^flags\s*:\s*(.+)$", cpuinfo, re.M) or [""])[0].split())
    native = [name for flag, name in (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512-BF16")) if flag in flags]
    if native:
        return "CPU with bfloat16 instructions (" + ", ".join(native) + ")"
    return "CPU without bfloat16 instructions: converted to and from float32, often slower than float32"


# What to do when a GPU was asked for and the backend sees none.
_NO_GPU_ADVICE = {
    "tensorflow": (
        "To train on a GPU, install TensorFlow with CUDA (pip install 'tensorflow[and-cuda]' on Linux with an "
        "NVIDIA driver) or use --backend jax / --backend torch with their CUDA builds; or drop --device gpu "
        "to train on the CPU."
    ),
    "torch": (
        "To train on a GPU, install a CUDA build of PyTorch (see pytorch.org for the pip command that matches "
        "your driver) or use --backend jax; or drop --device gpu to train on the CPU."
    ),
    "jax": (
        "To train on a GPU, install JAX with CUDA (pip install -U 'jax[cuda13]', or 'jax[cuda12]' for an older "
        "driver) or use --backend torch; or drop --device gpu to train on the CPU."
    ),
}

_APPLY = {"tensorflow": _apply_tensorflow, "jax": _apply_jax, "torch": _apply_torch}


def configure(config, check=True):
    """Sets up this process for `config`. Call it before building any model.

    Order: refuse unsupported settings (strict) and a process whose framework
    already started with other settings; set the environment; pin CPUs (JAX
    threads); import the backend; apply the in-process switches; check the
    device; read back; verify.

    Args:
        config: a RuntimeConfig.
        check: run `verify` on the result (refuse to start when a requested
            setting did not take effect).

    Returns:
        the effective settings (see `read_back`), plus "jit_compile" (the value
        to pass to Keras' compile), "cpu_ids" when CPUs were pinned, and
        "not_available" {field: reason} for settings recorded as not available.

    Raises:
        RuntimeSetupError: see above; also when the process was configured before
            with a different config.
    """
    if _CONFIGURED["config"] is not None:
        if _CONFIGURED["config"] == config:
            return dict(_CONFIGURED["effective"])
        raise RuntimeSetupError(
            f"This process was already configured with {_CONFIGURED['config']}; a process can "
            "be configured once. Start a fresh process for another configuration."
        )
    problems = unsupported_settings(config)
    if problems and config.strict:
        raise RuntimeSetupError(unsupported_message(config, problems))
    try:
        target = environment_for(config, os.environ)
    except ValueError as error:
        raise RuntimeSetupError(str(error)) from None
    changed = sorted(k for k in set(target) | set(os.environ) if target.get(k) != os.environ.get(k))
    _check_process_state(config, target, changed)
    for key in changed:
        if key in target:
            os.environ[key] = target[key]
        else:
            os.environ.pop(key, None)

    cpu_ids = None
    if config.backend == "jax" and config.threads is not None and "threads" not in problems:
        cpu_ids = _pin_cpus(config.threads)

    keras = importlib.import_module("keras")
    if keras.backend.backend() != config.backend:
        raise RuntimeSetupError(
            f"Keras started with the {keras.backend.backend()} backend instead of {config.backend}."
        )
    _APPLY[config.backend](config)
    precision_problem = _apply_precision(keras, config)
    effective = read_back()
    if config.device_kind == "cpu" and effective.get("device") != "cpu":
        raise RuntimeSetupError(
            f"A CPU run was requested but {config.backend} still sees {effective.get('devices')}."
        )
    effective["jit_compile"] = _jit_compile_for(config, problems)
    if cpu_ids is not None:
        effective["cpu_ids"] = cpu_ids
    if precision_problem is not None:
        if config.strict:
            raise RuntimeSetupError(precision_problem)
        problems["precision"] = precision_problem
    effective["not_available"] = dict(problems)
    for key in problems:
        effective[key] = NOT_AVAILABLE
    if check:
        verify(config, effective)
    _CONFIGURED["config"] = config
    _CONFIGURED["effective"] = dict(effective)
    return effective


def configure_from_environment(check=True):
    """`configure` with the RuntimeConfig a parent put in the environment.

    Args:
        check: as in `configure`.

    Returns:
        (config, effective settings).
    """
    text = os.environ.get(CONFIG_ENV)
    if not text:
        raise RuntimeSetupError(
            f"{CONFIG_ENV} is not set: start this process with environment_for(config) (childproc.start does)."
        )
    config = RuntimeConfig.from_dict(json.loads(text))
    return config, configure(config, check=check)


def record(config, effective):
    """What a run manifest should keep about its set-up.

    Args:
        config: the requested RuntimeConfig.
        effective: what `configure` returned.
    """
    return {"requested": config.to_dict(), "effective": effective, "fingerprint": fingerprint()}


# ------------------------------------------------------------------------- read back
def _xla_flag(flags_text, name):
    """Value of --name in an XLA_FLAGS string ("true" for a bare flag), else None."""
    value = None
    for token in _split_flags(flags_text):
        if _flag_name(token) == name:
            value = token.split("=", 1)[1] if "=" in token else "true"
    return value


def _truthy(value):
    return value is not None and value.strip().lower() in ("1", "true", "yes")


def read_back():
    """What is actually in force in this process, queried from the active backend.

    Imports Keras (and with it the backend its environment names) if needed; call
    it after `configure`.

    Returns:
        a JSON-ready dict. Keys common to every backend: backend, backend_version,
        keras_version, device ("cpu" or "gpu"), devices, gpu_count, threads,
        interop_threads, cpu_affinity, deterministic, cudnn, tf32, onednn,
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
        "cpu_affinity": _available_cpus(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    out.update({"tensorflow": _read_tensorflow, "jax": _read_jax, "torch": _read_torch}[backend]())
    out["precision"] = keras.config.dtype_policy().name
    if out["precision"] != "float32":
        out["bf16_support"] = _bf16_support(out.get("device"))
    out["environment"] = relevant_environment()
    return out


def _read_tensorflow():
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
        "tf_auto_jit": auto_jit if isinstance(auto_jit, (str, bool)) else str(auto_jit),
        "build": build,
    }


def _read_torch():
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


def _read_jax():
    import jax

    devices = jax.devices()
    gpus = [d for d in devices if d.platform in _GPU_PLATFORMS]
    flags = os.environ.get("XLA_FLAGS", "")
    precision = jax.config.jax_default_matmul_precision
    eigen = _xla_flag(flags, _XLA_EIGEN_THREADS)
    return {
        "backend_version": jax.__version__,
        "device": "gpu" if gpus else "cpu",
        "devices": [f"{d.platform}:{d.id} {getattr(d, 'device_kind', '')}".strip() for d in devices],
        "gpu_count": len(gpus),
        "threads": _available_cpus(),  # the CPU thread pool follows affinity
        "interop_threads": None,
        "eigen_multithread": eigen is None or _truthy(eigen),
        # XLA parses XLA_FLAGS when it starts (and aborts on unknown flags), so the
        # process environment is what the compiler runs with.
        "deterministic": _truthy(_xla_flag(flags, _XLA_DETERMINISTIC)),
        "cudnn": True if gpus else None,
        "matmul_precision": None if precision is None else str(precision),
        # JAX's default precision lets NVIDIA GPUs use TF32 for float32.
        "tf32": str(precision).lower() not in ("highest", "float32", "precision.highest"),
        "tf32_applies": bool(gpus),
        "onednn": None,
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
    if config.backend == "torch":
        check("cudnn", config.cudnn)
        if config.deterministic:
            check("cudnn_deterministic", True)
            check("cudnn_benchmark", False)
    elif not config.cudnn:
        check("cudnn", False)
    if config.tf32 is not None:
        check("tf32", config.tf32)
    if config.onednn is not None:
        check("onednn", config.onednn)
    check("precision", config.precision)
    if config.strict and effective.get("not_available"):
        mismatches.append(f"  not available (strict): {sorted(effective['not_available'])}")
    if mismatches:
        raise RuntimeSetupError(
            f"Requested settings did not take effect on {config.backend}:\n" + "\n".join(mismatches)
        )


# ----------------------------------------------------------------------- fingerprint
def _read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return None


def _cpu_info():
    info = {
        "machine": platform.machine(),
        "logical_cores": os.cpu_count(),
        "available_cores": _available_cpus(),
    }
    cpuinfo = _read_text("/proc/cpuinfo")
    if cpuinfo:
        models = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
        info["model"] = models[0].strip() if models else platform.processor()
        cores = set()
        physical = core = None
        for line in cpuinfo.splitlines() + [""]:
            if line.startswith("physical id"):
                physical = line.split(":", 1)[1].strip()
            elif line.startswith("core id"):
                core = line.split(":", 1)[1].strip()
            elif not line.strip():
                if core is not None:
                    cores.add((physical, core))
                physical = core = None
        if cores:
            info["physical_cores"] = len(cores)
        flags = re.findall(r"^flags\s*:\s*(.+)$", cpuinfo, re.M)
        if flags:
            present = set(flags[0].split())
            info["simd"] = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16") if f in present]
    else:
        info["model"] = platform.processor() or None
    quota = _read_text("/sys/fs/cgroup/cpu.max")
    if quota:
        parts = quota.split()
        if len(parts) == 2 and parts[0] != "max":
            info["cgroup_cpu_limit"] = round(int(parts[0]) / int(parts[1]), 2)
    meminfo = _read_text("/proc/meminfo")
    if meminfo:
        match = re.search(r"^MemTotal:\s*(\d+) kB", meminfo, re.M)
        if match:
            info["memory_gib"] = round(int(match.group(1)) / 2**20, 1)
    return info


def _nvidia_smi():
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    out = {"path": exe}
    fields = ["index", "name", "driver_version", "memory.total", "compute_cap", "uuid"]
    for attempt in (fields, fields[:4]):  # old drivers lack compute_cap
        try:
            result = subprocess.run(
                [exe, f"--query-gpu={','.join(attempt)}", "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=20,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            out["error"] = str(error)
            return out
        if result.returncode == 0:
            out["gpus"] = [
                dict(zip(attempt, (v.strip() for v in line.split(","))))
                for line in result.stdout.strip().splitlines() if line.strip()
            ]
            break
        out["error"] = (result.stderr or result.stdout).strip()[-500:]
    try:
        text = subprocess.run([exe], capture_output=True, text=True, timeout=20).stdout
        match = re.search(r"CUDA Version:\s*([\d.]+)", text)
        if match:
            out["cuda_driver_version"] = match.group(1)
    except (OSError, subprocess.TimeoutExpired):
        pass
    return out


def _installed_versions():
    names = [
        "prednet-keras", "keras", "numpy", "h5py", "ml-dtypes", "tensorflow", "tensorflow-cpu",
        "jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda12-pjrt",
        "jax-cuda13-pjrt", "torch", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13",
    ]
    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def _blas_info():
    info = {}
    numpy = sys.modules.get("numpy") or importlib.import_module("numpy")
    try:
        config = numpy.show_config(mode="dicts")
        blas = config.get("Build Dependencies", {}).get("blas", {})
        info = {k: blas.get(k) for k in ("name", "version", "openblas configuration") if blas.get(k)}
    except Exception as error:  # numpy < 1.25
        info = {"error": str(error)}
    try:
        import threadpoolctl

        info["threadpools"] = [
            {k: p.get(k) for k in ("internal_api", "version", "num_threads", "threading_layer")}
            for p in threadpoolctl.threadpool_info()
        ]
    except ImportError:
        pass
    return info


def _framework_gpu_info():
    """GPU facts from the frameworks already imported and configured in this process."""
    info = {}
    if _CONFIGURED["config"] is None:
        # Asking a framework about devices starts it; before configure() that
        # would fix its settings, so only configured processes ask.
        return info
    backend = _CONFIGURED["config"].backend
    try:
        if backend == "torch":
            import torch

            torch_info = {"cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
            if torch.cuda.is_available():
                torch_info["devices"] = [
                    {"name": torch.cuda.get_device_name(i),
                     "capability": ".".join(map(str, torch.cuda.get_device_capability(i)))}
                    for i in range(torch.cuda.device_count())
                ]
            info["torch"] = torch_info
        elif backend == "jax":
            import jax

            jax_info = {"devices": [f"{d.platform}:{d.id} {getattr(d, 'device_kind', '')}".strip() for d in jax.devices()]}
            try:
                from jax._src.lib import cuda_versions

                if cuda_versions is not None:
                    jax_info["cudnn"] = cuda_versions.cudnn_get_version()
                    jax_info["cuda_runtime"] = cuda_versions.cuda_runtime_get_version()
            except Exception:
                pass
            info["jax"] = jax_info
        elif backend == "tensorflow":
            import tensorflow as tf

            build = tf.sysconfig.get_build_info()
            tf_info = {"cuda": build.get("cuda_version"), "cudnn": build.get("cudnn_version")}
            tf_info["devices"] = []
            for gpu in tf.config.get_visible_devices("GPU"):
                try:
                    tf_info["devices"].append({k: str(v) for k, v in tf.config.experimental.get_device_details(gpu).items()})
                except Exception:
                    tf_info["devices"].append({"name": gpu.name})
            info["tensorflow"] = tf_info
    except Exception as error:
        info["error"] = f"{type(error).__name__}: {error}"
    return info


def fingerprint():
    """The machine and software a run executes on.

    Imports no framework: versions come from package metadata, GPU details from
    nvidia-smi and, after `configure`, from the active backend.

    Returns:
        a JSON-ready dict with keys os, cpu, gpu, python, packages, keras_backend,
        blas, environment.
    """
    gpu = {"nvidia_smi": _nvidia_smi()}
    gpu.update(_framework_gpu_info())
    keras = sys.modules.get("keras")
    active = None
    if keras is not None:
        try:
            active = keras.backend.backend()
        except Exception:
            active = None
    return {
        "os": {
            "system": platform.system(),
            "release": platform.release(),
            "platform": platform.platform(),
            "hostname": platform.node(),
            "libc": " ".join(platform.libc_ver()).strip() or None,
        },
        "cpu": _cpu_info(),
        "gpu": gpu,
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "packages": _installed_versions(),
        "keras_backend": active or os.environ.get("KERAS_BACKEND"),
        "imported_frameworks": [name for name in BACKENDS if name in sys.modules],
        "blas": _blas_info(),
        "environment": relevant_environment(),
    }
