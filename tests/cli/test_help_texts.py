"""Every console script's --help, and each option's names, default and type, as users see them, kept in
help_texts/ and compared: a change to how the options are declared (cli/options.py builds the runtime
options from runtime/options.py's table) must change nothing a user sees.

After an intended change to a command's options, rewrite the files with
`PYTHONPATH=. python tests/cli/test_help_texts.py` and review the diff.
"""

import importlib
import json
import re
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

HERE = Path(__file__).parent / "help_texts"
COMMANDS = {
    "prednet-import": "prednet_keras.cli.imports",
    "prednet-data": "prednet_keras.cli.data",
    "prednet-env": "prednet_keras.cli.env",
    "prednet-train": "prednet_keras.cli.train",
    "prednet-eval": "prednet_keras.cli.eval",
    "prednet-study": "prednet_keras.cli.study",
    "prednet-bench": "prednet_keras.cli.bench",
}


def _commands(name, command):
    """(name, command) of `command` and, for a group, of every subcommand, depth first."""
    yield name, command
    if isinstance(command, click.Group):
        for sub_name in sorted(command.commands):
            yield from _commands(f"{name} {sub_name}", command.commands[sub_name])


def _help(path):
    result = CliRunner().invoke(COMMAND_ROOTS[path[0]], [*path[1:], "--help"], prog_name=path[0],
                                terminal_width=110)
    assert result.exit_code == 0, result.output
    return result.output


def _shown(value):
    # A custom type's default repr names its address, which differs from run to run.
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


def _parameters(command):
    """Each parameter's names, default, type and flag form, in the command's order."""
    out = []
    for param in command.params:
        out.append({
            "name": param.name, "opts": list(param.opts), "secondary_opts": list(param.secondary_opts),
            "default": _shown(param.default), "type": _shown(param.type), "required": param.required,
            "multiple": param.multiple, "is_flag": getattr(param, "is_flag", False),
            "show_default": getattr(param, "show_default", None), "expose_value": param.expose_value,
            "is_eager": param.is_eager,
        })
    return out


COMMAND_ROOTS = {script: importlib.import_module(module).main for script, module in COMMANDS.items()}
ALL = [(name, command) for script, root in COMMAND_ROOTS.items() for name, command in _commands(script, root)]


def _file(name):
    return HERE / (name.replace(" ", "_") + ".txt")


def _snapshot(name, command):
    return _help(name.split(" ")) + "\n--- parameters\n" + json.dumps(_parameters(command), indent=1) + "\n"


@pytest.mark.parametrize("name", [name for name, _ in ALL])
def test_help_and_options_are_unchanged(name):
    command = dict(ALL)[name]
    assert _snapshot(name, command) == _file(name).read_text(encoding="utf-8"), (
        f"{name} --help or its options changed; see this module's docstring")


def test_every_command_has_its_file():
    assert sorted(p.name for p in HERE.glob("*.txt")) == sorted(_file(name).name for name, _ in ALL)


if __name__ == "__main__":
    HERE.mkdir(exist_ok=True)
    for old in HERE.glob("*.txt"):
        old.unlink()
    for name, command in ALL:
        _file(name).write_text(_snapshot(name, command), encoding="utf-8")
    sys.exit(0)
