"""A study spec is checked whole at the door: every key typed, ranged and capped, every name by one rule.

Each test writes a tiny spec with one fault and runs `prednet-study run SPEC
-o OUT` on it (in this process; `run_study` replaced by a function that fails
the test, so a spec that got through would be seen, not trained). It checks
the exit status, the one line (the file, the place, the rule, the value), no
traceback, and that nothing was written: OUT does not exist and every file
beside the spec is unchanged. The rows of the fault table in
docs/reliability.md are these tests.
"""

import datetime
import json
import os
import random
import time

import pytest
from click.testing import CliRunner

from prednet_keras.cli.study import main as study_cli
from prednet_keras.session import folder as run_folders
from prednet_keras.study import runner
from prednet_keras.study.executors import one_run, ray_executor
from prednet_keras.study.spec import rules as spec_rules
from prednet_keras.study.spec import PLAN_KEYS, SpecError, parse_spec
from tests.reliability.faults import snapshot

BASE = """\
model = "autoencoder"
seeds = 2

[train]
protocol = "quick"
images = 20

[configurations.one-thread]
threads = 1
"""


@pytest.fixture
def no_training(monkeypatch):
    def trained(*args, **kwargs):
        raise AssertionError("the spec was accepted and training started")

    monkeypatch.setattr(runner, "run_study", trained)


def refused(folder, text, *options, name="spec.toml"):
    """Runs `prednet-study run` on a spec that must be refused; returns the line after `Error: SPEC: `."""
    spec = folder / name
    if text is not None:
        spec.write_text(text, encoding="utf-8")
    out = folder / "out"
    before = snapshot(folder)
    result = CliRunner().invoke(study_cli, ["run", str(spec), "-o", str(out), *options])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {spec}: "), result.output
    assert "Traceback" not in result.output
    assert not out.exists() and snapshot(folder) == before
    return lines[0].removeprefix(f"Error: {spec}: ")


# Case 6 of issue 24: a wrong type in [report] was a raw TypeError after all the training had run.


def test_report_margin_as_a_string_is_refused_before_training(tmp_path, no_training):
    message = refused(tmp_path, BASE + '\n[report]\nmargin = "0.001"\n')
    assert message == '[report] margin: must be a number > 0, got "0.001" (a string).'


@pytest.mark.parametrize("key, value, expected", [
    ("metric", "5", ("[report] metric: must be a metric name (1 to 100 letters, digits, '_', '.' or '-') or "
                     "last_steps:N (N from 1 to 9,999,999), got 5 (a whole number).")),
    ("metric", '"last_steps:0"', 'got "last_steps:0".'),
    ("margin", "nan", "[report] margin: must be a number > 0, got nan."),
    ("margin_sd", "-0.5", "[report] margin_sd: must be a number > 0, got -0.5."),
    ("alpha", "0.5", "[report] alpha: must be a number in (0, 0.5), got 0.5."),
    ("power", "true", "[report] power: must be a number in (0, 1), got true (a boolean)."),
    ("checkpoints", "2.5", "[report] checkpoints: must be a whole number from 1 to 1,000"),
    ("curve_test", '"bonferroni"', '[report] curve_test: must be "maxt" or "holm", got "bonferroni".'),
])
def test_every_report_key_is_typed(tmp_path, no_training, key, value, expected):
    message = refused(tmp_path, BASE + f"\n[report]\n{key} = {value}\n")
    assert expected in message


