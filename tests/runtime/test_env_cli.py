"""prednet-env: requested vs effective from a configured child, JSON for machines,
user errors as one clear line with a non-zero exit."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from prednet_keras.cli.env import main

from tests.runtime._helpers import installed


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.slow  # a fresh process or a training: the full suite, not the fast loop
def test_json_reports_requested_effective_and_fingerprint():
    result = invoke("--backend", "tensorflow", "--threads", "1", "--deterministic", "--no-onednn", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["requested"]["threads"] == 1 and report["requested"]["deterministic"] is True
    effective = report["effective"]
    assert (effective["threads"], effective["interop_threads"]) == (1, 1)
    assert effective["deterministic"] is True and effective["onednn"] is False
    fingerprint = report["fingerprint"]
    assert fingerprint["cpu"]["logical_cores"] >= 1 and fingerprint["python"]["version"]
    assert fingerprint["packages"]["keras"] and fingerprint["keras_backend"] == "tensorflow"
    assert "tensorflow" in fingerprint["imported_frameworks"]
    assert fingerprint["environment"]["KERAS_BACKEND"] == "tensorflow"
    assert "blas" in fingerprint


@pytest.mark.slow  # a fresh process or a training: the full suite, not the fast loop
@pytest.mark.skipif(not installed("torch"), reason="torch not installed")
def test_table_shows_requested_vs_effective():
    result = invoke("--backend", "torch", "--threads", "1", "--no-cudnn", "--no-tf32")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "Run settings: requested vs effective" in text
    assert "Environment fingerprint" in text
    row = next(line for line in text.splitlines() if " cudnn " in line)
    assert row.count("off") == 2 and "ok" in row


@pytest.mark.skipif(not installed("jax"), reason="jax not installed")
def test_not_strict_records_not_available():
    result = invoke("--backend", "jax", "--no-cudnn", "--no-strict", "--json")
    assert result.exit_code == 0, result.output
    effective = json.loads(result.stdout)["effective"]
    assert effective["cudnn"] == "not available"
    assert "torch" in effective["not_available"]["cudnn"]


@pytest.mark.parametrize(
    "args, message, status",
    [
        (["--backend", "jax", "--no-cudnn"], "cuDNN cannot be switched off on jax", 1),
        (["--backend", "tensorflow", "--tf32"], "TF32 is a mode of NVIDIA GPUs", 1),
        # A malformed option value is a usage error, as Click reports its own (exit status 2).
        (["--backend", "torch", "--device", "tpu"], "Unknown device", 2),
    ],
)
def test_user_errors_are_one_clear_message(args, message, status):
    result = invoke(*args)
    assert result.exit_code == status
    assert message in result.output and "Traceback" not in result.output


def test_real_command_exit_status_and_no_traceback():
    # The parent imports the package; a light backend keeps that quick.
    env = dict(os.environ, KERAS_BACKEND="torch" if installed("torch") else "tensorflow")
    completed = subprocess.run(
        [sys.executable, "-m", "prednet_keras.cli.env", "--backend", "tensorflow", "--no-cudnn"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 1
    assert "Error: Unsupported on tensorflow" in completed.stderr
    assert "Traceback" not in completed.stderr
