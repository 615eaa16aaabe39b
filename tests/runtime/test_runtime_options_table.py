"""The runtime options' table (issue 38): a throwaway switch added to a copy of RUNTIME_OPTIONS becomes a Click
option of a command, a study spec key with its rule, a RuntimeConfig field, a key of the manifest's
runtime.requested record and of the child's environment, with no other file changed; and the table itself
keeps the orders users and files have had."""

import dataclasses
import json

import click
import pytest
from click.testing import CliRunner

from prednet_keras.cli.options import runtime_config, runtime_options
from prednet_keras.runtime import RuntimeConfig, environment_for
from prednet_keras.runtime.config import runtime_config_class
from prednet_keras.runtime.environment import CONFIG_ENV
from prednet_keras.runtime.options import RUNTIME_OPTIONS, RuntimeOption, flag_order, names, recorded_order
from prednet_keras.session.records import RuntimeRequested, runtime_requested_record
from prednet_keras.study.spec import rules as spec_rules
from prednet_keras.options.value_rules import RuleError

FAST_MATH = RuntimeOption(
    "fast_math", "switch", None,
    doc="the compiler's fast-math rewrites; None keeps the default.",
    help="Fast-math rewrites of floating-point code [default: the framework's].",
)
TABLE = RUNTIME_OPTIONS + (FAST_MATH,)


def command_for(options):
    """A Click command with the runtime options of `options` that prints the RuntimeConfig it makes (a
    throwaway table's options included); shared with tests/test_backends_table.py."""
    @click.command()
    @runtime_options(options=options)
    def command(**values):
        config = runtime_config(values, config_class=runtime_config_class(options))
        click.echo(json.dumps(config.to_dict()))

    return command


def test_a_throwaway_switch_is_a_click_option():
    command = command_for(TABLE)
    help_text = CliRunner().invoke(command, ["--help"], terminal_width=110).output
    assert "--fast-math / --no-fast-math" in help_text
    assert "Fast-math rewrites of floating-point code" in help_text
    result = CliRunner().invoke(command, ["--backend", "tensorflow", "--fast-math"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["fast_math"] is True
    # The real commands do not have it: only the copy of the table changed.
    assert "--fast-math" not in CliRunner().invoke(command_for(RUNTIME_OPTIONS), ["--help"]).output


def test_a_throwaway_switch_is_a_spec_key_with_its_rule():
    rules = spec_rules.runtime_rules(TABLE)
    assert list(rules)[-1] == "fast_math"
    assert rules["fast_math"].check(True) is True
    with pytest.raises(RuleError, match="true or false"):
        rules["fast_math"].check("yes")
    assert "fast_math" not in spec_rules.RUNTIME_RULES


def test_a_throwaway_switch_is_in_the_config_the_records_and_the_child_environment():
    config_class = runtime_config_class(TABLE)
    config = config_class(backend="jax", fast_math=False)
    assert list(config.to_dict())[-1] == "fast_math"
    assert "fast_math: the compiler's fast-math rewrites" in config_class.__doc__
    with pytest.raises(ValueError, match="`fast_math` must be True, False or None, got 'no'"):
        config_class(fast_math="no")

    record_class = runtime_requested_record(TABLE)
    record = record_class.from_dict(config.to_dict())
    assert record.fast_math is False and not record.extra
    assert record.to_dict() == config.to_dict()
    assert list(record_class().to_dict()) == list(config.to_dict())

    assert json.loads(environment_for(config, {})[CONFIG_ENV])["fast_math"] is False
    assert "fast_math" not in {f.name for f in dataclasses.fields(RuntimeConfig)}


def test_the_orders_kept_from_before_the_table():
    # The spec's (the error for an unknown key lists them), --help's and the manifest's, as before the table.
    assert names() == ("backend", "device", "threads", "interop_threads", "deterministic", "cudnn", "tf32", "onednn",
                       "autotune", "xla", "strict", "precision", "devices")
    assert names(flag_order()) == ("backend", "device", "threads", "devices", "interop_threads", "deterministic",
                                   "cudnn", "tf32", "onednn", "autotune", "xla", "precision", "strict")
    recorded = ("backend", "device", "threads", "deterministic", "cudnn", "tf32", "onednn", "autotune", "strict",
                "xla", "interop_threads", "precision", "devices")
    assert names(recorded_order()) == recorded
    assert tuple(RuntimeConfig().to_dict()) == recorded
    assert tuple(RuntimeRequested().to_dict()) == recorded
    # A new option needs no place of its own: it comes last everywhere.
    assert names(flag_order(TABLE))[-1] == names(recorded_order(TABLE))[-1] == "fast_math"