@pytest.mark.parametrize("before, after, expected", [
    ('images = 20', 'images = "20"', ('[train] images: must be a whole number from 1 to 10,000,000 (updates of one '
                                      'run; the paper\'s protocol: 60,000), got "20" (a string).')),
    ('images = 20', 'images = 20\nsize = [28, 28]', "[train]: --size applies to --model prednet-chainer"),
    ('images = 20', 'images = 20\ndata = "mnist\\n.npz"', ("[train] data: must be a path (1 to 4,096 characters, "
                                                           'no control characters), got "mnist\\n.npz".')),
    ('threads = 1', 'threads = 2.0', ("[configurations.one-thread] threads: must be a whole number from 1 to 1,024 "
                                      "(CPU threads; more than any machine's cores), got 2.0 (a float).")),
    ('threads = 1', 'deterministic = "yes"', ('[configurations.one-thread] deterministic: must be true or false, '
                                              'got "yes" (a string).')),
    ('threads = 1', 'device = "gpu\\n"', ('[configurations.one-thread] device: must be "cpu", "gpu" or "gpu:N", '
                                          'got "gpu\\n".')),
    ('[train]', '[runtime]\nbackend = 3\n\n[train]', ('[runtime] backend: must be one of "tensorflow", "jax", '
                                                      '"torch", got 3 (a whole number).')),
    ('seeds = 2', 'seeds = 2\nulp_baseline = 1', "ulp_baseline: must be true or false, got 1 (a whole number)."),
    ('seeds = 2', 'seeds = 2\nworkers = "2"', ('workers: must be a whole number from 1 to 256 (runs at once on this '
                                               'machine, each a training process), got "2" (a string).')),
    ('seeds = 2', 'seeds = 2\nreport = 0.05', "[report] must be a table, got 0.05 (a float)."),
])
def test_train_runtime_configuration_and_top_level_keys_are_typed(tmp_path, no_training, before, after,
                                                                   expected):
    assert before in BASE
    message = refused(tmp_path, BASE.replace(before, after, 1))
    assert expected in message


# Case 9: a trailing newline was accepted in run and configuration names.


def test_a_trailing_newline_in_a_name_is_refused(tmp_path, no_training):
    message = refused(tmp_path, 'name = "quick\\n"\n' + BASE)
    assert message == (f"name: must be {spec_rules.NAME_RULE}, got \"quick\\n\".")
    message = refused(tmp_path, BASE.replace("[configurations.one-thread]", '[configurations."one-thread\\n"]'))
    assert message == (f'[configurations."one-thread\\n"]: the name must be {spec_rules.NAME_RULE}, '
                       'got "one-thread\\n".')


BAD_NAMES = ["../up", "../../etc/passwd", "a/b", "/abs", "a\\b", ".hidden", "..", "-option", "a b", "tab\there",
             "", "x" * 65, "caf\u00e9", "nul\u0000", "semi;colon", "star*"]


@pytest.mark.parametrize("bad", BAD_NAMES, ids=range(len(BAD_NAMES)))
def test_names_follow_one_rule(tmp_path, no_training, bad):
    # A name becomes a folder (runs/<configuration>/) and a record: no traversal, no hidden folder, no space.
    quoted = json.dumps(bad)
    message = refused(tmp_path, f"name = {quoted}\n" + BASE)
    assert message.startswith(f"name: must be {spec_rules.NAME_RULE}, got ")
    message = refused(tmp_path, BASE.replace("[configurations.one-thread]", f"[configurations.{quoted}]"))
    assert message.startswith(f"[configurations.{spec_rules.shown(bad)}]: the name must be {spec_rules.NAME_RULE}")


def test_a_spec_file_whose_name_is_no_study_name_must_set_one(tmp_path, no_training):
    message = refused(tmp_path, BASE, name="my study.toml")
    assert message.startswith("name: the spec's file name is its name when it sets none, and must be ")
    assert message.endswith('got "my study"; set `name` in the spec.')


def test_configurations_differing_only_in_case_are_refused(tmp_path, no_training):
    message = refused(tmp_path, BASE + "\n[configurations.One-Thread]\nthreads = 2\n")
    assert message == ("configurations one-thread and One-Thread differ only in case; their folders would be one "
                       "on a case-insensitive file system.")


# Case 9: `seeds = 1e8` hung --dry-run.


@pytest.mark.parametrize("seeds, shown", [("1e8", "100000000.0 (a float)"), ("100000000", "100000000")])
def test_a_huge_seed_count_is_refused_at_once(tmp_path, seeds, shown):
    started = time.perf_counter()
    message = refused(tmp_path, BASE.replace("seeds = 2", f"seeds = {seeds}"), "--dry-run")
    assert time.perf_counter() - started < 1.0
    assert message.startswith("seeds: must be a count from 1 to 10,000 (seeds 0 to N-1) or a list of 1 to 10,000 "
                              "seeds from 0 to 2,147,483,647 (each seed is a run per configuration")
    assert message.endswith(f"got {shown}.")


