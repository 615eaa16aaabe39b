"""The study spec (prednet_keras.study.spec): what is accepted, and the message for what is not."""

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from prednet_keras.cli.study import main as study_cli
from prednet_keras.study import spec as study_spec
from prednet_keras.study.spec import SpecError, load_spec, parse_spec

BASE = {
    "model": "autoencoder",
    "seeds": 2,
    "train": {"protocol": "quick", "images": 20},
    "configurations": {"a": {"threads": 1, "deterministic": True}, "b": {"threads": 2, "deterministic": True}},
}


def spec_with(**changes):
    data = {key: (dict(value) if isinstance(value, dict) else value) for key, value in BASE.items()}
    data.update(changes)
    return data


def test_a_spec_plans_every_seed_replicate_and_configuration():
    spec = parse_spec(spec_with(replicates=2, ulp_baseline=True, seeds=[5, 3]))
    runs = spec.planned_runs()
    assert [r.key for r in runs] == [
        "a/seed-0005-r1", "b/seed-0005-r1", "a/seed-0005-r2", "b/seed-0005-r2", "a/seed-0005-ulp", "b/seed-0005-ulp",
        "a/seed-0003-r1", "b/seed-0003-r1", "a/seed-0003-r2", "b/seed-0003-r2", "a/seed-0003-ulp", "b/seed-0003-ulp",
    ]
    # Runtime defaults filled in, validated by RuntimeConfig.
    assert spec.configuration("a").runtime == {
        "backend": "tensorflow", "device": "cpu", "threads": 1, "deterministic": True, "cudnn": True,
        "tf32": None, "onednn": None, "autotune": None, "strict": True, "xla": None, "interop_threads": None,
        "precision": "float32",
        "devices": 1,
    }
    # [train] resolved by the model's config class; the runner owns seed and weights.
    assert spec.train["images"] == 20 and spec.train["autoencoder"] == "conv"
    assert "seed" not in spec.train and "init_weights" not in spec.train
    options = spec.run_options(runs[0], "/x/w.h5")
    assert (options["seed"], options["init_weights"], options["model"]) == (5, "/x/w.h5", "autoencoder")


def test_replicate_seeds_replicates_only_some_seeds():
    # A count: the first N seeds of the list; the others run once. Still seed-major.
    spec = parse_spec(spec_with(replicates=2, replicate_seeds=1, seeds=[5, 3, 9]))
    assert spec.replicate_seeds == [5]
    assert [r.key for r in spec.planned_runs()] == [
        "a/seed-0005-r1", "b/seed-0005-r1", "a/seed-0005-r2", "b/seed-0005-r2",
        "a/seed-0003-r1", "b/seed-0003-r1",
        "a/seed-0009-r1", "b/seed-0009-r1",
    ]
    # A list, in any order: kept in the order of `seeds`; with the 1-ulp baseline and one arm.
    spec = parse_spec(spec_with(replicates=3, replicate_seeds=[9, 5], seeds=[5, 3, 9], ulp_baseline=True))
    assert spec.replicate_seeds == [5, 9]
    assert [r.key for r in spec.planned_runs([spec.configuration("a")])] == [
        "a/seed-0005-r1", "a/seed-0005-r2", "a/seed-0005-r3", "a/seed-0005-ulp",
        "a/seed-0003-r1", "a/seed-0003-ulp",
        "a/seed-0009-r1", "a/seed-0009-r2", "a/seed-0009-r3", "a/seed-0009-ulp",
    ]
    assert spec.to_dict()["replicate_seeds"] == [5, 9]
    assert [spec.replicates_of(s, "a") for s in spec.seeds] == [3, 1, 3]
    # Absent: every seed, as before.
    spec = parse_spec(spec_with(replicates=2))
    assert spec.replicate_seeds is None and spec.to_dict()["replicate_seeds"] is None
    assert len(spec.planned_runs()) == 2 * 2 * 2
    # Every seed named is the same plan as none named.
    every = parse_spec(spec_with(replicates=2, replicate_seeds=2))
    assert [r.key for r in every.planned_runs()] == [r.key for r in spec.planned_runs()]


