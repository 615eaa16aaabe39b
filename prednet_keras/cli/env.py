"""`prednet-env`: the environment fingerprint and the effective run settings.

The settings are applied in a child process (`runtime.probe`: a process can be
configured only once, before its framework starts), which reports what is in
force; this command prints requested vs effective next to the fingerprint.
"""

import json

import click

from prednet_keras import backends, runtime
from prednet_keras.cli.options import offered_options, runtime_config, runtime_options
from prednet_keras.runtime.probe import probe
from prednet_keras.session import records

# The settings shown side by side (name, its key in what is in force), in the order of the command's flags.
OFFERED = {"interop_threads": True, "strict": True}
_SETTINGS = tuple((option.name, option.effective_key) for option in offered_options(**OFFERED) if option.setting)


def _show(value, none="default"):
    if value is None:
        return none
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _status(name, requested, effective):
    if effective == runtime.NOT_AVAILABLE:
        return "[yellow]not available[/]"
    if requested is None:
        return "[dim]default[/]"
    if effective is None:
        # No such setting in force here (cuDNN on a CPU run of TensorFlow or JAX).
        return "[dim]n/a[/]"
    if name == "device":
        return "[green]ok[/]" if str(requested).split(":")[0] == effective else "[red]differs[/]"
    return "[green]ok[/]" if requested == effective else "[red]differs[/]"


def _flatten(prefix, value, rows):
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), inner, rows)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for index, inner in enumerate(value):
            _flatten(f"{prefix}[{index}]", inner, rows)
    else:
        rows.append((prefix, ", ".join(map(str, value)) if isinstance(value, list) else str(value)))


def _print_report(result):
    from rich.console import Console
    from rich.table import Table

    console = Console()
    requested = records.RuntimeRequested.from_dict(result["requested"])
    effective = records.RuntimeEffective.from_dict(result["effective"])
    settings = Table(title="Run settings: requested vs effective")
    for column in ("setting", "requested", "effective", "status"):
        settings.add_column(column)
    for name, key in _SETTINGS:
        wanted = requested.get(name)
        if name == "interop_threads" and wanted is None and _has_interop_pool(requested.backend):
            wanted = requested.threads
        actual = effective.get(key)
        settings.add_row(name, _show(wanted), _show(actual, none="n/a"), _status(name, wanted, actual))
    console.print(settings)
    for field, reason in (effective.not_available or {}).items():
        console.print(f"[yellow]{field}[/]: {reason}")

    details = Table(title="Read back from the backend")
    details.add_column("key")
    details.add_column("value", overflow="fold")
    shown = {key for _, key in _SETTINGS} | {"not_available", "environment"}
    rows = []
    _flatten("", {k: v for k, v in effective.to_dict().items() if k not in shown}, rows)
    for key, value in rows:
        details.add_row(key, value)
    console.print(details)

    machine = Table(title="Environment fingerprint")
    machine.add_column("key")
    machine.add_column("value", overflow="fold")
    rows = []
    _flatten("", records.Fingerprint.from_dict(result["fingerprint"]).to_dict(), rows)
    for key, value in rows:
        machine.add_row(key, value)
    console.print(machine)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@runtime_options(**OFFERED)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def main(as_json, **options):
    """Print the environment fingerprint and the settings a run would get.

    The settings are applied in a fresh child process exactly as a training run
    applies them, then read back from the backend; the command fails if a setting
    is unsupported (with --strict) or did not take effect.
    """
    config = runtime_config(options)
    # Known-unsupported settings fail here, without starting a framework.
    problems = runtime.unsupported_settings(config)
    if problems and config.strict:
        raise click.ClickException(runtime.unsupported_message(config, problems))
    try:
        result = probe(config)
    except runtime.RuntimeSetupError as error:
        raise click.ClickException(str(error)) from None
    if as_json:
        click.echo(json.dumps(result, indent=2, default=str))
    else:
        _print_report(result)


def _has_interop_pool(name):
    # Where a backend has an inter-op pool, `threads` sizes it too unless interop_threads says otherwise.
    backend = backends.find(name)
    return backend is None or backend.interop_pool


if __name__ == "__main__":
    main()

