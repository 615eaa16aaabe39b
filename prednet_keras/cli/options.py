"""The runtime options every command that starts a framework takes, declared once.

    @runtime_options()                      --backend --device --threads --deterministic
                                            --cudnn --tf32 --onednn --xla (--jit-compile)
                                            --precision -v
    @runtime_options(devices=True)          ... and --devices (prednet-train)
    config = runtime_config(options)        a runtime.RuntimeConfig (default backend filled in,
                                            a missing backend named with its pip install)
"""

import os

import click

from prednet_keras import _backend_choice, _framework_import

BACKENDS = _backend_choice.FALLBACK_ORDER
DEVICE_HELP = "cpu, gpu or gpu:N. A GPU asked for and not visible is an error, never a silent CPU run."
BACKEND_HELP = (
    "Keras backend [default: KERAS_BACKEND, else the backend in ~/.keras/keras.json if installed, "
    "else the first installed of tensorflow, jax, torch]."
)


def _set_verbose(ctx, param, value):
    # Children inherit the environment, so one variable reaches every process of the command.
    if value:
        os.environ[_framework_import.VERBOSE_ENV] = "1"


def verbose_option(command):
    """-v/--verbose: show the frameworks' start-up output (silenced by default)."""
    return click.option(
        "-v", "--verbose", is_flag=True, expose_value=False, is_eager=True, callback=_set_verbose,
        help="Show the frameworks' own start-up and log output (hidden by default).",
    )(command)


PRECISION_HELP = (
    "Keras dtype policy: float32, or mixed_bfloat16 (float32 weights; PredNet's convolutions in bfloat16, its "
    "states, errors and loss in float32). Checked on the device before the run starts."
)
# Said only where the command has --tf32 (prednet-eval has --precision alone).
PRECISION_TF32_HELP = " Independent of --tf32, which says how float32 convolutions run on NVIDIA GPUs."


def precision_option(tf32_option=False):
    """--precision; `tf32_option`: the command also offers --tf32 (its help then says how the two differ)."""
    from prednet_keras.runtime import PRECISIONS

    return click.option("--precision", type=click.Choice(PRECISIONS), default="float32", show_default=True,
                        help=PRECISION_HELP + (PRECISION_TF32_HELP if tf32_option else ""))


DEVICES_HELP = (
    "Train data-parallel on the first N devices of --device (Keras' DataParallel; JAX only). --batch-size stays "
    "the global batch, split evenly over the N devices, so it must divide by N. On a CPU, JAX shows N devices "
    "with XLA_FLAGS=--xla_force_host_platform_device_count=N."
)


def runtime_options(*, interop_threads=False, cudnn=True, device_default="cpu", devices=False):
    """Decorator adding the runtime options (and -v) to a Click command.

    Args:
        interop_threads: also offer --interop-threads.
        cudnn: offer --cudnn/--no-cudnn.
        device_default: the default of --device.
        devices: offer --devices (data-parallel training).
    """
    options = [
        click.option("--backend", type=click.Choice(BACKENDS), default=None, help=BACKEND_HELP),
        click.option("--device", default=device_default, show_default=True,
                     help=DEVICE_HELP),
        click.option("--threads", type=click.IntRange(min=1), default=None,
                     help="CPU compute threads (TensorFlow intra-op, torch, JAX by CPU affinity) [default: the framework's]."),
    ]
    if devices:
        options.append(click.option("--devices", type=click.IntRange(min=1), default=1, show_default=True,
                                    help=DEVICES_HELP))
    if interop_threads:
        options.append(click.option(
            "--interop-threads", type=click.IntRange(min=1), default=None,
            help="TensorFlow inter-op / torch interop threads [default: = --threads]."))
    options.append(click.option("--deterministic/--no-deterministic", default=False, show_default=True,
                                help="Deterministic kernels (slower; the same results run to run)."))
    if cudnn:
        options.append(click.option("--cudnn/--no-cudnn", default=True, show_default=True,
                                    help="cuDNN on GPUs (off exists only on torch; elsewhere an error)."))
    options += [
        click.option("--tf32/--no-tf32", default=None,
                     help="TensorFloat-32 convolutions and matrix products on NVIDIA GPUs [default: the framework's]."),
        click.option("--onednn/--no-onednn", default=None,
                     help="oneDNN CPU kernels, TensorFlow and torch [default: the framework's]."),
        click.option("--autotune/--no-autotune", default=None,
                     help="GPU kernels picked by timing them (XLA's autotuning, TensorFlow's cuDNN autotune, torch's "
                          "cudnn.benchmark); --no-autotune takes each library's fixed choice, so no timing taken "
                          "under load decides [default: the framework's: on for XLA and TensorFlow, off for torch]."),
        click.option("--xla/--no-xla", "--jit-compile/--no-jit-compile", "xla", default=None,
                     help="Compile the training step (Keras' jit_compile): XLA on TensorFlow and JAX, torch.compile "
                          "on torch [default: off for TensorFlow on CPU, where it is slower, and on torch; Keras' "
                          "choice elsewhere]."),
        precision_option(tf32_option=True),
    ]

    def decorate(command):
        for option in reversed(options):
            command = option(command)
        return verbose_option(command)

    return decorate


RUNTIME_FIELDS = ("backend", "device", "threads", "interop_threads", "deterministic", "cudnn", "tf32", "onednn",
                  "autotune", "xla", "precision", "devices")


def runtime_config(options, strict=True):
    """The runtime.RuntimeConfig of a command's parsed options.

    Args:
        options: the command's keyword arguments (those it lacks keep the defaults).
        strict: unsupported settings are errors (True) or recorded as not available.

    Raises:
        click.UsageError: an invalid combination; click.ClickException: the backend is not installed.
    """
    from prednet_keras import runtime

    values = {name: options[name] for name in RUNTIME_FIELDS if name in options}
    values["backend"] = values.get("backend") or _backend_choice.default_backend()
    try:
        _backend_choice.require_backend(values["backend"])
    except _backend_choice.MissingDependencyError as error:
        raise click.ClickException(str(error)) from None
    try:
        return runtime.RuntimeConfig(**values, strict=strict)
    except (ValueError, TypeError) as error:
        raise click.UsageError(str(error)) from None
