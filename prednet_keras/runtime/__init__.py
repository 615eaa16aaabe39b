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

This module is the package's face: `configure` and the public names of its parts, each a module of its
own: config (RuntimeConfig and what a backend and device can honour), environment (environment_for, the
recorded variables), process (this process's state, the error), apply (the in-process switches of each
backend), precision (bfloat16), readback (read_back, verify) and machine (fingerprint). Eight parts are
imported by name, not through this face: distribution (a training process's data-parallel devices),
compile_cache (the JAX compilation cache a study's runs share, and the gate its later runs wait at),
probe (what a process so configured has in force, found in a child process, for prednet-env), childproc
(the one way a child process starts, in its runtime's environment, dying with its parent),
code_provenance (the code a process runs: its git commit, whether the package's files differ from it),
memory_estimate (whether a training step can fit in this machine's memory, asked before the model is
built), errors (which errors are the user's, and how a command or its training process tells them) and
log_noise (XLA's harmless GPU autotuning lines, hidden from a process `configure` set up for a GPU).

None of them imports a framework at module level; they import only the backend
being configured, and `fingerprint`/`read_back` look only at frameworks that are
already imported. See docs/runtime.md for what each switch means per backend.
"""

import importlib
import json
import os

from prednet_keras import backends
from prednet_keras.runtime import log_noise, process
from prednet_keras.runtime.apply import apply_switches
from prednet_keras.runtime.config import (
    PRECISIONS,
    RuntimeConfig,
    jit_compile_for,
    unsupported_message,
    unsupported_settings,
)
from prednet_keras.runtime.environment import (
    CONFIG_ENV,
    RECORDED_ENVIRONMENT,
    environment_for,
    relevant_environment,
)
from prednet_keras.runtime.machine import fingerprint
from prednet_keras.runtime.precision import apply_precision, precision_problem
from prednet_keras.runtime.process import BACKENDS, NOT_AVAILABLE, RuntimeSetupError
from prednet_keras.runtime.readback import read_back, verify

__all__ = [
    "BACKENDS",
    "CONFIG_ENV",
    "NOT_AVAILABLE",
    "PRECISIONS",
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


# ------------------------------------------------------------------------- configure
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
    earlier, earlier_effective = process.configured()
    if earlier is not None:
        if earlier == config:
            return dict(earlier_effective)
        raise RuntimeSetupError(
            f"This process was already configured with {earlier}; a process can "
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
    process.check_process_state(config, target, changed)
    for key in changed:
        if key in target:
            os.environ[key] = target[key]
        else:
            os.environ.pop(key, None)

    cpu_ids = None
    if backends.named(config.backend).threads_by_affinity and config.threads is not None and "threads" not in problems:
        cpu_ids = process.pin_cpus(config.threads)

    keras = importlib.import_module("keras")
    if keras.backend.backend() != config.backend:
        raise RuntimeSetupError(
            f"Keras started with the {keras.backend.backend()} backend instead of {config.backend}."
        )
    apply_switches(config)
    precision_problem = apply_precision(keras, config)
    effective = read_back()
    if config.device_kind == "cpu" and effective.get("device") != "cpu":
        raise RuntimeSetupError(
            f"A CPU run was requested but {config.backend} still sees {effective.get('devices')}."
        )
    effective["jit_compile"] = jit_compile_for(config, problems)
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
    process.remember(config, effective)
    if backends.named(config.backend).xla_gpu_log_noise and effective.get("device") != "cpu":
        # Once the GPU is verified: its autotuning, when the first step compiles, is what writes them.
        log_noise.hide_known_noise()
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
