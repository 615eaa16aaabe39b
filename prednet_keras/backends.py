"""The Keras backends, declared once: BACKENDS, one Backend per framework a run can use.

This table is the one place that tells backends apart by name. Everywhere else the code asks the entry of
the backend in use (`named(config.backend)`; `find(name)` where a name may be any text) what it can honour
and how: what is plain data stands in the entry (its names, what to install, which switches it has), and
what is behaviour (the variables set before it starts, its switches, what is read back, its profiler, ...)
is a function of its own, in the module that does that job for every backend, named here by
"module:function" and imported on its first call (some of those modules are in higher layers: naming them
is not importing them). So the table imports nothing, no framework above all: `import prednet_keras` reads it (which
backend to use when none is named), and a backend's modules are imported only when that backend is in use.

Adding a backend is one entry here plus its functions; docs/architecture.md's "Adding a backend" lists them.
"""

import dataclasses
import importlib
import importlib.util
import sys

__all__ = ["BACKENDS", "Backend", "LazyFunction", "find", "named", "names", "owning_package"]


@dataclasses.dataclass(frozen=True)
class LazyFunction:
    """A function named "module:function", imported on its first call, so that naming it imports nothing."""

    path: str

    def __call__(self, *args, **kwargs):
        return self.load()(*args, **kwargs)

    def load(self):
        """The function itself (imports its module), for a caller that calls it often."""
        module, _, name = self.path.partition(":")
        return getattr(importlib.import_module(module), name)


