"""prednet-bench: tiny measurements through the CLI, the JSON they leave, and the refusals."""

import json

import pytest
from click.testing import CliRunner

from prednet_keras import backends, bench
from prednet_keras._backend_choice import default_backend
from prednet_keras.bench import measure, report
from prednet_keras.cli.bench import main as bench_main

# Slow (benchmark processes): in the full suite, not in the fast loop (pytest -m "not slow").
pytestmark = pytest.mark.slow

# Small enough for 2 CPU cores: 3 layers of 3/4/8 channels, 16x16 frames, 3-frame
# sequences, 1 warm-up step and 2 timed steps per phase.
TINY = ["--stack-sizes", "3,4,8", "--size", "16x16", "--nt", "3", "--steps", "2", "--warmup", "1", "--threads", "2"]


def _invoke(args):
    return CliRunner().invoke(bench_main, [str(a) for a in args])


def _check_phase(phase, frames_per_step, steps=2, warmup=1):
    assert phase["fps"] > 0
    assert phase["frames_per_step"] == frames_per_step
    assert len(phase["step_seconds"]) == phase["steps"] == steps
    assert len(phase["warmup_seconds"]) == phase["warmup"] == warmup
    stats = phase["step_ms"]
    assert 0 < stats["min_ms"] <= stats["p10_ms"] <= stats["median_ms"] <= stats["p90_ms"] <= stats["max_ms"]
    assert stats["min_ms"] == pytest.approx(min(phase["step_seconds"]) * 1000, rel=1e-3, abs=1e-2)
    # frames/s is the frames of the timed steps over their summed time.
    assert phase["fps"] == pytest.approx(frames_per_step * steps / sum(phase["step_seconds"]), rel=1e-3)
    assert phase["memory"]["host_rss_peak_bytes"] > 0
    assert phase["memory"]["device_peak_bytes"] is None
    assert phase["memory"]["device_peak_source"].startswith("not available")


def test_tiny_prednet_json_table_and_overwrite(tmp_path):
    out = tmp_path / "bench.json"
    plot = tmp_path / "bench.png"
    out.write_text("earlier results\n")

    refused = _invoke(TINY + ["--json", out])
    assert refused.exit_code == 2, refused.output
    assert "exists" in refused.output and "--overwrite" in refused.output
    assert out.read_text() == "earlier results\n"

    result = _invoke(TINY + ["--json", out, "--plot", plot, "--overwrite", "--quiet"])
    assert result.exit_code == 0, result.output
    # The table (stdout) names the columns and holds one row for the configuration.
    lines = result.stdout.splitlines()
    header = lines[0].split()
    for column in ("model", "backend", "device", "batch", "size", "train", "infer", "median/p90", "peak"):
        assert column in header
    row = lines[2].split()
    assert row[:6] == ["prednet", default_backend(), "cpu", "4", "16x16", "3"]
    assert "synthetic" in result.stdout
    assert plot.stat().st_size > 0

    document = json.loads(out.read_text())
    assert document["format"] == "prednet-bench"
    assert "synthetic" in document["data"]
    assert document["command"][0] == "prednet-bench"
    (entry,) = document["results"]
    assert entry["config"]["stack_sizes"] == [3, 4, 8] and entry["config"]["size"] == [16, 16]
    assert entry["runtime"]["effective"]["backend"] == default_backend()
    assert entry["runtime"]["effective"]["threads"] == 2
    fingerprint = entry["fingerprint"]
    for key in ("os", "cpu", "python", "packages", "environment"):
        assert key in fingerprint
    assert backends.named(default_backend()).package in fingerprint["imported_frameworks"]
    _check_phase(entry["train"], frames_per_step=4 * 3)
    _check_phase(entry["infer"], frames_per_step=4 * 3)
    # Training is timed as prednet-train runs it: model.fit, the time loop unrolled.
    assert entry["config"]["unroll"] is True
    assert "model.fit" in entry["train"]["what"] and "unrolled" in entry["train"]["what"]
    # The same figures in the table as in the JSON.
    assert f"{entry['train']['fps']:.2f}" in row and f"{entry['infer']['fps']:.2f}" in row


def test_tiny_prednet_in_mixed_bfloat16(tmp_path):
    out = tmp_path / "bench.json"
    result = _invoke(TINY + ["--mode", "train", "--precision", "mixed_bfloat16", "--json", out, "--quiet"])
    assert result.exit_code == 0, result.output
    row = result.stdout.splitlines()[2]
    assert row.split()[:3] == ["prednet", default_backend(), "mixed_bfloat16"]
    (entry,) = json.loads(out.read_text())["results"]
    assert entry["runtime"]["requested"]["precision"] == "mixed_bfloat16"
    assert entry["runtime"]["effective"]["precision"] == "mixed_bfloat16"
    _check_phase(entry["train"], frames_per_step=4 * 3)
    # What was timed: a model built under the policy (Keras' clear_session between phases resets it).
    assert entry["train"]["dtype_policy"] == "mixed_bfloat16"


