"""prednet-study run --executor ray on a local Ray cluster (loopback only): workers killed mid-study, the
driver killed and resumed, every run exactly once and the same report as the local executor; GPU arms only
placed where GPUs are declared (fake GPUs)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Slow (a Ray cluster and real study runs): in the full suite, not in the fast loop (pytest -m "not slow").
pytestmark = pytest.mark.slow

# Before Ray is imported (it reads them then): loopback only, no usage statistics.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

ray = pytest.importorskip("ray")

from click.testing import CliRunner  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from prednet_keras.cli.study import main as study_cli  # noqa: E402
from prednet_keras.study import runner  # noqa: E402
from prednet_keras.study.executors import one_run, ray_executor
from prednet_keras.study.spec import parse_spec  # noqa: E402

from .test_study_run import (  # noqa: E402
    SPEC,
    final_runs,
    partial_runs,
    processes_writing_to,
    study_command,
)

# The end-to-end study's spec: 2 configurations (1 and 2 threads) x 2 seeds x 1 replicate.
TINY = SPEC.replace("seeds = 3", "seeds = 2").replace("replicates = 2", "replicates = 1").replace(
    "images = 30", "images = 20")
RUN_NAMES = [f"{config}/seed-000{seed}-r1" for config in ("one-thread", "two-threads") for seed in (0, 1)]
# Ray's processes and the drivers it serves use the loopback interface only.
RAY_ENV = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
NODE = {"include_dashboard": False, "node_ip_address": "127.0.0.1"}


def run_dir_of(pid):
    """The run folder a training process works on (its command line's argument); None once it has exited
    (between two reads of /proc a process can end, and its command line is then empty)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return argv[argv.index(b"train") + 1].decode() if b"train" in argv[:-1] else None


def parent_of(pid):
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def wait_for(condition, timeout, what, driver=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        if driver is not None and driver.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}" + (f" (driver exit {driver.poll()})" if driver else ""))


def comparable(report, root):
    """report.json without what differs between two folders of the same results (times, paths)."""
    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in ("created", "inputs", "path", "source")}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value.replace(str(root), "<study>") if isinstance(value, str) else value

    return clean(report)


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "tiny.toml"
    path.write_text(TINY)
    return path


@pytest.fixture(scope="module")
def ray_study(spec_file, tmp_path_factory):
    """The study on a 2-CPU local Ray cluster: a training process killed (the driver retries it), a Ray
    worker killed (Ray retries it), then the driver killed, and the same command run again."""
    out = tmp_path_factory.mktemp("ray") / "study"
    logs = tmp_path_factory.mktemp("ray-logs")
    cluster = Cluster(initialize_head=True, head_node_args=dict(NODE, num_cpus=2, num_gpus=0))
    try:
        command = study_command("run", spec_file, "-o", out, "--executor", "ray", "--address", cluster.address,
                                "--quiet", "--no-report")
        with open(logs / "first.txt", "w") as first_log:
            first = subprocess.Popen(command, stdout=first_log, stderr=subprocess.STDOUT, env=RAY_ENV)
            try:
                # 1. A training process, SIGKILLed mid-run: the task returns -9, the driver runs it again.
                victim = wait_for(lambda: processes_writing_to(out), 240, "a training process", first)[0]
                killed_run = run_dir_of(victim)
                time.sleep(1.5)
                os.kill(victim, signal.SIGKILL)
                # 2. The Ray worker of another run, SIGKILLed: its training process dies with it (SIGKILL),
                # Ray retries the task on a new worker, which remakes the partial folder from scratch.
                other = wait_for(lambda: [p for p in processes_writing_to(out) if run_dir_of(p) not in (None, killed_run)],
                                 240, "a second training process", first)[0]
                worker_run = run_dir_of(other)
                ray_worker = parent_of(other)
                assert "ray" in cmdline(ray_worker), cmdline(ray_worker)
                time.sleep(1.5)
                os.kill(ray_worker, signal.SIGKILL)
                # 3. The driver itself, SIGKILLed once a run is final and another one is training.
                wait_for(lambda: final_runs(out) and processes_writing_to(out), 240,
                         "a finished run and one in progress", first)
                finished_before = {p: (p / "manifest.json").read_bytes() for p in final_runs(out)}
                first.send_signal(signal.SIGKILL)
                first.wait()
            finally:
                if first.poll() is None:
                    first.kill()
                    first.wait()
        # Ray ends the dead driver's tasks; their training processes die with their workers.
        wait_for(lambda: not processes_writing_to(out), 60, "the dead driver's training processes to end")
        second = subprocess.run(command, capture_output=True, text=True, timeout=400, env=RAY_ENV)
        again = subprocess.run(command, capture_output=True, text=True, timeout=200, env=RAY_ENV)
    finally:
        cluster.shutdown()
    return {"out": out, "first": (logs / "first.txt").read_text(), "second": second, "again": again,
            "killed_run": killed_run, "worker_run": worker_run, "ray_worker": ray_worker,
            "finished_before": finished_before}