@dataclasses.dataclass(frozen=True, eq=False)
class Backend:
    """One Keras backend: what the code asks of it.

    Attributes:
        name: Keras' name for it (KERAS_BACKEND, --backend, a manifest's runtime.requested.backend).
        display_name: the name people know it by, in messages and reports.
        package: the module that must be importable for it to run (and is in sys.modules once it does).
        extra: the pip extra of prednet-keras that installs it.
        install_note: what the pip hint adds (another extra that suits some machines).
        unsupported: {runtime setting: why it cannot honour it}, for the settings it lacks of those
            runtime.config.unsupported_settings asks each backend about: "cudnn" (off), "onednn",
            "interop_threads", "xla" (with --deterministic). A run asking for one gets the reason (strict: an
            error; else recorded as not available).
        threads_by_affinity: its CPU threads are set by pinning the process to as many CPUs, before it starts
            its devices.
        jit_by_default: Keras compiles its steps unless told not to (jit_compile "auto"); else it runs eager
            unless asked, and a compiled run says so in a benchmark's table.
        traces_steps: Keras traces its steps into a graph even without jit_compile (TensorFlow's tf.function),
            so a first step takes the tracing's time either way (`steps_compile`).
        jit_on_cpu: the recipe's jit_compile on a CPU where --xla was not given, when it is not the runtime's
            (None): XLA ran PredNet slower than TensorFlow's oneDNN kernels there.
        prediction_jit_compile: jit_compile of prediction where the caller did not say.
        compilation_cache: a study's runs can share its compilation cache (runtime.compile_cache).
        data_parallel: it trains data-parallel over several devices (--devices, runtime.distribution).
        asynchronous_steps: when a training step returns before the device has done it: "always", "gpu" (with
            the model's variables on a GPU) or "never".
        copies_rnn_states: a stateful RNN's states are copied before each step (in-place updates of its state
            variables would break its autograd).
        rolled_loop_masks_image_states: Keras' rolled time loop (unroll=False) can take a mask for an RNN whose
            states are feature maps and whose output is not its first state. JAX's cannot: it takes the first
            state for the previous output and broadcasts a (batch, 1) mask against the states' last axes, so a
            masked PredNet unrolls its time loop there, where Keras' loop masks every state as Keras 2 did.
        keep_step_output: (value) -> value: a step's output that outlives the next step (StepLosses reads a
            loss late): a copy where the next step may overwrite it; None where it cannot
            (session.callbacks).
        environment: (config, env, base) -> None: sets its variables in `env`, the child's environment made
            from `base` (runtime.environment).
        apply_switches: (config) -> None: its in-process switches, after it is imported (runtime.apply).
        read_back: () -> dict: what is in force in it (runtime.readback).
        gpu_capability: () -> (major, minor) or None, of the first GPU it uses (runtime.precision).
        gpu_info: () -> dict: its GPU facts for the fingerprint, under gpu.<name> (runtime.machine).
        devices_started: () -> bool, whether it has started its devices (then affinity is too late); None
            where threads are not set by affinity.
        profiler: (directory) -> a context manager that profiles its body into `directory` (bench.profiling).
        reset_device_peak: () -> None: starts a phase's peak device memory afresh; None where its peak covers
            the process (bench.measure).
        device_peak: () -> (bytes or None, how it was measured) of the first GPU (bench.measure).
        xla_gpu_log_noise: on a GPU, its C++ log can carry XLA's harmless autotuning lines, which a configured
            process hides (runtime.log_noise).
        numbers_copied_per_call: () -> bool: whether, at this moment, a Python number given to an op becomes
            a new device tensor at every call (eager torch; not while torch.compile traces), so that
            layers.device_constants makes it once; None where numbers reach the ops as they are.
        random_layers_draw_globally: Keras' random layers may draw from the framework's global generator
            rather than from their own keras.random.SeedGenerator (torch: a Dropout made without a seed), which
            Keras' fit also draws from as each epoch starts and ends, so no checkpoint holds where their
            numbers would continue: a model with random layers is not checkpointed there
            (session.protocol_training).
    """

    name: str
    display_name: str
    package: str
    extra: str
    environment: object
    apply_switches: object
    read_back: object
    gpu_capability: object
    gpu_info: object
    profiler: object
    device_peak: object
    install_note: str = ""
    unsupported: dict = dataclasses.field(default_factory=dict)
    threads_by_affinity: bool = False
    jit_by_default: bool = True
    traces_steps: bool = False
    jit_on_cpu: object = None
    prediction_jit_compile: object = "auto"
    compilation_cache: bool = False
    data_parallel: bool = False
    asynchronous_steps: str = "never"
    copies_rnn_states: bool = False
    rolled_loop_masks_image_states: bool = True
    xla_gpu_log_noise: bool = False
    devices_started: object = None
    reset_device_peak: object = None
    keep_step_output: object = None
    numbers_copied_per_call: object = None
    random_layers_draw_globally: bool = False

    @property
    def cudnn_switches(self):
        """cuDNN is switched in the process (on and off, deterministic, benchmark), read back and verified."""
        return "cudnn" not in self.unsupported

    @property
    def interop_pool(self):
        """It has an inter-op thread pool to size (`interop_threads`; where not, `threads` sizes none)."""
        return "interop_threads" not in self.unsupported

    @property
    def deterministic_under_xla(self):
        """Its op determinism holds under XLA (--xla with --deterministic)."""
        return "xla" not in self.unsupported

    def steps_compile(self, jit_compile):
        """Whether Keras compiles (traces) a step given Model.compile's `jit_compile` (True, False, "auto"), so
        that its first call takes far longer than the others; eager steps do not."""
        return self.traces_steps or (self.jit_by_default if jit_compile == "auto" else bool(jit_compile))

    def installed(self):
        """Whether its package can be imported here, without importing it."""
        try:
            return importlib.util.find_spec(self.package) is not None
        except (ImportError, ValueError):  # a broken install or a stub in sys.modules
            return False

    def imported(self):
        """Whether its package is imported in this process."""
        return self.package in sys.modules


def _at(module, function):
    return LazyFunction(f"prednet_keras.{module}:{function}")


