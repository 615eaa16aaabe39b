"""The runtime options every command that starts a framework takes, made from runtime/options.py's table.

    @runtime_options()                      --backend --device --threads --deterministic
                                            --cudnn --tf32 --onednn --autotune --xla (--jit-compile)
                                            --precision -v: each option the table offers
    @runtime_options(devices=True)          ... and --devices (prednet-train); name=False leaves one out
    runtime_option("device")                one of them, alone (prednet-eval)
    config = runtime_config(options)        a runtime.RuntimeConfig (default backend filled in,
                                            a missing backend named with its pip install)
"""

import os

import click

from prednet_keras import _backend_choice, _framework_import
from prednet_keras.runtime.options import RUNTIME_OPTIONS, flag_order, names


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


def _click_type(option):
    if option.kind == "choice":
        return click.Choice(option.choices)
    if option.kind == "whole":
        return click.IntRange(min=1)
    return None  # a switch is a flag; text stays a string


def runtime_option(name, *, offered=(), device_default="cpu", options=RUNTIME_OPTIONS):
    """The Click option of the runtime option `name`.

    Args:
        name: its name in the table.
        offered: the names of the other options the command offers (a help sentence may name one).
        device_default: the default of --device.
        options: the table.
    """
    option = next(option for option in options if option.name == name)
    flag = "--" + option.name.replace("_", "-")
    declarations = option.flags or ((f"{flag}/--no-{flag[2:]}",) if option.kind == "switch" else (flag,))
    default = device_default if option.name == "device" else option.click_default
    help_text = option.help + "".join(sentence for other, sentence in option.help_beside if other in offered)
    keywords = {"default": default, "help": help_text}
    if option.kind != "switch":
        keywords["type"] = _click_type(option)
    if default is not None:  # a None default is said in the help ("[default: the framework's]")
        keywords["show_default"] = True
    return click.option(*declarations, **keywords)


def precision_option(tf32_option=False):
    """--precision; `tf32_option`: the command also offers --tf32 (its help then says how the two differ)."""
    return runtime_option("precision", offered=("tf32",) if tf32_option else ())


def offered_options(options=RUNTIME_OPTIONS, **offer):
    """The options a command offers, in --help's order: those the table offers, with `offer`'s changes."""
    unknown = sorted(set(offer) - set(names(options)))
    if unknown:
        raise TypeError(f"No runtime option {', '.join(unknown)}; the table has {', '.join(names(options))}.")
    return tuple(option for option in flag_order(options) if offer.get(option.name, option.offered))


def runtime_options(*, device_default="cpu", options=RUNTIME_OPTIONS, **offer):
    """Decorator adding the runtime options (and -v) to a Click command.

    Args:
        device_default: the default of --device.
        options: the table (runtime.options.RUNTIME_OPTIONS, or a test's copy).
        **offer: name=True offers an option the table does not offer by default (interop_threads=True, devices,
            strict), name=False leaves one out (cudnn=False).
    """
    chosen = offered_options(options, **offer)
    offered = {option.name for option in chosen}
    click_options = [runtime_option(option.name, offered=offered, device_default=device_default, options=options)
                     for option in chosen]

    def decorate(command):
        for option in reversed(click_options):
            command = option(command)
        return verbose_option(command)

    return decorate


def runtime_config(options, strict=True, config_class=None):
    """The runtime.RuntimeConfig of a command's parsed options.

    Args:
        options: the command's keyword arguments (those it lacks keep the defaults; others are not read).
        strict: unsupported settings are errors (True) or recorded as not available, unless `options` says.
        config_class: runtime.RuntimeConfig, or the class runtime_config_class made of another table.

    Raises:
        click.UsageError: an invalid combination; click.ClickException: the backend is not installed.
    """
    from prednet_keras import runtime

    config_class = config_class or runtime.RuntimeConfig
    values = {name: options[name] for name in names(config_class.OPTIONS) if name in options}
    values.setdefault("strict", strict)
    values["backend"] = values.get("backend") or _backend_choice.default_backend()
    try:
        _backend_choice.require_backend(values["backend"])
    except _backend_choice.MissingDependencyError as error:
        raise click.ClickException(str(error)) from None
    try:
        return config_class(**values)
    except (ValueError, TypeError) as error:
        raise click.UsageError(str(error)) from None
