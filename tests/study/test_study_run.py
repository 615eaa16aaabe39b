"""prednet-study run end to end: real training processes on this CPU, killed and resumed,
two "machines" merged into one report."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from prednet_keras.cli.study import main as study_cli
from prednet_keras.runtime import childproc
from prednet_keras.session.lock import FolderLock
from prednet_keras.study import runner
from prednet_keras.study.spec import SpecError, load_spec
from tests.process_state import describe_process

# Slow (real studies in subprocesses): in the full suite, not in the fast loop (pytest -m "not slow").
pytestmark = pytest.mark.slow

# 2 configurations x 3 seeds x 2 replicates of a tiny autoencoder protocol.
SPEC = """
name = "tiny"
model = "autoencoder"
seeds = 3
replicates = 2
trajectory_points = 3
workers = 2

[train]
protocol = "quick"
images = 30

[runtime]
backend = "tensorflow"
device = "cpu"
deterministic = true

[configurations.one-thread]
threads = 1

[configurations.two-threads]
threads = 2
"""


def study_command(*args):
    return [sys.executable, "-m", "prednet_keras.cli.study", *map(str, args)]


def final_runs(folder):
    return sorted(p for p in Path(folder, "runs").glob("*/seed-*") if p.is_dir())


def partial_runs(folder):
    return sorted(Path(folder, "runs").glob("*/.partial-*"))


def processes_writing_to(folder):
    """PIDs of processes whose command line names `folder` (the training workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(folder) in command and "prednet_keras.session.worker" in command:
                found.append(int(entry.name))
    return found


def describe_processes(pids, run_folders):
    """What a failed wait shows: where each process is, and the end of each unfinished run's log."""
    lines = [f"process {pid}: {describe_process(pid)}" for pid in pids]
    for folder in run_folders:
        log = folder / "log.txt"
        tail = log.read_text(errors="replace")[-2000:] if log.is_file() else "(no log)"
        lines.append(f"{folder.name}/log.txt ends:\n{tail}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "tiny.toml"
    path.write_text(SPEC)
    return path


@pytest.fixture(scope="module")
def killed_and_resumed(spec_file, tmp_path_factory):
    """Machine A: the one-thread arm, killed mid-way (SIGKILL) and resumed."""
    out = tmp_path_factory.mktemp("machine-a") / "study"
    first = subprocess.Popen(study_command("run", spec_file, "-o", out, "--only", "one-thread", "--quiet"),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and first.poll() is None:
        if len(final_runs(out)) >= 1 and partial_runs(out):
            break
        time.sleep(0.2)
    assert first.poll() is None, "the study finished before it could be killed:\n" + first.stdout.read()
    finished_before = {p.name: (p / "manifest.json").read_bytes() for p in final_runs(out)}
    interrupted = [p.name for p in partial_runs(out)]
    first.send_signal(signal.SIGKILL)
    first.wait()
    # Its training processes die with it (SIGTERM from the kernel; ended regardless PARENT_GONE_GRACE s after),
    # none left writing. The margin is for a loaded machine; a failure says where the survivors were.
    deadline = time.monotonic() + childproc.PARENT_GONE_GRACE + 50
    while processes_writing_to(out) and time.monotonic() < deadline:
        time.sleep(0.2)
    survivors = processes_writing_to(out)
    assert survivors == [], describe_processes(survivors, partial_runs(out))
    second = subprocess.run(study_command("run", spec_file, "-o", out, "--only", "one-thread", "--quiet"),
                            capture_output=True, text=True, timeout=600)
    return out, finished_before, interrupted, second


def test_killed_study_resumes_without_redoing_or_losing_runs(killed_and_resumed):
    out, finished_before, interrupted, second = killed_and_resumed
    assert second.returncode == 0, second.stdout + second.stderr
    assert "unfinished run folder" in second.stderr and "start again" in second.stderr
    runs = final_runs(out)
    assert [p.name for p in runs] == [f"seed-000{s}-r{r}" for s in range(3) for r in (1, 2)]
    assert partial_runs(out) == []
    for path in runs:
        manifest = json.loads((path / "manifest.json").read_text())
        assert manifest["status"] == "complete"
        assert manifest["study"]["configuration"] == "one-thread"
        assert manifest["initial_weights"]["checksum"] == manifest["study"]["seed_checksum"]
        assert (path / "trajectory.npz").is_file() and (path / "log.txt").is_file()
    # Finished runs were not touched; the killed ones were trained again from the start.
    for name, data in finished_before.items():
        assert (out / "runs" / "one-thread" / name / "manifest.json").read_bytes() == data
    for name in interrupted:
        assert (out / "runs" / "one-thread" / name.removeprefix(".partial-")).is_dir()
    # Every run was done exactly once: one session each.
    assert all(len(json.loads((p / "manifest.json").read_text())["sessions"]) == 1 for p in runs)
    record = json.loads((out / "study.json").read_text())
    assert len(record["invocations"]) == 2
    # TensorFlow runs: no compilation cache is used or recorded.
    assert [i["compile_cache"] for i in record["invocations"]] == [None, None]
    # The invocations and every run record the code they ran: this checkout's commit, where it is one.
    from prednet_keras.runtime.code_provenance import code_provenance

    commit = code_provenance()["commit"]
    assert [i["code"]["commit"] for i in record["invocations"]] == [commit, commit]
    assert {json.loads((p / "manifest.json").read_text())["code"]["commit"] for p in runs} == {commit}
    assert not (out / ".jax-compilation-cache").exists()


def test_running_again_does_nothing(killed_and_resumed, spec_file):
    out = killed_and_resumed[0]
    before = {p: (p / "manifest.json").stat().st_mtime_ns for p in final_runs(out)}
    result = CliRunner().invoke(study_cli, ["run", str(spec_file), "-o", str(out), "--only", "one-thread"])
    assert result.exit_code == 0, result.output
    assert "6 runs planned, 6 already done, 0 to run" in result.output
    assert {p: (p / "manifest.json").stat().st_mtime_ns for p in final_runs(out)} == before


def test_two_machines_merge_into_one_report(killed_and_resumed, spec_file, tmp_path):
    machine_a = killed_and_resumed[0]
    machine_b = tmp_path / "machine-b"
    result = subprocess.run(study_command("run", spec_file, "-o", machine_b, "--only", "two-threads", "-j", "2"),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "This machine's part is done" in result.stderr
    # Each machine made the seeds' starting points itself: the same bytes.
    for seed in range(3):
        a = json.loads((machine_a / "seeds" / f"seed-000{seed}" / "seed.json").read_text())
        b = json.loads((machine_b / "seeds" / f"seed-000{seed}" / "seed.json").read_text())
        assert a["checksum"] == b["checksum"]
    report_dir = tmp_path / "report"
    result = subprocess.run(study_command("report", machine_a, machine_b, "-o", report_dir),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((report_dir / "report.json").read_text())
    assert report["runs_used"] == 12
    (section,) = report["protocols"]
    configs = {c["name"]: c for c in section["configurations"]}
    assert set(configs) == {"one-thread", "two-threads"}
    for config in configs.values():
        assert config["summary"]["n"] == 3
        assert config["determinism"]["status"] == "deterministic"
    (pair,) = section["comparisons"]["pairs"]
    # TensorFlow's deterministic CPU kernels give the same bits with 1 and 2 threads
    # for this model; if that ever changes, the verdict must still be one of the four.
    assert pair["verdict_kind"] in ("identical", "equivalent", "difference", "inconclusive")
    for name in ("report.md", "final_metric.png", "loss_curves.png", "divergence.png"):
        assert (report_dir / name).is_file() and (report_dir / name).stat().st_size > 0


def test_a_folder_keeps_its_protocol_and_configurations(killed_and_resumed, spec_file, tmp_path):
    out = killed_and_resumed[0]
    changed = tmp_path / "changed.toml"
    changed.write_text(SPEC.replace("images = 30", "images = 40"))
    with pytest.raises(SpecError, match=r"another \[train\] images"):
        runner.run_study(load_spec(changed), out, only=["one-thread"])
    renamed = tmp_path / "renamed.toml"
    renamed.write_text(SPEC.replace("[configurations.two-threads]\nthreads = 2",
                                    "[configurations.one-thread-b]\nthreads = 2").replace(
        "[configurations.one-thread]\nthreads = 1", "[configurations.one-thread]\nthreads = 3"))
    with pytest.raises(SpecError, match="configuration one-thread differs"):
        runner.run_study(load_spec(renamed), out, only=["one-thread"])


def test_a_second_study_process_is_refused(killed_and_resumed, spec_file):
    out = killed_and_resumed[0]

    def contents():
        return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.name not in (runner.LOCK, runner.LOCK_OWNER))

    before = contents()
    with FolderLock(out, out / runner.LOCK, out / runner.LOCK_OWNER):
        result = subprocess.run(study_command("run", spec_file, "-o", out, "--only", "one-thread"),
                                capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert "Another prednet-study run (pid {}".format(os.getpid()) in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    # The lock let go, its holder's record with it; nothing else was touched.
    assert contents() == before and not (out / runner.LOCK_OWNER).exists()


def test_not_a_study_folder_is_never_written_into(spec_file, tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    result = CliRunner().invoke(study_cli, ["run", str(spec_file), "-o", str(tmp_path)])
    assert result.exit_code == 1
    assert "is not a study folder" in result.output
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != runner.LOCK) == ["mine.txt"]


def test_runs_sharing_the_machine_equal_runs_alone(killed_and_resumed, spec_file, tmp_path):
    # Machine A trained 2 runs at a time (the spec's workers); the same runs one at a time must give the same
    # numbers: concurrency is the study's way to fill a GPU, so it must not change any seed's result.
    import numpy as np

    out = killed_and_resumed[0]
    alone_spec = tmp_path / "alone.toml"
    alone_spec.write_text(spec_file.read_text().replace("seeds = 3", "seeds = 1").replace("replicates = 2", "replicates = 1")
                          .replace("workers = 2", "workers = 1"))
    alone = tmp_path / "alone"
    result = subprocess.run(study_command("run", alone_spec, "-o", alone, "--only", "one-thread", "--no-report", "-q"),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    shared_run, alone_run = out / "runs" / "one-thread" / "seed-0000-r1", alone / "runs" / "one-thread" / "seed-0000-r1"
    shared_manifest = json.loads((shared_run / "manifest.json").read_text())
    alone_manifest = json.loads((alone_run / "manifest.json").read_text())
    assert alone_manifest["result"]["weights_checksum"] == shared_manifest["result"]["weights_checksum"]
    with np.load(shared_run / "trajectory.npz") as a, np.load(alone_run / "trajectory.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for name in a.files:
            if a[name].dtype.kind == "f":
                np.testing.assert_array_equal(a[name], b[name], err_msg=name)



JAX_SPEC = """
name = "tiny-jax"
model = "autoencoder"
seeds = 1
replicates = 2
workers = 2
trajectory_points = 3

[train]
protocol = "quick"
images = 30

[runtime]
backend = "jax"
device = "cpu"
threads = 1
deterministic = true

[configurations.jax-cpu]
"""


def test_a_jax_run_that_loaded_the_shared_compilation_cache_equals_one_that_compiled(tmp_path):
    # Two replicates of one seed: r1 compiles and writes the study's cache while r2 waits, then r2 loads the
    # compiled training step. Same seed, same starting point, deterministic: the numbers must be the same.
    import numpy as np

    from prednet_keras.runtime import compile_cache

    spec = tmp_path / "jax.toml"
    spec.write_text(JAX_SPEC)
    study = tmp_path / "study"
    result = subprocess.run(study_command("run", spec, "-o", study, "--no-report", "-q"),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    cache = study / compile_cache.FOLDER
    invocation = json.loads((study / "study.json").read_text())["invocations"][-1]
    assert invocation["compile_cache"] == str(cache)
    compiled, loaded = (study / "runs" / "jax-cpu" / f"seed-0000-r{r}" for r in (1, 2))
    manifests = [json.loads((run / "manifest.json").read_text()) for run in (compiled, loaded)]
    for manifest in manifests:
        assert manifest["fingerprint"]["environment"][compile_cache.DIR_ENV] == str(cache.resolve())
    # r2 started held at its gate while r1 compiled, went on once r1 had recorded an update (the executor's
    # order: tests/study/test_local_executor.py) and read the training step from the cache: JAX stamps an
    # entry's -atime file, in ns, when it writes the entry and again when a process reads it; r2's read comes
    # after r1's write by r2's loading, building and tracing.
    assert "Waiting for this configuration's first run" in (loaded / "log.txt").read_text()
    first, second = (m["sessions"][0] for m in manifests)
    assert second["started"] >= first["started"], (first, second)
    (step_entry,) = [p for p in cache.glob("jit_train_step-*-cache")]
    read_at = int.from_bytes(step_entry.with_name(step_entry.name[: -len("cache")] + "atime").read_bytes(), "little")
    assert read_at / 1e9 > step_entry.stat().st_mtime + 0.2, (read_at / 1e9, step_entry.stat().st_mtime)
    assert manifests[0]["result"]["weights_checksum"] == manifests[1]["result"]["weights_checksum"]
    with np.load(compiled / "trajectory.npz") as a, np.load(loaded / "trajectory.npz") as b:
        assert a.files
        for name in a.files:
            if a[name].dtype.kind == "f":
                np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    losses = [[row.split(",")[:2] for row in (run / "history.csv").read_text().splitlines()]
              for run in (compiled, loaded)]
    assert len(losses[0]) > 2 and losses[0] == losses[1]


def test_a_folder_that_holds_its_own_spec_is_the_study_folder(tmp_path):
    """A study planned in the folder it fills (the spec and a pre-registration beside it, committed before
    any run) is recorded there; the same folder with seeds or runs left by an unrecorded study is not."""
    from prednet_keras.study.spec import load_spec

    folder = tmp_path / "device"
    folder.mkdir()
    spec_path = folder / "spec.toml"
    spec_path.write_text('model = "prednet-chainer"\n[train]\nprotocol = "quick"\n'
                         '[configurations.a]\nbackend = "jax"\n')
    (folder / "preregistration.md").write_text("the plan")
    text = spec_path.read_text()
    runner._record_study(load_spec(spec_path), folder, spec_path, ["prednet-study", "run"])
    assert (folder / runner.STUDY_RECORD).is_file() and spec_path.read_text() == text
    other = tmp_path / "other"
    (other / "seeds").mkdir(parents=True)
    (other / "spec.toml").write_text(text)
    with pytest.raises(runner.StudyFolderError, match="is not a study folder"):
        runner._record_study(load_spec(other / "spec.toml"), other, other / "spec.toml", ["prednet-study"])