TENSORFLOW = Backend(
    "tensorflow", "TensorFlow", package="tensorflow", extra="tensorflow",
    install_note=" (or [tensorflow-cpu] on a machine without a GPU)",
    unsupported={
        "cudnn": "cuDNN cannot be switched off on tensorflow: TensorFlow sends every GPU convolution to cuDNN. Only "
                 "torch has a real cuDNN off.",
        "xla": "XLA with TensorFlow op determinism: not every op is deterministic under XLA (Keras itself turns "
               "XLA off when op determinism is on).",
    },
    jit_on_cpu=False,
    traces_steps=True,
    prediction_jit_compile=False,
    xla_gpu_log_noise=True,
    environment=_at("runtime.environment", "tensorflow_environment"),
    apply_switches=_at("runtime.apply", "apply_tensorflow"),
    read_back=_at("runtime.readback", "read_tensorflow"),
    gpu_capability=_at("runtime.precision", "tensorflow_gpu_capability"),
    gpu_info=_at("runtime.machine", "tensorflow_gpu_info"),
    profiler=_at("bench.profiling", "trace_tensorflow"),
    reset_device_peak=_at("bench.measure", "reset_tensorflow_peak"),
    device_peak=_at("bench.measure", "tensorflow_peak"),
)

JAX = Backend(
    "jax", "JAX", package="jax", extra="jax",
    unsupported={
        "cudnn": "cuDNN cannot be switched off on jax: XLA sends every GPU convolution to cuDNN. Only torch has a "
                 "real cuDNN off.",
        "onednn": "JAX (XLA:CPU) has no oneDNN switch; oneDNN is a TensorFlow and torch option.",
        "interop_threads": "JAX has no inter-op thread pool to size.",
    },
    threads_by_affinity=True,
    compilation_cache=True,
    data_parallel=True,
    rolled_loop_masks_image_states=False,
    asynchronous_steps="always",
    xla_gpu_log_noise=True,
    environment=_at("runtime.environment", "jax_environment"),
    apply_switches=_at("runtime.apply", "apply_jax"),
    read_back=_at("runtime.readback", "read_jax"),
    gpu_capability=_at("runtime.precision", "jax_gpu_capability"),
    gpu_info=_at("runtime.machine", "jax_gpu_info"),
    devices_started=_at("runtime.process", "jax_devices_started"),
    profiler=_at("bench.profiling", "trace_jax"),
    device_peak=_at("bench.measure", "jax_peak"),
)

TORCH = Backend(
    "torch", "PyTorch", package="torch", extra="torch",
    jit_by_default=False,
    asynchronous_steps="gpu",
    copies_rnn_states=True,
    environment=_at("runtime.environment", "torch_environment"),
    apply_switches=_at("runtime.apply", "apply_torch"),
    read_back=_at("runtime.readback", "read_torch"),
    gpu_capability=_at("runtime.precision", "torch_gpu_capability"),
    gpu_info=_at("runtime.machine", "torch_gpu_info"),
    profiler=_at("bench.profiling", "trace_torch"),
    reset_device_peak=_at("bench.measure", "reset_torch_peak"),
    device_peak=_at("bench.measure", "torch_peak"),
    keep_step_output=_at("session.callbacks", "torch_step_output_kept"),
    numbers_copied_per_call=_at("layers.device_constants", "torch_copies_numbers"),
    random_layers_draw_globally=True,
)

# In the order a command picks the first installed one when nothing names a backend (TensorFlow stays the
# default wherever it is installed), which is also the order backends are listed in.
BACKENDS = (TENSORFLOW, JAX, TORCH)


def _table(table):
    # Read at call time, so that a test's copy of the table (monkeypatched in) is the one asked.
    return BACKENDS if table is None else table


def names(table=None):
    """The backends' Keras names, in the table's order."""
    return tuple(backend.name for backend in _table(table))


def find(name, table=None):
    """The Backend called `name`, or None (a name read from a file may be any text)."""
    return next((backend for backend in _table(table) if backend.name == name), None)


def named(name, table=None):
    """The Backend called `name`; a KeyError for a name the table lacks (RuntimeConfig checks it first)."""
    backend = find(name, table)
    if backend is None:
        raise KeyError(f"no backend {name!r} in the table: {', '.join(names(table))}")
    return backend


def owning_package(value, table=None):
    """The Backend whose package made `value`'s type (a tensor of that framework), or None."""
    top = type(value).__module__.split(".")[0]
    return next((backend for backend in _table(table) if backend.package == top), None)
