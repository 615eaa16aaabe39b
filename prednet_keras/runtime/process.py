"""This process's runtime facts that the runtime modules share: the backends, the error that refuses a
set-up, the one configuration a process gets, the CPUs it may use, whether a framework it runs already fixed
its settings, and pinning it to CPUs (how JAX threads are set). No framework at import."""

import os
import sys

from prednet_keras import backends

# The backends' names (the table is prednet_keras.backends.BACKENDS).
BACKENDS = backends.names()
NOT_AVAILABLE = "not available"

# The platform names under which JAX lists a GPU.
GPU_PLATFORMS = ("gpu", "cuda", "rocm")

# One configuration per process; configure() remembers it.
_CONFIGURED = {"config": None, "effective": None}


class RuntimeSetupError(RuntimeError):
    """A run cannot be set up as requested (unsupported, too late, or not in force)."""


def configured():
    """(config, effective settings) this process was configured with, or (None, None) before `configure`."""
    return _CONFIGURED["config"], _CONFIGURED["effective"]


def remember(config, effective):
    """Records that this process is now configured with `config`: a process is configured once."""
    _CONFIGURED["config"] = config
    _CONFIGURED["effective"] = dict(effective)


def available_cpus():
    """How many CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def jax_devices_started():
    """Whether JAX has already created its device backends (then flags are fixed)."""
    if not backends.JAX.imported():
        return False
    try:
        from jax._src import xla_bridge

        return bool(getattr(xla_bridge, "_backends", {}))
    except Exception:  # private API moved: assume the worst
        return True


def check_process_state(config, target, changed):
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
    backend = backends.named(config.backend)
    if backend.threads_by_affinity and config.threads is not None and backend.devices_started():
        raise RuntimeSetupError(
            f"{backend.display_name} has already created its devices; CPU affinity (how {backend.display_name} "
            "threads are set) must be applied before that. Configure at the very start of the process."
        )


def pin_cpus(count):
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
