"""The numeric precision of a run: whether bfloat16 can run on this backend and device (tried for real),
and setting the Keras dtype policy. Imports Keras only when asked."""

import importlib

from prednet_keras import backends
from prednet_keras.runtime.readback import read_back


def apply_precision(keras, config):
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
        problem = bf16_capability_problem(_gpu_capability(backends.find(backend)))
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


def bf16_capability_problem(capability):
    """Why a GPU of compute `capability` (major, minor) cannot compute in bfloat16, or None (also when the
    capability is unknown: the convolution tried then decides)."""
    if capability is not None and capability < (8, 0):
        return (
            f"the GPU has compute capability {capability[0]}.{capability[1]}; bfloat16 arithmetic needs 8.0 "
            "(Ampere) or newer"
        )
    return None


def _gpu_capability(backend):
    """(major, minor) of the first GPU `backend` (a Backend, or None: not in the table) uses, or None when it
    does not say."""
    if backend is None:
        return None
    try:
        return backend.gpu_capability()
    except Exception:  # no such device information: the convolution probe decides
        return None


def torch_gpu_capability():
    """torch's first GPU's (major, minor) (Backend.gpu_capability)."""
    import torch

    return tuple(torch.cuda.get_device_capability(0))


def jax_gpu_capability():
    """JAX's first device's (major, minor), or None (Backend.gpu_capability)."""
    import jax

    text = getattr(jax.devices()[0], "compute_capability", None)
    return tuple(int(v) for v in str(text).split(".")[:2]) if text else None


def tensorflow_gpu_capability():
    """TensorFlow's first visible GPU's (major, minor), or None (Backend.gpu_capability)."""
    import tensorflow as tf

    details = tf.config.experimental.get_device_details(tf.config.get_visible_devices("GPU")[0])
    return tuple(details["compute_capability"]) if details.get("compute_capability") else None