@pytest.mark.parametrize("before, after, expected", [
    ("seeds = 2", "seeds = 2\nreplicates = 101", ("replicates: must be a whole number from 1 to 100 (re-runs of one "
                                                  "seed measure run-to-run variation")),
    ("seeds = 2", "seeds = 2\ntrajectory_points = 1001", ("trajectory_points: must be a whole number from 0 to 1,000 "
                                                          "(each snapshot keeps 4,096 weights (32 KiB) per run)")),
    ("seeds = 2", "seeds = 2\nworkers = 257", "workers: must be a whole number from 1 to 256"),
    ("seeds = 2", "seeds = [0, 2147483648]", "got [0, 2147483648]."),
    ("seeds = 2", "seeds = 2\nreplicates = 2\nreplicate_seeds = 3",
     "replicate_seeds: as a count must be between 1 and the number of seeds (2), got 3."),
    ("images = 20", "images = 10000001", "[train] images: must be a whole number from 1 to 10,000,000"),
    ("threads = 1", "threads = 1025", "[configurations.one-thread] threads: must be a whole number from 1 to 1,024"),
    ("seeds = 2", "seeds = 10000\nreplicates = 11",
     ("the plan has 110,000 runs (110,000 per configuration x 1 configuration); at most 100,000 (each run is a "
      "training process and a run folder): fewer seeds, replicates or configurations.")),
])
def test_counts_over_their_cap_are_refused(tmp_path, before, after, expected):
    message = refused(tmp_path, BASE.replace(before, after, 1), "--dry-run")
    assert expected in message


def test_more_configurations_than_the_cap_are_refused(tmp_path):
    arms = "".join(f"\n[configurations.arm-{i}]\nthreads = {i + 1}\n" for i in range(spec_rules.MAX_CONFIGURATIONS))
    message = refused(tmp_path, BASE + arms, "--dry-run")
    assert message == ("[configurations]: 101 configurations; at most 100 (each is compared with every other in the "
                       "report).")


def test_the_largest_plan_accepted_dry_runs_in_well_under_a_second(tmp_path):
    spec = tmp_path / "largest.toml"
    spec.write_text(BASE.replace("seeds = 2", "seeds = 10000\nreplicates = 10"))
    for out in (tmp_path / "new", tmp_path / "existing"):
        if out.name == "existing":
            (out / "runs" / "one-thread").mkdir(parents=True)
        started = time.perf_counter()
        result = CliRunner().invoke(study_cli, ["run", str(spec), "-o", str(out), "--dry-run"])
        seconds = time.perf_counter() - started
        assert result.exit_code == 0, result.output
        assert "= 100000 runs; 0 done, 100000 to run." in result.output
        assert seconds < 1.0, f"--dry-run of 100,000 runs took {seconds:.2f} s"
    assert not (tmp_path / "new").exists()


# The file itself: what is not a spec is refused unread.


def test_a_file_that_is_no_spec_is_refused_unread(tmp_path, no_training, monkeypatch):
    os.mkfifo(tmp_path / "fifo.toml")  # opening it for reading would wait for a writer
    assert refused(tmp_path, None, name="fifo.toml") == "not a regular file; a spec is a TOML file."
    (tmp_path / "folder.toml").mkdir()
    assert refused(tmp_path, None, name="folder.toml") == "a folder, not a spec file."
    assert refused(tmp_path, "model = " + "[" * 5000 + "]" * 5000 + "\n") == \
        "not valid TOML (arrays or tables nested too deeply)."
    (tmp_path / "latin1.toml").write_bytes('name = "caf\u00e9"\n'.encode("latin-1"))
    assert refused(tmp_path, None, name="latin1.toml").startswith("cannot read the spec (not UTF-8 text: ")
    monkeypatch.setattr(spec_rules, "MAX_SPEC_BYTES", 1024)  # the real cap, 1 MiB, scaled down
    assert refused(tmp_path, BASE + "#" * 2048 + "\n") == \
        "larger than 1 KiB; a spec is a few KB of TOML, so this is not one."


