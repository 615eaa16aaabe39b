"""What prednet-study says to its user: examples that exist, a resume hint to copy, a quick spec that fits."""

import sys

from click.testing import CliRunner

from prednet_keras.cli.study import main
from prednet_keras.study import runner
from prednet_keras.study.spec import load_spec, ready_specs, resolve_spec_path


def test_the_resume_hint_is_the_command_that_was_typed(monkeypatch, tmp_path):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_study", interrupted)
    monkeypatch.setattr(sys, "argv", ["prednet-study", "run", "quick", "-o", str(tmp_path / "my results")])
    result = CliRunner().invoke(main, ["run", "quick", "-o", str(tmp_path / "my results")])
    assert result.exit_code == 130
    assert f"Resume with: prednet-study run quick -o '{tmp_path / 'my results'}'" in result.output
    assert "specs/quick.toml" not in result.output


def test_the_quick_spec_fits_the_two_cores_it_is_written_for():
    spec = load_spec(resolve_spec_path("quick"))
    threads = sorted((c.runtime.get("threads") or 2 for c in spec.configurations), reverse=True)
    assert sum(threads[:spec.workers]) <= 2  # the local executor warns above the machine's cores


def test_the_help_examples_name_specs_that_exist():
    result = CliRunner().invoke(main, ["run", "--help"])
    assert result.exit_code == 0
    for line in result.output.splitlines():
        words = line.split()
        if words[:2] == ["prednet-study", "run"] and not words[2].endswith(".toml"):
            assert words[2] in ready_specs(), line
    assert "specs/" not in result.output
