"""The local executor's order of starting runs when JAX runs share the study's compilation cache."""

import os
from types import SimpleNamespace

import pytest

from prednet_keras.study.executors.local_executor import _next_run
from prednet_keras.study.spec import Configuration


def _run(name, backend, seed):
    return SimpleNamespace(configuration=Configuration(name, {"backend": backend, "device": "cpu"}, {}), seed=seed)


def _running(run):
    return SimpleNamespace(run=run)


class _Points:
    """starting_points.StartingPoints' get(): the seeds in `ready` are written (every seed when None)."""

    def __init__(self, ready=None):
        self.ready = ready

    def get(self, seed):
        return {"seed": seed} if self.ready is None or seed in self.ready else None


ALL = _Points()


def test_a_jax_configuration_runs_one_run_until_its_programs_are_compiled():
    jax_0, jax_1, tf_0, tf_1 = _run("jax", "jax", 0), _run("jax", "jax", 1), _run("tf", "tensorflow", 0), _run("tf", "tensorflow", 1)
    queue = [jax_1, tf_0, tf_1]
    running = [_running(jax_0)]
    # jax_0 compiles: TensorFlow runs (no shared cache) fill the free workers first ...
    assert _next_run(queue, running, compiled=set(), share_compilation=True, points=ALL) == (tf_0, False)
    running.append(_running(tf_0))
    assert _next_run(queue, running, compiled=set(), share_compilation=True, points=ALL) == (tf_1, False)
    # ... then the other JAX run starts held at its configuration's gate.
    assert _next_run(queue, running, compiled=set(), share_compilation=True, points=ALL) == (jax_1, True)
    # Once a run of the configuration has trained, its runs start free.
    queue = [jax_1]
    assert _next_run(queue, running, compiled={"jax"}, share_compilation=True, points=ALL) == (jax_1, False)


def test_without_the_shared_cache_runs_start_in_order():
    jax_0, jax_1 = _run("jax", "jax", 0), _run("jax", "jax", 1)
    queue = [jax_1]
    assert _next_run(queue, [_running(jax_0)], compiled=set(), share_compilation=False, points=ALL) == (jax_1, False)
    # Nothing running of it yet: the first run of a JAX configuration starts at once.
    queue = [jax_0, jax_1]
    assert _next_run(queue, [], compiled=set(), share_compilation=True, points=ALL) == (jax_0, False)