# Fuzzed specs: whatever the values, a spec is accepted or refused with a SpecError, never another exception.

FUZZ_VALUES = [0, 1, -1, 2, 3, 101, 1025, 10_001, 100_000_000, 2**31, 2**63 - 1, -2**63, 1e8, 0.5, -0.0, 1.0,
               float("nan"), float("inf"), True, False, "", "a", "quick", "conv", "cpu", "gpu:0", "maxt",
               "../x", "a/b", ".x", "a\n", "0.001", "x" * 70, "last_steps:5", [], [0], [0, 0], [1, 2], [16, 16],
               [[1]], ["a"], [True], [0.5], list(range(20)), {}, {"a": 1}, {"threads": 1}, {"../x": {}},
               datetime.date(2020, 1, 1), datetime.time(12, 0)]
FUZZ_PLACES = ([(key,) for key in spec_rules.TOP_RULES] + [("train",), ("runtime",), ("configurations",),
                                                            ("report",), ("unknown",)]
               + [("train", key) for key in spec_rules.train_rules("autoencoder")] + [("train", "seed")]
               + [("runtime", key) for key in spec_rules.RUNTIME_RULES]
               + [("configurations", "one-thread", key) for key in [*spec_rules.RUNTIME_RULES, *PLAN_KEYS]]
               + [("configurations", "two", key) for key in ("threads", "tbptt")]
               + [("report", key) for key in spec_rules.REPORT_RULES] + [("report", "permutations")])


def _mutated(base, changes):
    data = json.loads(json.dumps(base))
    for (*tables, key), value in changes:
        target = data
        for table in tables:
            target = target.setdefault(table, {}) if isinstance(target.get(table, {}), dict) else {}
        target[key] = value
    return data


def _accepted_or_refused(data):
    """True: accepted (and within the caps), False: refused with a SpecError of one line."""
    try:
        spec = parse_spec(data)
    except SpecError as error:
        assert "\n" not in str(error), (data, str(error))
        return False
    except Exception as error:  # noqa: BLE001 (what the test is for)
        raise AssertionError(f"{data!r} raised {type(error).__name__}: {error}") from None
    assert len(spec.planned_runs()) <= spec_rules.MAX_RUNS
    for name in [spec.name] + [c.name for c in spec.configurations]:
        spec_rules.NAME.check(name)
    return True


def test_fuzzed_specs_are_accepted_or_refused_cleanly():
    base = {"model": "autoencoder", "seeds": 2, "train": {"protocol": "quick", "images": 20},
            "configurations": {"one-thread": {"threads": 1}}}
    started = time.perf_counter()
    # Every value at every place, one at a time ...
    single = [_accepted_or_refused(_mutated(base, [(place, value)])) for place in FUZZ_PLACES for value in FUZZ_VALUES]
    # ... and 500 specs with two or three of them at once.
    # About 1 in 500 of these is a valid spec, so the seed must draw some: the draws shift whenever a rule is
    # added (24 drew none once `devices` joined the runtime rules, 15 none once [train] heldout_data and a
    # configuration's plan keys joined the places).
    generator = random.Random(24)
    several = [_accepted_or_refused(_mutated(base, [(generator.choice(FUZZ_PLACES), generator.choice(FUZZ_VALUES))
                                                    for _ in range(generator.randint(2, 3))]))
               for _ in range(500)]
    assert len(single) == len(FUZZ_PLACES) * len(FUZZ_VALUES) > 2500
    assert 100 < sum(single) < len(single) - 2000 and 0 < sum(several) < 450, (sum(single), sum(several))
    assert time.perf_counter() - started < 20


# Case 9: a Ray retry's manifest said attempt 1.


class _Ref:
    def __init__(self, answer):
        self.answer = answer


