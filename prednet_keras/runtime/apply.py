"""The in-process switches of each backend (devices, threads, determinism, cuDNN, TF32, oneDNN), applied
by runtime.configure after the environment is set, and the advice given when a GPU was asked for and the
backend sees none. Imports only the backend being configured, when asked; on every backend but TensorFlow,
Keras is told that TensorFlow is not there, so that it does not import it either
(`keep_tensorflow_out_of_keras`)."""

import os
import sys

from prednet_keras import backends
from prednet_keras.runtime.process import GPU_PLATFORMS, RuntimeSetupError


def apply_switches(config):
    """Applies the in-process switches of `config` on its backend (imported here).

    Raises:
        RuntimeSetupError: the backend started before and can no longer take a switch, or cannot run on
            the device asked for.
    """
    backend = backends.named(config.backend)
    backend.apply_switches(config)
    if backend is not backends.TENSORFLOW:
        keep_tensorflow_out_of_keras()


def apply_tensorflow(config):
    """TensorFlow's switches (Backend.apply_switches)."""
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
                    + _TENSORFLOW_NO_GPU
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


def apply_torch(config):
    """torch's switches (Backend.apply_switches)."""
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
    if config.autotune is not None:
        torch.backends.cudnn.benchmark = config.autotune
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
            + _TORCH_NO_GPU
        )


def apply_jax(config):
    """JAX's switches (Backend.apply_switches)."""
    import jax

    if config.tf32 is not None:
        # Applies to convolutions as well as matrix products (both take `precision`).
        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if config.tf32 else "highest")
    try:
        devices = jax.devices()
    except Exception as error:  # no CUDA plugin or no GPU: RuntimeError or AssertionError
        raise RuntimeSetupError(
            f"JAX could not start the {os.environ.get('JAX_PLATFORMS')!r} platform for device "
            f"{config.device}: {_why_jax_failed(error)}. Refusing to run elsewhere. "
            + (_JAX_NO_GPU if config.device_kind == "gpu" else "")
        ) from None
    if config.device_kind == "gpu" and not any(d.platform in GPU_PLATFORMS for d in devices):
        raise RuntimeSetupError(
            f"Device {config.device} requested but JAX sees only {[str(d) for d in devices]}. "
            + _JAX_NO_GPU
        )


def keep_tensorflow_out_of_keras():
    """Tells Keras, in a process of another backend, that TensorFlow is not installed.

    Wherever TensorFlow is installed Keras imports it to look at it, whatever the backend:
    keras.utils.set_random_seed seeds it, saving a model checks values against its types. In a torch or
    JAX training process that is about 2 s of its start on 2 cores (docs/benchmarks/cpu2-tensorflow-kept-out-
    2026-12-07), TensorFlow's memory and threads, for a framework the run never uses. Keras asks its lazy
    TensorFlow module whether TensorFlow is available; here the answer is no. Nothing of this package uses
    TensorFlow on another backend (no tf.data input).
    A process that imported TensorFlow already, or a Keras without that module, is left as it is.
    """
    if backends.TENSORFLOW.package in sys.modules:
        return
    try:
        from keras.src.utils import module_utils
    except ImportError:
        return
    lazy_tensorflow = getattr(module_utils, "tensorflow", None)
    if lazy_tensorflow is not None and getattr(lazy_tensorflow, "module", None) is None:
        lazy_tensorflow._available = False


def _why_jax_failed(error):
    """The error JAX gave, or what it means where JAX gave no words (a bare AssertionError when no plugin
    provides the platform asked for)."""
    if str(error).strip():
        return f"{type(error).__name__}: {error}"
    from importlib.metadata import distributions

    plugins = sorted({d.metadata["Name"] for d in distributions()
                      if (d.metadata["Name"] or "").lower().startswith(("jax-cuda", "jax_cuda", "jax-rocm"))})
    if not plugins:
        return "no GPU plugin of JAX is installed (jax-cuda12-plugin, jax-cuda13-plugin)"
    return f"{type(error).__name__} with no message (installed: {', '.join(plugins)})"


# What to do when a GPU was asked for and the backend sees none.
_TENSORFLOW_NO_GPU = (
    "To run on a GPU, install TensorFlow with CUDA (pip install 'tensorflow[and-cuda]' on Linux with an "
    "NVIDIA driver) or use --backend jax / --backend torch with their CUDA builds; or drop --device gpu "
    "to run on the CPU."
)
_JAX_NO_GPU = (
    "To run on a GPU, install JAX with CUDA (pip install -U 'jax[cuda13]', or 'jax[cuda12]' for an older "
    "driver) or use --backend torch; or drop --device gpu to run on the CPU."
)
_TORCH_NO_GPU = (
    "To run on a GPU, install a CUDA build of PyTorch (see pytorch.org for the pip command that matches "
    "your driver) or use --backend jax; or drop --device gpu to run on the CPU."
)
