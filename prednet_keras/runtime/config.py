"""What a run process asks for (RuntimeConfig) and which of it its backend and device can honour
(unsupported_settings), checked without touching the process. No framework at import."""

import dataclasses
import os
import textwrap

from prednet_keras import backends
from prednet_keras.runtime import process
from prednet_keras.runtime.options import PRECISIONS, RUNTIME_OPTIONS, recorded_order

__all__ = ["PRECISIONS", "RuntimeConfig", "RuntimeConfigBase", "jit_compile_for", "runtime_config_class",
           "unsupported_message", "unsupported_settings"]


# --------------------------------------------------------------------------- config
class RuntimeConfigBase:
    """What every RuntimeConfig class does; its fields come from the options table (runtime_config_class)."""

    OPTIONS = RUNTIME_OPTIONS

    def __post_init__(self):
        # Each field checked and normalised ("GPU:0" -> "gpu:0") by its option, in the table's order.
        for option in self.OPTIONS:
            setattr(self, option.name, option.checked(getattr(self, option.name)))

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
        if not backends.named(self.backend).interop_pool:
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


def runtime_config_class(options=RUNTIME_OPTIONS):
    """The RuntimeConfig dataclass of `options`: one field per option, in their recorded order (a manifest's
    runtime.requested is its to_dict()), with the option's default and check.

    Args:
        options: the table (runtime.options.RUNTIME_OPTIONS, or a caller's copy).
    """
    fields = [(option.name, option.annotation, dataclasses.field(default=option.default))
              for option in recorded_order(options)]
    args = "".join(textwrap.indent(textwrap.fill(f"{option.name}: {option.doc}", 104, subsequent_indent="    "),
                                   "        ") + "\n" for option in options)
    doc = (f"How one run process is set up (one field per runtime option, runtime/options.py).\n\n"
           f"    Args:\n{args}    ")
    config_class = dataclasses.make_dataclass("RuntimeConfig", fields, bases=(RuntimeConfigBase,),
                                              namespace={"OPTIONS": tuple(options), "__doc__": doc})
    config_class.__module__ = __name__  # so that pickle finds it (a study's executors send configs)
    return config_class


RuntimeConfig = runtime_config_class()


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
    backend = backends.named(config.backend)
    for name, reason in backend.unsupported.items():
        if _ASKS_FOR[name](config):
            problems[name] = reason
    if config.tf32 and config.device_kind == "cpu":
        problems["tf32"] = "TF32 is a mode of NVIDIA GPUs (Ampere and newer); a CPU run has none."
    if config.autotune and config.device_kind == "cpu":
        problems["autotune"] = "kernel autotuning is a GPU library's choice among its kernels; a CPU run has none."
    if config.threads is not None and backend.threads_by_affinity:
        if not hasattr(os, "sched_setaffinity"):
            problems["threads"] = (f"{backend.display_name} threads are set through CPU affinity, which this OS "
                                   "does not offer.")
        else:
            cpus = process.available_cpus() if available_cpus is None else available_cpus
            if config.threads > cpus:
                problems["threads"] = (
                    f"{backend.display_name} threads are set by pinning the process to CPUs; only {cpus} "
                    f"CPU(s) are available, {config.threads} requested."
                )
    return _in_listed_order(problems)


# When a config asks for a setting that a backend may be unable to honour (Backend.unsupported's keys).
_ASKS_FOR = {
    "cudnn": lambda config: not config.cudnn,
    "onednn": lambda config: config.onednn is not None,
    "interop_threads": lambda config: config.interop_threads is not None,
    "xla": lambda config: bool(config.xla and config.deterministic),
}
_ORDER = ("cudnn", "tf32", "autotune", "onednn", "interop_threads", "threads", "xla")


def _in_listed_order(problems):
    # The order the reasons have always had: strict mode's message and a manifest's not_available list them.
    return {name: problems[name]
            for name in sorted(problems, key=lambda name: _ORDER.index(name) if name in _ORDER else len(_ORDER))}


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
    backend = backends.named(config.backend)
    if config.deterministic and not backend.deterministic_under_xla:
        return False
    if not backend.jit_by_default:
        # Keras' own choice too: torch.compile only when asked for.
        return False
    return "auto"