def test_every_run_exactly_once_despite_killed_workers_and_driver(ray_study):
    out, second = ray_study["out"], ray_study["second"]
    assert "retry   " in ray_study["first"] and "killed by SIGKILL" in ray_study["first"], ray_study["first"]
    assert second.returncode == 0, second.stdout + second.stderr
    assert "unfinished run folder" in second.stderr
    assert [f"{p.parent.name}/{p.name}" for p in final_runs(out)] == sorted(RUN_NAMES)
    assert partial_runs(out) == []
    for path in final_runs(out):
        manifest = json.loads((path / "manifest.json").read_text())
        assert manifest["status"] == "complete"
        assert len(manifest["sessions"]) == 1, path
        assert manifest["initial_weights"]["checksum"] == manifest["study"]["seed_checksum"]
        executor = manifest["study"]["executor"]
        assert executor["kind"] == "ray" and executor["node_ip"] == "127.0.0.1" and executor["node_id"]
        threads = manifest["runtime"]["requested"]["threads"]
        assert executor["resources"] == {"num_cpus": threads, "num_gpus": 0}
        assert manifest["fingerprint"]
    # Runs finished before the driver died were kept as they were.
    for path, data in ray_study["finished_before"].items():
        assert (path / "manifest.json").read_bytes() == data
    # The run whose Ray worker was killed ran (to the end) in another worker.
    worker_run = Path(ray_study["worker_run"])
    final = worker_run.parent / worker_run.name.removeprefix(one_run.PARTIAL)
    assert json.loads((final / "manifest.json").read_text())["study"]["executor"]["worker_pid"] != \
        ray_study["ray_worker"]
    # Each manifest says which attempt made it: the second, for the two runs retried (by the driver, by Ray)
    # that finished before the driver was killed; the first, for a run the next invocation started again.
    for retried in (ray_study["killed_run"], ray_study["worker_run"]):
        final = Path(retried).parent / Path(retried).name.removeprefix(one_run.PARTIAL)
        attempt = json.loads((final / "manifest.json").read_text())["study"]["executor"]["attempt"]
        finished_before = {p.resolve() for p in ray_study["finished_before"]}
        assert attempt == (2 if final.resolve() in finished_before else 1), (final, attempt)
    # Running it again does nothing.
    again = ray_study["again"]
    assert again.returncode == 0, again.stdout + again.stderr
    assert "4 runs planned, 4 already done, 0 to run" in again.stderr