def test_measure_keeps_the_dtype_policy_across_phases():
    """Each phase starts from a cleared Keras session; the model must still be built in the precision asked for."""
    import keras

    config = bench.BenchConfig(stack_sizes=(3, 4), size=(8, 8), nt=2, batch_size=1, steps=1, warmup=0,
                               mode="both").resolved()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        phases = measure.measure(config, jit_compile=False)
        assert keras.config.dtype_policy().name == "mixed_bfloat16"
    finally:
        keras.config.set_dtype_policy("float32")
    assert phases["train"]["dtype_policy"] == phases["infer"]["dtype_policy"] == "mixed_bfloat16"


def test_tiny_chainer_prednet_trains_one_window_at_batch_1():
    config = bench.BenchConfig(
        model="prednet-chainer", mode="train", batch_size=1, size=(16, 16), nt=3, stack_sizes=(3, 4, 8),
        steps=2, warmup=1,
    ).resolved()
    from prednet_keras import runtime

    result = bench.run_configuration(config, runtime.RuntimeConfig(backend="tensorflow", threads=2))
    assert "infer" not in result
    # One window of nt frame steps at batch 1 per update.
    _check_phase(result["train"], frames_per_step=3)
    assert "ChainerPredNetTrainer" in result["train"]["what"]
    assert result["fingerprint"]["cpu"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--stack-sizes", "3,4,8", "--size", "30x40"], "not divisible by 2**2 = 4"),
        (["--size", "128by160"], "is not a frame size HxW"),
        (["--sizes", "64x80,100x100"], "not divisible by 2**3 = 8"),
        (["--size", "64x80", "--sizes", "64x80"], "--size or --sizes"),
        (["--model", "prednet-chainer", "--batch-size", "4"], "batch 1"),
        (["--model", "autoencoder", "--nt", "5"], "--nt does not apply to --model autoencoder"),
        (["--autoencoder", "dense"], "--autoencoder applies only to --model autoencoder"),
        (["--model", "autoencoder", "--no-unroll"], "--unroll/--no-unroll applies only to --model prednet"),
        (["--batch-size", "4,0"], "must be >= 1"),
        (["--batch-size", "4,x"], "'4,x' is not a comma-separated list of integers (e.g. 4,16)"),
        (["--device", "tpu"], "Unknown device"),
        (["--device", "cpu", "--tf32"], "TF32"),
        (["--precision", "bfloat16"], "'bfloat16' is not one of 'float32', 'mixed_bfloat16'"),
    ],
)
def test_bad_options_are_usage_errors(args, message, tmp_path):
    out = tmp_path / "bench.json"
    result = _invoke(args + ["--json", out])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert not out.exists()


def test_step_statistics_and_table():
    stats = measure.step_statistics([0.010, 0.030, 0.020, 0.040, 0.050])
    assert stats["median_ms"] == pytest.approx(30.0)
    assert stats["min_ms"] == pytest.approx(10.0) and stats["max_ms"] == pytest.approx(50.0)
    assert stats["p10_ms"] == pytest.approx(14.0) and stats["p90_ms"] == pytest.approx(46.0)
    with pytest.raises(ValueError):
        measure.step_statistics([])

    memory = {"host_rss_peak_bytes": 2**30, "device_peak_bytes": 3 * 2**30}
    phase = {"fps": 1234.5, "step_ms": {"median_ms": 32.4, "p90_ms": 35.0}, "memory": memory}
    result = {
        "config": {"model": "prednet", "batch_size": 16, "size": [128, 160], "nt": 10, "steps": 20, "warmup": 3},
        "runtime": {"requested": {"backend": "jax", "device": "gpu"}, "effective": {"device": "gpu"}},
        "fingerprint": {"gpu": {"nvidia_smi": {"gpus": [{"name": "NVIDIA H200"}]}}},
        "train": phase,
    }
    table = report.format_table([result])
    row = table.splitlines()[2]
    for text in ("prednet", "jax", "gpu (NVIDIA H200)", "16", "128x160", "1234.50", "32.4/35.0", "host 1024 MiB, GPU 3072 MiB"):
        assert text in row


@pytest.mark.parametrize(
    "runtime, label",
    [
        ({"requested": {"backend": "torch"}, "jit_compile_used": False}, "torch"),
        ({"requested": {"backend": "torch"}, "jit_compile_used": True}, "torch compiled"),
        ({"requested": {"backend": "torch"}, "jit_compile_used": True,
          "effective": {"environment": {"TORCHINDUCTOR_CUDAGRAPHS": "1"}}}, "torch compiled cudagraphs"),
        ({"requested": {"backend": "torch"}, "jit_compile_used": True,
          "effective": {"environment": {"TORCHINDUCTOR_CUDAGRAPHS": "0"}, "precision": "mixed_bfloat16"}},
         "torch compiled mixed_bfloat16"),
        ({"requested": {"backend": "jax", "precision": "mixed_bfloat16"}}, "jax mixed_bfloat16"),
    ],
)
def test_the_backend_label_names_what_changes_the_program(runtime, label):
    # One line per program in the plots: torch.compile with Inductor's CUDA graphs is not plain torch.compile.
    from prednet_keras.session.records import Runtime

    assert report.backend_text(Runtime.from_dict(runtime)) == label
