"""profiling: the trace summary (against hand-made traces) and prednet-bench --profile end to end on JAX
(Chrome traces) and TensorFlow (xplane files)."""

import gzip
import json

import pytest
from click.testing import CliRunner

from prednet_keras.bench import profiling
from prednet_keras.cli.bench import main as bench_main

# Slow (profiled benchmark processes): in the full suite, not in the fast loop (pytest -m "not slow").
pytestmark = pytest.mark.slow


def _trace(events, names):
    """A Chrome trace: process/thread names as metadata events, then the complete (X) events."""
    meta = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": names}}]
    return {"traceEvents": meta + [dict(ph="X", pid=1, tid=7, name=n, ts=ts, dur=dur) for n, ts, dur in events]}


def test_busy_time_counts_overlaps_once_and_groups_instances(tmp_path):
    session = tmp_path / "plugins" / "profile" / "run1"
    session.mkdir(parents=True)
    # fusion.1 [0, 10), fusion.2 [5, 20) overlaps it; gap [20, 30); conv [30, 40); a second conv inside it.
    events = [("fusion.1", 0, 10), ("fusion.2", 5, 15), ("custom-call.3", 30, 10), ("custom-call.4", 32, 2)]
    with gzip.open(session / "host.trace.json.gz", "wt") as handle:
        json.dump(_trace(events, "Stream #13(Compute)"), handle)
    # jax writes the same events a second time; they must not count twice.
    with gzip.open(session / "perfetto_trace.json.gz", "wt") as handle:
        json.dump(_trace(events, "Stream #13(Compute)"), handle)

    summary = profiling.summarize(tmp_path)
    assert summary["files"] == [str(session / "host.trace.json.gz")]
    (line,) = summary["timelines"]
    assert (line["process"], line["thread"]) == ("/device:GPU:0", "Stream #13(Compute)")
    assert line["span_ms"] == pytest.approx(0.040)
    assert line["busy_ms"] == pytest.approx(0.030)  # [0, 20) and [30, 40)
    assert line["busy_share"] == pytest.approx(0.75)
    assert line["events"] == 4
    by_name = {entry["name"]: entry for entry in line["top"]}
    assert set(by_name) == {"fusion", "custom-call"}
    assert by_name["fusion"]["count"] == 2 and by_name["fusion"]["total_ms"] == pytest.approx(0.025)
    assert by_name["custom-call"]["mean_us"] == pytest.approx(6.0)
    assert by_name["fusion"]["share"] == pytest.approx(25 / 37, abs=1e-4)
    text = profiling.format_summary(summary, steps=2)
    assert "busy 0.0 of 0.0 ms (75%), 4 events, 2 events per step" in text


def test_missing_and_unreadable_traces_are_named(tmp_path):
    with pytest.raises(profiling.ProfileError, match="no profiler trace"):
        profiling.summarize(tmp_path)
    (tmp_path / "trace.json").write_text("{not json")
    with pytest.raises(profiling.ProfileError, match="trace.json is not a readable Chrome trace"):
        profiling.summarize(tmp_path)


def test_bench_profile_on_jax(tmp_path):
    pytest.importorskip("jax")
    folder, out = tmp_path / "traces", tmp_path / "bench.json"
    args = ["--backend", "jax", "--stack-sizes", "3,4,8", "--size", "16x16", "--nt", "3", "--steps", "1",
            "--warmup", "1", "--mode", "train", "--profile", str(folder), "--json", str(out), "--quiet"]
    result = CliRunner().invoke(bench_main, args)
    assert result.exit_code == 0, result.output
    profile = json.loads(out.read_text())["results"][0]["train"]["profile"]
    assert profile["steps"] == 5 and profile["folder"].startswith(str(folder))
    timelines = profile["summary"]["timelines"]
    # The compiled training step ran 5 times, and XLA's convolutions are among what the trace recorded.
    assert any(entry["name"] == "conv_general_dilated" for line in timelines for entry in line["top"])
    assert "train profile (5 steps" in result.output
    # A folder with traces in it is not added to without --overwrite.
    again = CliRunner().invoke(bench_main, args[:-3] + ["--quiet"])
    assert again.exit_code == 2 and "--profile" in again.output and "not empty" in again.output


def test_bench_profile_on_tensorflow_reads_its_xplane_file(tmp_path):
    pytest.importorskip("tensorflow")
    folder, out = tmp_path / "traces", tmp_path / "bench.json"
    args = ["--backend", "tensorflow", "--stack-sizes", "3,4,8", "--size", "16x16", "--nt", "3", "--steps", "1",
            "--warmup", "1", "--mode", "train", "--threads", "2", "--profile", str(folder), "--json", str(out), "-q"]
    result = CliRunner().invoke(bench_main, args)
    assert result.exit_code == 0, result.output
    profile = json.loads(out.read_text())["results"][0]["train"]["profile"]
    assert [path.endswith(".xplane.pb") for path in profile["summary"]["files"]] == [True]
    names = {entry["name"] for line in profile["summary"]["timelines"] for entry in line["top"]}
    # Op types, not per-instance names: the weight gradients of the convolutions add up under one name
    # (TensorFlow's own kernel, or oneDNN's where it is on).
    assert {"Conv2DBackpropFilter", "_MklNativeConv2DBackpropFilter"} & names, sorted(names)