class _FakeRay:
    """Ray as ray_executor._execute uses it, running each task at once in this process.

    `script` gives, per submitted task, what each of Ray's tries of it does:
    "worker dies" (Ray runs the task again, same arguments), "killed" (the
    training process was killed: exit -9, the driver retries) or "done".
    Each try starts as the real task does: ray_executor.begin_attempt.
    """

    class exceptions:  # as ray.exceptions
        class TaskCancelledError(Exception):
            pass

    def __init__(self, script):
        self.script = list(script)
        self.submitted = []

    def nodes(self):
        return [{"Alive": True, "Resources": {"CPU": 4.0}, "NodeManagerAddress": "127.0.0.1"}]

    def cluster_resources(self):
        return {"CPU": 4.0}

    def remote(self, function):
        assert function is ray_executor.train_on_node
        return _FakeTask(self)

    def wait(self, refs, num_returns, timeout):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        return ref.answer

    def cancel(self, ref, force=False):
        pass

    def run(self, partial, manifest, runtime, attempt, request):
        self.submitted.append(attempt)
        node = {"kind": "ray", "node_ip": "127.0.0.1", "host": "fake"}
        for outcome in self.script.pop(0):
            written = ray_executor.begin_attempt(partial, manifest, node, attempt)
            if outcome == "worker dies":
                continue
            executor = written["study"]["executor"]
            if outcome == "killed":
                return _Ref({"code": -9, "seconds": 0.0, "node": executor})
            # The training process completes the run (what finish_run checks).
            written.update(status="complete", initial_weights={"checksum": written["study"]["seed_checksum"]})
            run_folders.RunFolder(partial).write_manifest(written)
            return _Ref({"code": 0, "seconds": 0.0, "node": executor})
        raise AssertionError("Ray gave up on the task")


class _FakeTask:
    def __init__(self, ray):
        self.ray = ray

    def options(self, **options):
        return self

    def remote(self, *args):
        return self.ray.run(*args)


class _Messages:
    def __init__(self):
        self.lines = []

    def message(self, text):
        self.lines.append(text)

    def run_started(self, run):
        pass

    def run_finished(self, result, done, total):
        pass


def test_a_ray_retry_records_the_attempt_it_is(tmp_path):
    spec = parse_spec({"model": "autoencoder", "seeds": 1, "train": {"protocol": "quick", "images": 20},
                       "configurations": {"one-thread": {"threads": 1}}})
    (run,) = spec.planned_runs()
    (tmp_path / one_run.RUNS / run.configuration.name).mkdir(parents=True)
    records = {0: {"checksum": "c0ffee", "ulp_checksum": "c0ffef"}}
    # Ray retries the task once (its worker died), then its training process is killed (the driver
    # retries), then Ray retries once more, and the run completes: attempts 1, 2, 3 and 4.
    fake = _FakeRay([["worker dies", "killed"], ["worker dies", "done"]])
    progress = _Messages()
    outcome = {"finished": 0, "done": [], "failed": [], "skipped": {}, "pending": 1}
    ray_executor._execute(fake, spec, tmp_path, [run], records, ["prednet-study"], progress, outcome, 0, 1.0,
                          retries=2, max_in_flight=None)
    assert [r.status for r in outcome["done"]] == ["done"] and outcome["pending"] == 0
    assert fake.submitted == [1, 3]  # the driver's retry follows the attempt that ran, not the one it submitted
    manifest = json.loads((one_run.run_folder(tmp_path, run) / "manifest.json").read_text())
    assert manifest["study"]["executor"]["attempt"] == 4
    assert any("training process killed by SIGKILL on fake (127.0.0.1); attempt 3 (retry 1 of 2)" in line
               for line in progress.lines), progress.lines
    # Without a dead attempt's folder the attempt is the driver's number.
    partial = tmp_path / "fresh"
    written = ray_executor.begin_attempt(partial, manifest, {"kind": "ray"}, 1)
    assert written["study"]["executor"] == {"kind": "ray", "attempt": 1}
    assert json.loads((partial / "manifest.json").read_text())["study"]["executor"]["attempt"] == 1
    assert ray_executor.begin_attempt(partial, manifest, {"kind": "ray"}, 1)["study"]["executor"]["attempt"] == 2
