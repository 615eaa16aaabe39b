"""The local executor's order of starting runs when JAX runs share the study's compilation cache."""

from types import SimpleNamespace

from prednet_keras.study.local_executor import _next_run
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
    # jax_0 compiles: the other JAX run waits, TensorFlow runs (no shared cache) fill the free workers.
    assert _next_run(queue, running, compiled=set(), share_compilation=True, points=ALL) is tf_0
    running.append(_running(tf_0))
    assert _next_run(queue, running, compiled=set(), share_compilation=True, points=ALL) is tf_1
    assert _next_run(queue, running, compiled=set(), share_compilation=True, points=ALL) is None
    assert queue == [jax_1]
    # Once a run of the configuration has finished, its runs start together.
    assert _next_run(queue, running, compiled={"jax"}, share_compilation=True, points=ALL) is jax_1


def test_without_the_shared_cache_runs_start_in_order():
    jax_0, jax_1 = _run("jax", "jax", 0), _run("jax", "jax", 1)
    queue = [jax_1]
    assert _next_run(queue, [_running(jax_0)], compiled=set(), share_compilation=False, points=ALL) is jax_1
    # Nothing running of it yet: the first run of a JAX configuration starts at once.
    queue = [jax_0, jax_1]
    assert _next_run(queue, [], compiled=set(), share_compilation=True, points=ALL) is jax_0


def test_only_jax_runs_get_the_cache_and_the_command_line_can_refuse_it(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from prednet_keras import compile_cache
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
    from prednet_keras import compile_cache
    from prednet_keras.study import runner

    jax_arm, tf_arm = (Configuration(n, {"backend": b, "device": "cpu"}, {}) for n, b in (("j", "jax"), ("t", "tensorflow")))
    local = runner.make_executor("local", workers=2)
    assert local.shared_cache(tmp_path, [tf_arm, jax_arm]) == compile_cache.folder(tmp_path)
    assert local.shared_cache(tmp_path, [tf_arm]) is None
    assert runner.make_executor("local", workers=2, share_compilation=False).shared_cache(tmp_path, [jax_arm]) is None
    assert runner.make_executor("ray").shared_cache(tmp_path, [jax_arm]) is None


def test_waiting_runs_start_once_the_first_run_has_recorded_an_update(tmp_path, monkeypatch):
    """The executor's loop: jax_1 waits while jax_0 compiles, and starts as soon as jax_0's history.csv holds
    an update (its training program is then in the cache), before jax_0 finishes."""
    from prednet_keras.study import local_executor

    events = []

    class FakeProcess:
        def __init__(self, name, folder):
            self.name, self.folder, self.polls = name, folder, 0

        def poll(self):
            self.polls += 1
            if self.name == "jax-0" and self.polls == 3:
                (self.folder / "history.csv").write_text("update,loss\n1,0.5\n")
                events.append("jax-0 recorded an update")
            return 0 if self.polls >= 6 else None

    def fake_start(spec, study_dir, run, seed_record, command, share_compilation):
        name = f"{run.configuration.name}-{run.seed}"
        folder = tmp_path / name
        folder.mkdir()
        (folder / "history.csv").write_text("update,loss\n")
        events.append(f"{name} started")
        return SimpleNamespace(run=run, process=FakeProcess(name, folder), folder=folder)

    def fake_finish(study_dir, item, code):
        events.append(f"{item.process.name} finished")
        return SimpleNamespace(status="done")

    monkeypatch.setattr(local_executor, "_start", fake_start)
    monkeypatch.setattr(local_executor, "_finish", fake_finish)
    monkeypatch.setattr(local_executor.time, "sleep", lambda seconds: None)
    outcome = {"done": [], "failed": [], "skipped": {}}
    pending = [_run("jax", "jax", 0), _run("jax", "jax", 1)]
    local_executor._execute(None, tmp_path, pending, ALL, 2, [], None, outcome, 0)
    assert events == ["jax-0 started", "jax-0 recorded an update", "jax-1 started", "jax-0 finished",
                      "jax-1 finished"]
    assert outcome["pending"] == 0 and len(outcome["done"]) == 2
    assert not local_executor._has_trained(tmp_path / "nowhere")


def test_a_run_waits_for_its_own_seeds_starting_point_only():
    seed_0, seed_1 = _run("tf", "tensorflow", 0), _run("tf", "tensorflow", 1)
    queue = [seed_1, seed_0]
    assert _next_run(queue, [], compiled=set(), share_compilation=True, points=_Points(ready={0})) is seed_0
    assert _next_run(queue, [], compiled=set(), share_compilation=True, points=_Points(ready={0})) is None
    assert queue == [seed_1]


def test_runs_start_as_their_seeds_appear(tmp_path, monkeypatch):
    """The executor's loop with the starting points still being made: seed 0's run starts (and ends) before
    seed 1's starting point is written; seed 1's run starts once it is."""
    from prednet_keras.study import local_executor

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

    def fake_start(spec, study_dir, run, seed_record, command, share_compilation):
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