def test_report_is_the_local_executors(ray_study, spec_file, tmp_path):
    local = tmp_path / "local"
    result = subprocess.run(study_command("run", spec_file, "-o", local, "--quiet", "--no-report"),
                            capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr
    reports = []
    for folder in (ray_study["out"], local):
        result = CliRunner().invoke(study_cli, ["report", str(folder), "-o", str(folder / "report"), "--no-plots"])
        assert result.exit_code == 0, result.output
        reports.append(comparable(json.loads((folder / "report" / "report.json").read_text()), folder))
    by_ray, by_local = reports
    assert by_ray["runs_used"] == by_local["runs_used"] == 4
    (section,) = by_ray["protocols"]
    assert [pair["verdict"] for pair in section["comparisons"]["pairs"]] == \
        [pair["verdict"] for pair in by_local["protocols"][0]["comparisons"]["pairs"]]
    assert [c["summary"] for c in section["configurations"]] == \
        [c["summary"] for c in by_local["protocols"][0]["configurations"]]
    assert by_ray == by_local


def probe():
    """Where a task ran: node and the GPUs Ray gave it."""
    return ray.get_runtime_context().get_node_id(), [str(g) for g in ray.get_gpu_ids()]


def test_gpu_arms_only_go_where_gpus_are_declared(tmp_path):
    spec = parse_spec({
        "model": "autoencoder", "seeds": 1, "train": {"protocol": "quick", "images": 20},
        "runtime": {"backend": "tensorflow", "deterministic": True},
        "configurations": {"cpu": {"device": "cpu", "threads": 1}, "gpu": {"device": "gpu"}},
    })
    cpu_arm, gpu_arm = spec.configurations
    assert ray_executor.resource_request(cpu_arm) == {"num_cpus": 1, "num_gpus": 0}
    assert ray_executor.resource_request(gpu_arm) == {"num_cpus": 1, "num_gpus": 1.0}
    assert ray_executor.resource_request(gpu_arm, 0.25) == {"num_cpus": 1, "num_gpus": 0.25}
    task = ray.remote(probe)
    cluster = Cluster(initialize_head=True, head_node_args=dict(NODE, num_cpus=1, num_gpus=0))
    try:
        ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
        # No node declares a GPU: the executor says the GPU arm cannot be placed and runs the CPU arm.
        problems = ray_executor.placement_problems(spec.configurations, 0.5, ray.nodes())
        assert list(problems) == ["gpu"] and "no node of the Ray cluster has 1 CPU + 0.5 GPU" in problems["gpu"]
        outcome = runner.run_study(spec, tmp_path / "study", executor="ray", gpu_share=0.5)
        assert [r.key for r in outcome["done"]] == ["cpu/seed-0000-r1"] and not outcome["failed"]
        assert list(outcome["unplaceable"]) == ["gpu"] and outcome["pending"] == 1
        assert list((tmp_path / "study" / "runs" / "gpu").iterdir()) == []
        # A task asking for what the executor asks for a GPU run stays pending; CPU ones run.
        gpu_tasks = [task.options(**ray_executor.resource_request(gpu_arm, 0.5)).remote() for _ in range(3)]
        cpu_tasks = [task.options(**ray_executor.resource_request(cpu_arm)).remote() for _ in range(3)]
        assert len(ray.get(cpu_tasks, timeout=60)) == 3
        ready, _ = ray.wait(gpu_tasks, num_returns=len(gpu_tasks), timeout=2)
        assert ready == []
        # A node declaring one (fake) GPU joins: the GPU tasks go there, and only there, two at a time.
        gpu_node = cluster.add_node(**NODE, num_cpus=2, num_gpus=1)
        placed = ray.get(gpu_tasks, timeout=120)
        assert {node for node, _ in placed} == {gpu_node.node_id}
        assert all(gpus == ["0"] for _, gpus in placed)
        assert ray_executor.placement_problems(spec.configurations, 0.5, ray.nodes()) == {}
        cpu_nodes = {node for node, _ in ray.get([task.options(num_cpus=1).remote() for _ in range(6)])}
        assert cpu_nodes <= {cluster.head_node.node_id, gpu_node.node_id}
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_ray_executor_refusals(spec_file, tmp_path, monkeypatch):
    # Without Ray: one line saying how to install it, nothing written.
    monkeypatch.setitem(sys.modules, "ray", None)
    result = CliRunner().invoke(study_cli, ["run", str(spec_file), "-o", str(tmp_path / "s"), "--executor", "ray"])
    assert result.exit_code == 1
    assert result.output.strip() == ("Error: --executor ray needs Ray, which is not installed: "
                                     "pip install prednet-keras[ray]")
    assert not (tmp_path / "s").exists()
    monkeypatch.undo()
    # Ray options belong to the Ray executor.
    result = CliRunner().invoke(study_cli, ["run", str(spec_file), "-o", str(tmp_path / "s"), "--gpu-share", "0.5"])
    assert result.exit_code == 2 and "--gpu-share goes with --executor ray" in result.output
    # A cluster address nobody answers at: said at once, before anything is written.
    result = CliRunner().invoke(study_cli, ["run", str(spec_file), "-o", str(tmp_path / "a"), "--executor", "ray",
                                            "--address", "127.0.0.1:1"])
    assert result.exit_code == 1 and "No Ray cluster at 127.0.0.1:1" in result.output
    assert not (tmp_path / "a").exists()
    # A pinned GPU cannot be honoured: Ray picks each run's GPU.
    pinned = tmp_path / "pinned.toml"
    pinned.write_text(TINY.replace("[configurations.two-threads]\nthreads = 2",
                                   "[configurations.gpu-1]\ndevice = \"gpu:1\""))
    result = CliRunner().invoke(study_cli, ["run", str(pinned), "-o", str(tmp_path / "p"), "--executor", "ray"])
    assert result.exit_code == 1 and "configuration gpu-1 asks for gpu:1" in result.output
    # The dry run shows what each configuration asks Ray for.
    result = CliRunner().invoke(study_cli, ["run", str(spec_file), "-o", str(tmp_path / "d"), "--dry-run",
                                            "--executor", "ray"])
    assert result.exit_code == 0
    assert "[Ray: num_cpus=2, num_gpus=0]" in result.output
    # Nothing but the Ray executor imports Ray.
    package = Path(runner.__file__).parents[1]
    importing = re.compile(r"^\s*(import|from)\s+ray\b", re.MULTILINE)
    importers = sorted(str(p.relative_to(package)) for p in package.rglob("*.py") if importing.search(p.read_text()))
    assert importers == ["study/executors/ray_executor.py"]
