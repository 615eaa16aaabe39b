"""What a run process asks for (RuntimeConfig) and which of it its backend and device can honour
(unsupported_settings), checked without touching the process. No framework at import."""

import dataclasses
import os
import re
from dataclasses import dataclass

from prednet_keras.runtime import process

# Keras dtype policies a run may ask for: float32 throughout, or float32 variables with
# bfloat16 activations (PredNet keeps its cell state, the error against the frame, the error
# means and the loss in float32; see layers/lotter.py).
PRECISIONS = ("float32", "mixed_bfloat16")

_DEVICE_RE = re.compile(r"^(cpu|gpu|cuda)(?::(\d+))?$")


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
        autotune: GPU kernel autotuning, where the library times candidate kernels
            (cuDNN's convolution algorithms, XLA's fusions) and keeps the fastest
            (XLA --xla_gpu_autotune_level, TensorFlow TF_CUDNN_USE_AUTOTUNE, torch
            cudnn.benchmark). False: each library's fixed choice, so the kernels a
            program runs do not depend on timings taken under whatever else the GPU
            was doing. None keeps the default (XLA and TensorFlow tune; torch does
            not). A CPU run has none to turn on.
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
    autotune: bool | None = None
    strict: bool = True
    xla: bool | None = None
    interop_threads: int | None = None
    precision: str = "float32"
    devices: int = 1

    def __post_init__(self):
        if self.backend not in process.BACKENDS:
            raise ValueError(f"Unknown backend {self.backend!r}: expected one of {list(process.BACKENDS)}.")
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
        for name in ("tf32", "onednn", "autotune", "xla"):
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
    if config.autotune and config.device_kind == "cpu":
        problems["autotune"] = "kernel autotuning is a GPU library's choice among its kernels; a CPU run has none."
    if config.onednn is not None and backend == "jax":
        problems["onednn"] = "JAX (XLA:CPU) has no oneDNN switch; oneDNN is a TensorFlow and torch option."
    if config.interop_threads is not None and backend == "jax":
        problems["interop_threads"] = "JAX has no inter-op thread pool to size."
    if config.threads is not None and backend == "jax":
        if not hasattr(os, "sched_setaffinity"):
            problems["threads"] = "JAX threads are set through CPU affinity, which this OS does not offer."
        else:
            cpus = process.available_cpus() if available_cpus is None else available_cpus
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


def jit_compile_for(config, problems):
    """The Keras `jit_compile` argument that matches the config."""
    if config.xla is not None and "xla" not in problems:
        return config.xla
    if config.backend == "tensorflow" and config.deterministic:
        return False
    if config.backend == "torch":
        # Keras' own choice too: torch.compile only when asked for.
        return False
    return "auto"