def test_only_jax_runs_get_the_cache_and_the_command_line_can_refuse_it(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from prednet_keras.runtime import compile_cache
    from prednet_keras.cli.study import main as study_cli
    from prednet_keras.runtime import RuntimeConfig
    from prednet_keras.study import runner

    jax_env = compile_cache.environment(tmp_path, RuntimeConfig(backend="jax"))
    assert jax_env == {compile_cache.DIR_ENV: str((tmp_path / compile_cache.FOLDER).resolve()),
                       compile_cache.MAX_SIZE_ENV: str(compile_cache.MAX_BYTES)}
    assert compile_cache.environment(tmp_path, RuntimeConfig(backend="torch")) == {}
    assert runner.make_executor("local", workers=2).share_compilation
    seen = {}

    def fake_run_study(spec, output, **options):
        seen.update(options)
        return {"finished": 0, "done": [], "failed": [], "skipped": {}, "pending": 0}

    monkeypatch.setattr(runner, "run_study", fake_run_study)
    for flag, shared in (("--compile-cache", True), ("--no-compile-cache", False)):
        result = CliRunner().invoke(study_cli, ["run", "quick", "-o", str(tmp_path / "s"), "--no-report", flag])
        assert result.exit_code == 0, result.output
        assert seen["share_compilation"] is shared

    result = CliRunner().invoke(study_cli, ["run", "quick", "-o", str(tmp_path / "r"), "--executor", "ray",
                                            "--no-compile-cache"])
    assert result.exit_code == 2 and "go with the local executor" in result.output
    assert not (tmp_path / "r").exists()


def test_each_executor_says_which_cache_its_runs_share(tmp_path):
    from prednet_keras.runtime import compile_cache
    from prednet_keras.study import runner

    jax_arm, tf_arm = (Configuration(n, {"backend": b, "device": "cpu"}, {}) for n, b in (("j", "jax"), ("t", "tensorflow")))
    local = runner.make_executor("local", workers=2)
    assert local.shared_cache(tmp_path, [tf_arm, jax_arm]) == compile_cache.folder(tmp_path)
    assert local.shared_cache(tmp_path, [tf_arm]) is None
    assert runner.make_executor("local", workers=2, share_compilation=False).shared_cache(tmp_path, [jax_arm]) is None
    assert runner.make_executor("ray").shared_cache(tmp_path, [jax_arm]) is None


class _FakeStudy:
    """The executor's loop with fake training processes: each process polls `script[name]` (a list of
    (after how many polls, what happens)) and a held one cannot train before its gate file exists."""

    def __init__(self, tmp_path, monkeypatch, script):
        from prednet_keras.study.executors import local_executor

        self.events, self.script, self.gates = [], script, []
        self.study_dir = tmp_path / "study"
        # What a killed invocation left: a gate that must not open this invocation's runs.
        (self.study_dir / ".start-gates").mkdir(parents=True)
        (self.study_dir / ".start-gates" / "configuration-0").touch()
        study = self

        class FakeProcess:
            def __init__(self, name, folder, gate):
                self.name, self.folder, self.gate, self.polls, self.code = name, folder, gate, 0, None

            def poll(self):
                if self.code is not None:
                    return self.code
                if self.gate is not None and not os.path.exists(self.gate):
                    return None  # held: nothing happens before the gate opens
                if self.gate is not None and f"{self.name} passed its gate" not in study.events:
                    study.events.append(f"{self.name} passed its gate")
                self.polls += 1
                for after, what in study.script.get(self.name, [(3, "exit 0")]):
                    if self.polls == after:
                        if what == "update":
                            (self.folder / "history.csv").write_text("update,loss\n1,0.5\n")
                            study.events.append(f"{self.name} recorded an update")
                        else:
                            self.code = int(what.split()[1])
                return self.code

            def send_signal(self, signum):
                study.events.append(f"{self.name} stopped")
                self.code = -signum

            def wait(self, timeout=None):
                return self.code

        def fake_start(spec, study_dir, run, seed_record, command, share_compilation, gate=None, cpus=None):
            name = f"{run.configuration.name}-{run.seed}"
            folder = tmp_path / name
            folder.mkdir()
            (folder / "history.csv").write_text("update,loss\n")
            study.events.append(f"{name} started" + (" held" if gate else ""))
            if gate:
                study.gates.append(gate)
            return SimpleNamespace(run=run, process=FakeProcess(name, folder, gate), folder=folder, gate=gate,
                                   log=SimpleNamespace(close=lambda: None))

        def fake_finish(study_dir, item, code):
            study.events.append(f"{item.process.name} finished" + ("" if code == 0 else f" with {code}"))
            return SimpleNamespace(status="done" if code == 0 else "failed", message=f"exit {code}")

        monkeypatch.setattr(local_executor, "_start", fake_start)
        monkeypatch.setattr(local_executor, "_finish", fake_finish)
        monkeypatch.setattr(local_executor.time, "sleep", lambda seconds: None)

    def run(self, pending, workers=2):
        from prednet_keras.study.executors import local_executor

        outcome = {"done": [], "failed": [], "skipped": {}}
        local_executor._execute(None, self.study_dir, pending, ALL, workers, [], None, outcome, 0)
        return outcome


def test_waiting_runs_start_held_and_pass_the_gate_once_the_first_run_has_recorded_an_update(tmp_path,
                                                                                               monkeypatch):
    """jax_1 starts at once but held (its framework starts while jax_0 compiles); it passes the gate as soon
    as jax_0's history.csv holds an update (its training program is then in the cache), before jax_0 ends."""
    study = _FakeStudy(tmp_path, monkeypatch, {"jax-0": [(2, "update"), (10, "exit 0")]})
    outcome = study.run([_run("jax", "jax", 0), _run("jax", "jax", 1)])
    assert study.events == ["jax-0 started", "jax-1 started held", "jax-0 recorded an update",
                            "jax-1 passed its gate", "jax-1 finished", "jax-0 finished"]
    assert outcome["pending"] == 0 and len(outcome["done"]) == 2
    # The gates were the invocation's own (the stale one was removed first), and are gone with it.
    assert study.gates and not (study.study_dir / ".start-gates").exists()
    from prednet_keras.study.executors import local_executor

    assert not local_executor._has_trained(tmp_path / "nowhere")


def test_held_runs_are_stopped_unstarted_when_the_first_run_fails(tmp_path, monkeypatch):
    study = _FakeStudy(tmp_path, monkeypatch, {"jax-0": [(2, "exit 1")]})
    outcome = study.run([_run("jax", "jax", s) for s in range(4)], workers=3)
    assert study.events == ["jax-0 started", "jax-1 started held", "jax-2 started held", "jax-0 finished with 1",
                            "jax-1 stopped", "jax-2 stopped"]
    # Neither trained nor counted as failed: they stay to run, like jax-3, which never started.
    assert len(outcome["failed"]) == 1 and outcome["pending"] == 4 and "jax" in outcome["skipped"]
    assert not (tmp_path / "jax-1").exists() and not (tmp_path / "jax-2").exists()


def test_a_run_waits_for_its_own_seeds_starting_point_only():
    seed_0, seed_1 = _run("tf", "tensorflow", 0), _run("tf", "tensorflow", 1)
    queue = [seed_1, seed_0]
    assert _next_run(queue, [], compiled=set(), share_compilation=True, points=_Points(ready={0})) == (seed_0, False)
    assert _next_run(queue, [], compiled=set(), share_compilation=True, points=_Points(ready={0})) == (None, False)
    assert queue == [seed_1]


def test_runs_start_as_their_seeds_appear(tmp_path, monkeypatch):
    """The executor's loop with the starting points still being made: seed 0's run starts (and ends) before
    seed 1's starting point is written; seed 1's run starts once it is."""
    from prednet_keras.study.executors import local_executor

    events = []
    points = _Points(ready={0})

    class FakeProcess:
        def __init__(self, name):
            self.name, self.polls = name, 0

        def poll(self):
            self.polls += 1
            if self.name == "tf-0" and self.polls == 2:
                points.ready.add(1)
                events.append("seed 1 written")
            return 0 if self.polls >= 3 else None

    def fake_start(spec, study_dir, run, seed_record, command, share_compilation, gate=None, cpus=None):
        assert seed_record == {"seed": run.seed}
        events.append(f"tf-{run.seed} started")
        return SimpleNamespace(run=run, process=FakeProcess(f"tf-{run.seed}"), folder=tmp_path)

    monkeypatch.setattr(local_executor, "_start", fake_start)
    monkeypatch.setattr(local_executor, "_finish", lambda study_dir, item, code: SimpleNamespace(status="done"))
    monkeypatch.setattr(local_executor.time, "sleep", lambda seconds: None)
    outcome = {"done": [], "failed": [], "skipped": {}}
    local_executor._execute(None, tmp_path, [_run("tf", "tensorflow", 0), _run("tf", "tensorflow", 1)], points, 4,
                            [], None, outcome, 0)
    assert events == ["tf-0 started", "seed 1 written", "tf-1 started"]
    assert outcome["pending"] == 0 and len(outcome["done"]) == 2


def test_a_training_process_waits_at_its_gate_until_the_file_exists(tmp_path, monkeypatch):
    import threading

    from prednet_keras.runtime import compile_cache

    said = []
    monkeypatch.delenv(compile_cache.GATE_ENV, raising=False)
    assert compile_cache.wait_at_gate(say=said.append) == 0.0 and said == []
    gate = tmp_path / "gate"
    monkeypatch.setenv(compile_cache.GATE_ENV, str(gate))
    timer = threading.Timer(0.3, gate.touch)
    timer.start()
    try:
        waited = compile_cache.wait_at_gate(say=said.append, poll_seconds=0.01)
    finally:
        timer.cancel()
    assert waited >= 0.25 and len(said) == 1 and "first run" in said[0]
    assert compile_cache.wait_at_gate(say=said.append) == 0.0 and len(said) == 1  # open: no wait, no line


def test_runs_with_a_thread_count_get_cpus_of_their_own(monkeypatch):
    """One-thread JAX runs pin themselves to the first CPU they may use: the executor starts each run that
    sets threads on the CPUs the running ones use least, so parallel runs do not share one core."""
    from types import SimpleNamespace

    from prednet_keras.study.executors import local_executor

    monkeypatch.setattr(local_executor.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)

    def config(threads):
        return SimpleNamespace(runtime={"backend": "jax", "device": "cpu", "threads": threads})

    running = []
    for expected in ([0], [1], [2, 3], [0], [1]):
        cpus = local_executor._cpus_for(config(len(expected)), running)
        assert cpus == expected
        running.append(SimpleNamespace(cpus=cpus))
    assert local_executor._cpus_for(config(None), running) is None  # no thread count: all CPUs
    assert local_executor._cpus_for(config(4), running) is None  # every CPU: nothing to choose


def test_a_study_whose_arm_needs_a_missing_backend_is_refused_before_anything_runs(tmp_path, monkeypatch):
    """Before: the runs of the other arms trained, then the first run of the arm died. Now the study is refused
    in one line naming the arm and the package, and --dry-run marks the arm."""
    from click.testing import CliRunner

    from prednet_keras import _backend_choice
    from prednet_keras.cli.study import main
    from prednet_keras.study.spec import SpecError

    real = _backend_choice._installed
    monkeypatch.setattr(_backend_choice, "_installed", lambda name: name != "torch" and real(name))
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text('model = "prednet-chainer"\nseeds = 1\n[train]\nprotocol = "quick"\n'
                         '[configurations.a]\nbackend = "jax"\n[configurations.b]\nbackend = "torch"\n')
    out = tmp_path / "study"
    result = CliRunner().invoke(main, ["run", str(spec_path), "-o", str(out)])
    assert result.exit_code == 1
    assert "not installed here: b needs PyTorch (torch). Install it (pip install torch)" in result.output
    assert "Traceback" not in result.output and not out.exists()
    dry = CliRunner().invoke(main, ["run", str(spec_path), "-o", str(out), "--dry-run"])
    assert dry.exit_code == 0 and "[cannot run here: torch is not installed]" in dry.output
    assert "a: backend=jax" in dry.output and "cannot run here" not in dry.output.split("b: ")[0]
    # Only the arms that run here are asked about.
    from prednet_keras.study.executors.local_executor import LocalExecutor
    from prednet_keras.study.spec import load_spec

    LocalExecutor(workers=1).check(load_spec(spec_path).select(["a"]))
    with pytest.raises(SpecError):
        LocalExecutor(workers=1).check(load_spec(spec_path).select(["b"]))