def test_chainer_arm_factors_are_configuration_settings():
    spec = parse_spec({
        "model": "prednet-chainer", "seeds": 1,
        "train": {"protocol": "quick", "size": [16, 16], "stack_sizes": [3, 4, 8]},
        "configurations": {"gpu-path": {}, "cpu-path": {"emulate_cpu_aliasing": True}},
    })
    assert spec.configuration("gpu-path").factors == {"tbptt": "chainer", "emulate_cpu_aliasing": False}
    assert spec.configuration("cpu-path").factors == {"tbptt": "chainer", "emulate_cpu_aliasing": True}
    assert "emulate_cpu_aliasing" not in spec.train and spec.train["size"] == [16, 16]
    run = spec.planned_runs()[1]
    assert spec.run_options(run, "w.h5")["emulate_cpu_aliasing"] is True


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"model": "resnet"}, 'model: must be one of "prednet", "prednet-chainer", "autoencoder", got "resnet"'),
        ({"colour": "red"}, "unknown key colour"),
        ({"seeds": 0}, "seeds: must be a count from 1 to 10,000"),
        ({"seeds": [1, 1]}, "lists a seed twice"),
        ({"seeds": "many"}, 'seeds: must be a count from 1 to 10,000 (seeds 0 to N-1) or a list'),
        ({"replicates": 0}, "replicates: must be a whole number from 1 to 100"),
        ({"replicates": 2, "replicate_seeds": True}, "replicate_seeds: must be a count (the first N seeds"),
        ({"replicates": 2, "replicate_seeds": -1}, "replicate_seeds: must be a count (the first N seeds, N >= 1)"),
        ({"replicates": 2, "replicate_seeds": 0}, "of seeds of `seeds`, got 0."),
        ({"replicates": 2, "replicate_seeds": 3}, "between 1 and the number of seeds (2), got 3"),
        ({"replicates": 2, "replicate_seeds": []}, "replicate_seeds: must be a count"),
        ({"replicates": 2, "replicate_seeds": "0"}, 'got "0" (a string)'),
        ({"replicates": 2, "replicate_seeds": 1.0}, "got 1.0 (a float)"),
        ({"replicates": 2, "replicate_seeds": [0, 7, 8]}, "names seeds 7, 8, not in `seeds` (0, 1)"),
        ({"replicates": 2, "replicate_seeds": [0, 0]}, "replicate_seeds: lists a seed twice"),
        ({"replicates": 2, "replicate_seeds": [0, False]}, "got [0, false]"),
        ({"replicate_seeds": [0]}, "but `replicates` is 1: set `replicates` >= 2"),
        ({"ulp_baseline": "yes"}, 'ulp_baseline: must be true or false, got "yes" (a string)'),
        ({"train": {"seed": 3}}, "[train] may not set seed"),
        ({"train": {"protocol": "quick", "epochs": 3}}, "unknown option epochs for model autoencoder"),
        ({"train": {"protocol": "slow"}}, '[train] protocol: must be "paper" or "quick", got "slow"'),
        ({"train": {"images": -1}}, "[train] images: must be a whole number from 1 to 10,000,000"),
        ({"train": {"data": "/no/such/mnist.npz"}}, "no such file"),
        ({"configurations": {}}, "at least one"),
        ({"configurations": {"a": {"device": "tpu"}}},
         '[configurations.a] device: must be "cpu", "gpu" or "gpu:N", got "tpu"'),
        ({"configurations": {"a": {"backend": "mxnet"}}}, '[configurations.a] backend: must be one of "tensorflow"'),
        ({"configurations": {"a": {"threads": 0}}},
         "[configurations.a] threads: must be a whole number from 1 to 1,024"),
        ({"configurations": {"a": {"emulate_cpu_aliasing": True}}}, "unknown key emulate_cpu_aliasing"),
        ({"configurations": {"a": {"threads": 1}, "b": {"threads": 1}}}, "configurations a and b are the same arm"),
        ({"configurations": {"a b": {}}}, '[configurations."a b"]: the name must be 1 to 64 letters'),
        ({"runtime": {"gpu": True}}, "[runtime]: unknown key gpu"),
        ({"configurations": {"a": {"precision": "float16"}}}, '[configurations.a] precision: must be "float32" or "mixed_bfloat16", got "float16"'),
        ({"configurations": {"a": {"precision": "mixed_bfloat16"}}}, "precision mixed_bfloat16 is for model prednet only"),
        ({"report": {"colour": 1}}, "[report]: unknown key colour"),
    ],
)
def test_bad_specs_are_refused_with_the_reason(changes, message):
    with pytest.raises(SpecError) as error:
        parse_spec(spec_with(**changes))
    assert message in str(error.value)


def test_chainer_factor_in_train_is_refused():
    with pytest.raises(SpecError, match="arm factor: set it per configuration"):
        parse_spec({"model": "prednet-chainer", "train": {"emulate_cpu_aliasing": True},
                    "configurations": {"a": {}}})


def test_spec_files_unreadable_or_not_toml(tmp_path):
    with pytest.raises(SpecError, match="no such spec file"):
        load_spec(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("model = \n")
    with pytest.raises(SpecError, match="bad.toml: not valid TOML"):
        load_spec(bad)


def test_the_cli_names_the_problem_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('model = "autoencoder"\n[configurations.a]\nthreads = "two"\n')
    result = CliRunner().invoke(study_cli, ["run", str(bad), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert f'Error: {bad}: [configurations.a] threads: must be a whole number from 1 to 1,024' in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
    result = CliRunner().invoke(study_cli, ["run", "nonsense", "-o", str(tmp_path / "out")])
    assert result.exit_code == 1 and "no ready spec of that name" in result.output


def test_ready_specs_parse_and_plan():
    ready = study_spec.ready_specs()
    assert {"quick", "paper", "retraction"} <= set(ready)
    quick = load_spec(ready["quick"])
    assert quick.model == "autoencoder" and len(quick.planned_runs()) == 27
    paper = load_spec(ready["paper"])
    assert paper.model == "prednet-chainer" and len(paper.seeds) == 30
    assert paper.train["size"] == [120, 160] and paper.train["stack_sizes"] is None
    # The retraction's cause is an arm factor: the same device with both code paths.
    factors = {c.name: c.factors["emulate_cpu_aliasing"] for c in paper.configurations}
    assert factors["gpu-jax-cpu-path"] and not factors["gpu-jax"]
    retraction = load_spec(ready["retraction"])
    assert retraction.train["period"] == 4000 and retraction.train["size"] == [32, 40]


def test_dry_run_shows_the_plan(tmp_path):
    result = CliRunner().invoke(study_cli, ["run", "quick", "-o", str(tmp_path / "out"), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "27 runs; 0 done, 27 to run" in result.output
    assert "cpu-1-thread: backend=tensorflow" in result.output
    assert not (tmp_path / "out").exists()


def test_dry_run_shows_the_replicates_of_some_seeds(tmp_path):
    path = tmp_path / "some.toml"
    text = study_spec.ready_specs()["quick"].read_text()
    assert "\nreplicates = 2\n" in text  # 3 seeds x (2 replicates + 1-ulp) x 3 configurations = 27
    path.write_text(text.replace("\nreplicates = 2\n", "\nreplicates = 2\nreplicate_seeds = [1]\n"))
    result = CliRunner().invoke(study_cli, ["run", str(path), "-o", str(tmp_path / "out"), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "3 seeds (1 of them x 2 replicates: 1; the others x 1) + 1-ulp baseline" in result.output
    assert "= 21 runs; 0 done, 21 to run" in result.output  # (3 + 1 replicate + 3 ulp) x 3
    assert not (tmp_path / "out").exists()


def _recorded(spec, **changes):
    """spec.to_dict() as study.json holds it (JSON), with `changes`; a None value removes the key."""
    import json

    record = json.loads(json.dumps(spec.to_dict()))
    for key, value in changes.items():
        if value is None:
            record.pop(key, None)
        else:
            record[key] = value
    return record


def test_replicate_seeds_merge_across_invocations():
    from prednet_keras.study import runner

    def merged(recorded, current):
        return runner._merge(recorded, current.to_dict())

    some = parse_spec(spec_with(seeds=4, replicates=2, replicate_seeds=[0, 3]))
    none = parse_spec(spec_with(seeds=4))
    every = parse_spec(spec_with(seeds=4, replicates=2))
    # Union of the replicated seeds, in the order of the merged seeds.
    other = parse_spec(spec_with(seeds=4, replicates=3, replicate_seeds=[1]))
    result = merged(_recorded(some), other)
    assert (result["replicates"], result["replicate_seeds"]) == (3, [0, 1, 3])
    # All seeds (absent, or a study.json from before the key) wins ...
    assert merged(_recorded(some), every)["replicate_seeds"] is None
    assert merged(_recorded(every, replicate_seeds=None), some)["replicate_seeds"] is None
    # ... but only over the seeds it had: seeds added later with replicates of some seeds stay a list.
    more = parse_spec(spec_with(seeds=6, replicates=2, replicate_seeds=[4]))
    assert merged(_recorded(every, replicate_seeds=None), more)["replicate_seeds"] == [0, 1, 2, 3, 4]
    # A spec with replicates = 1 replicated no seed: it neither adds seeds nor means "all".
    result = merged(_recorded(none, replicate_seeds=None), some)
    assert (result["replicates"], result["replicate_seeds"]) == (2, [0, 3])
    result = merged(_recorded(some), none)
    assert (result["replicates"], result["replicate_seeds"]) == (2, [0, 3])
    # The union covering every seed is every seed.
    rest = parse_spec(spec_with(seeds=4, replicates=2, replicate_seeds=[1, 2]))
    assert merged(_recorded(some), rest)["replicate_seeds"] is None
    # No replicates anywhere: nothing to restrict.
    result = merged(_recorded(none, replicate_seeds=None), none)
    assert (result["replicates"], result["replicate_seeds"]) == (1, None)


def test_a_study_folder_from_before_replicate_seeds_resumes(tmp_path):
    import json

    from prednet_keras.study import runner

    spec = parse_spec(spec_with(seeds=3))
    record = {"format": runner.FORMAT, "format_version": 1, "created": "2026-01-01T00:00:00+0000",
              "invocations": [], "spec": _recorded(spec, replicate_seeds=None)}
    assert "replicate_seeds" not in record["spec"]
    (tmp_path / runner.STUDY_RECORD).write_text(json.dumps(record))
    later = parse_spec(spec_with(seeds=3, replicates=2, replicate_seeds=2))
    runner._record_study(later, tmp_path, None, ["prednet-study", "run"])
    saved = json.loads((tmp_path / runner.STUDY_RECORD).read_text())
    assert len(saved["invocations"]) == 1
    # Each invocation records the code it ran.
    from prednet_keras.runtime.code_provenance import code_provenance

    recorded, now = saved["invocations"][0]["code"], code_provenance()
    assert (recorded["commit"], recorded["source"], recorded["version"]) == (now["commit"], now["source"],
                                                                               now["version"])
    assert (saved["spec"]["replicates"], saved["spec"]["replicate_seeds"]) == (2, [0, 1])
    finished, pending = runner.plan_status(later, tmp_path)
    assert finished == [] and [r.name for r in pending[:6]] == [
        "seed-0000-r1", "seed-0000-r1", "seed-0000-r2", "seed-0000-r2", "seed-0001-r1", "seed-0001-r1"]
    assert len(pending) == (2 * 2 + 1) * 2


COMMITTED_STUDIES = [("chainer-configurations.toml", "chainer-configurations"), ("autoencoder.toml", "autoencoder"),
                     ("lotter-prednet.toml", "lotter-prednet"), ("retraction/spec.toml", "retraction")]


@pytest.mark.parametrize("spec_name, folder", COMMITTED_STUDIES)
def test_committed_study_folders_still_plan_every_seed_alike(spec_name, folder, tmp_path):
    import json
    import shutil
    from pathlib import Path

    from prednet_keras.study import archive, runner

    root = Path(__file__).resolve().parents[2] / "docs" / "study"
    spec = load_spec(root / spec_name)
    recorded = json.loads((root / folder / runner.STUDY_RECORD).read_text())["spec"]
    runner._check_compatible(recorded, spec, root / folder)  # the spec still resumes its folder
    merged = runner._merge(recorded, spec.to_dict())
    assert merged["replicate_seeds"] == spec.replicate_seeds  # the folder replicated no seed the spec does not
    runs_per_seed = [spec.replicates_of(seed, config.name) for config in spec.configurations for seed in spec.seeds]
    assert len(spec.planned_runs()) == sum(runs_per_seed)
    # The published folder keeps its runs packed; unpacked (as its README says), they are the spec's finished runs.
    with pytest.raises(runner.StudyFolderError, match="unpack them first"):
        runner.plan_status(spec, root / folder)
    shutil.copy(root / folder / archive.ARCHIVE, tmp_path)
    archive.unpack(tmp_path)
    finished, pending = runner.plan_status(spec, tmp_path)
    assert len(finished) + len(pending) == len(spec.planned_runs())
    assert len(finished) == len(archive.archived_runs(tmp_path / archive.ARCHIVE))


def test_a_study_run_before_a_train_option_existed_resumes_with_that_options_old_value(tmp_path):
    import json
    from pathlib import Path

    from prednet_keras.study import runner

    path = Path(__file__).resolve().parents[2] / "docs" / "study" / "lotter-prednet.toml"
    spec = load_spec(path)
    assert spec.train["unroll"] is False
    # lotter-prednet/'s first runs were recorded before [train] had `unroll`; they trained the loop rolled.
    recorded = json.loads(json.dumps(spec.to_dict()))
    del recorded["train"]["unroll"], recorded["train"]["augment"]  # neither existed then
    runner._check_compatible(recorded, spec, tmp_path)
    changed = tmp_path / "changed.toml"
    changed.write_text(path.read_text().replace("unroll = false", "unroll = true"))
    with pytest.raises(SpecError, match=r"another \[train\] unroll"):
        runner._check_compatible(recorded, load_spec(changed), tmp_path)
    augmented = tmp_path / "augmented.toml"
    augmented.write_text(path.read_text().replace("unroll = false", "unroll = false\naugment = [\"flip\"]"))
    with pytest.raises(SpecError, match=r"another \[train\] augment"):
        runner._check_compatible(recorded, load_spec(augmented), tmp_path)


def test_the_study_windows_unroll_is_one_train_option_recorded_rolled_before_it_existed(tmp_path):
    import json
    from pathlib import Path

    from prednet_keras.study import runner
    from prednet_keras.model_kinds.study_config import StudyConfig

    path = Path(__file__).resolve().parents[2] / "docs" / "study" / "chainer-configurations.toml"
    spec = load_spec(path)
    assert spec.train["unroll"] is False  # the default: rolled, as every run before the option
    recorded = json.loads(json.dumps(spec.to_dict()))
    del recorded["train"]["unroll"]  # a study.json from before the option
    runner._check_compatible(recorded, spec, tmp_path)
    unrolled = tmp_path / "unrolled.toml"
    unrolled.write_text(path.read_text().replace("period = 4000", "period = 4000\nunroll = true"))
    assert load_spec(unrolled).train["unroll"] is True
    with pytest.raises(SpecError, match=r"another \[train\] unroll"):
        runner._check_compatible(recorded, load_spec(unrolled), tmp_path)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(path.read_text().replace("period = 4000", 'period = 4000\nunroll = "yes"'))
    with pytest.raises(SpecError, match="unroll"):
        load_spec(wrong)
    # A run's options read back: a prednet-chainer record without the key was rolled; an autoencoder has none.
    assert StudyConfig.from_dict({"model": "prednet-chainer", "seed": 1}).unroll is False
    assert StudyConfig.from_dict({"model": "prednet-chainer", "unroll": True}).unroll is True
    assert StudyConfig.from_dict({"model": "autoencoder"}).unroll is None
    assert StudyConfig(model="autoencoder").resolved().unroll is None
    with pytest.raises(ValueError, match="--unroll applies to --model prednet-chainer"):
        StudyConfig(model="autoencoder", unroll=True).resolved()


def test_every_option_a_spec_can_set_has_a_rule():
    # The door types every key (spec_rules); an option added to a config class needs its rule there too.
    from prednet_keras.runtime import RuntimeConfig
    from prednet_keras.study.spec import rules as spec_rules
    from prednet_keras.study.report import ReportOptions
    from prednet_keras.model_kinds.study_config import StudyConfig
    from prednet_keras.options.recipe import TrainConfig

    for model, cls in (("prednet", TrainConfig), ("prednet-chainer", StudyConfig), ("autoencoder", StudyConfig)):
        options = {f.name for f in dataclasses.fields(cls)} - set(study_spec.RUNNER_OWNED)
        assert set(spec_rules.train_rules(model)) == options, model
    assert set(spec_rules.RUNTIME_RULES) == {f.name for f in dataclasses.fields(RuntimeConfig)}
    assert set(spec_rules.REPORT_RULES) <= {f.name for f in dataclasses.fields(ReportOptions)}
    # What the door accepts, the report accepts (it used to fail only after the training).
    for key, values in {"alpha": [1e-9, 0.05, 0.4999], "power": [1e-9, 0.8, 0.9999], "margin": [1e-12, 3],
                        "margin_sd": [1e-12, 2], "checkpoints": [1, 1000], "curve_test": ["maxt", "holm"],
                        "metric": ["final_loss", "last_steps:50"]}.items():
        for value in values:
            spec_rules.REPORT_RULES[key].check(value)
            ReportOptions(**{key: value}).validate()


def test_every_shipped_and_committed_spec_passes_the_door():
    root = Path(__file__).resolve().parents[2] / "docs" / "study"
    paths = list(study_spec.ready_specs().values()) + sorted(root.glob("*.toml")) + sorted(root.glob("*/spec.toml"))
    assert len(paths) >= 9
    for path in paths:
        train = load_spec(path, check_paths=False).train
        files = [train.get(key) for key in ("data", "heldout_data")]
        missing = [Path(f) for f in files if f is not None and f != "embedded" and not Path(f).exists()]
        for frames in missing:
            # Frames made by a documented command and not committed (the device studies'): the study's plan
            # says how to make them, under the path the spec names.
            made = frames.relative_to(root.parents[1]).as_posix()
            plan = path.parent / ("preregistration.md" if (path.parent / "preregistration.md").exists() else "README.md")
            assert f"-o {made}" in " ".join(plan.read_text().split()), path
        if missing:
            with pytest.raises(SpecError, match="no such file or folder"):
                load_spec(path)
        else:
            load_spec(path)


def test_precision_is_a_configuration_key_and_older_studies_had_float32(tmp_path):
    import json
    from pathlib import Path

    from prednet_keras.study import runner

    path = Path(__file__).resolve().parents[2] / "docs" / "study" / "lotter-prednet.toml"
    spec = load_spec(path)
    assert {c.runtime["precision"] for c in spec.configurations} == {"float32"}
    # Configurations recorded before `precision` existed ran in float32: the same arms.
    recorded = json.loads(json.dumps(spec.to_dict()))
    for config in recorded["configurations"]:
        del config["runtime"]["precision"]
    runner._check_compatible(recorded, spec, tmp_path)
    name = spec.configurations[0].name
    bf16 = tmp_path / "bf16.toml"
    bf16.write_text(path.read_text() + f'\n[configurations.{name}-bf16]\nprecision = "mixed_bfloat16"\n')
    assert load_spec(bf16).configuration(f"{name}-bf16").runtime["precision"] == "mixed_bfloat16"


def test_heldout_data_is_a_path_beside_the_spec_or_the_embedded_video(tmp_path):
    """[train] heldout_data: a relative path is the spec folder's, as `data`; "embedded" stays a name, and is
    refused while the embedded video is also the training data."""
    import shutil

    from prednet_keras import data as pdata

    held = tmp_path / "held.h5"
    shutil.copyfile(pdata.embedded_dataset("val"), held)
    base = {"model": "prednet-chainer", "configurations": {"a": {"backend": "jax"}}}
    spec = parse_spec({**base, "train": {"protocol": "quick", "heldout_data": "held.h5"}}, base=tmp_path)
    assert spec.train["heldout_data"] == str(held.resolve())
    spec = parse_spec({**base, "train": {"protocol": "quick", "data": "held.h5", "heldout_data": "embedded"}},
                      base=tmp_path)
    assert spec.train["heldout_data"] == "embedded"
    with pytest.raises(SpecError, match="which is also the training data"):
        parse_spec({**base, "train": {"protocol": "quick", "heldout_data": "embedded"}}, base=tmp_path)
