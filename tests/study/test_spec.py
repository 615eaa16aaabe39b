"""The study spec (prednet_keras.study.spec): what is accepted, and the message for what is not."""

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
        "tf32": None, "onednn": None, "strict": True, "xla": None, "interop_threads": None,
    }
    # [train] resolved by the model's config class; the runner owns seed and weights.
    assert spec.train["images"] == 20 and spec.train["autoencoder"] == "conv"
    assert "seed" not in spec.train and "init_weights" not in spec.train
    options = spec.run_options(runs[0], "/x/w.h5")
    assert (options["seed"], options["init_weights"], options["model"]) == (5, "/x/w.h5", "autoencoder")


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
        ({"model": "resnet"}, "`model` must be one of"),
        ({"colour": "red"}, "unknown key colour"),
        ({"seeds": 0}, "`seeds` must be >= 1"),
        ({"seeds": [1, 1]}, "lists a seed twice"),
        ({"seeds": "many"}, "`seeds` must be a count"),
        ({"replicates": 0}, "`replicates` must be a whole number >= 1"),
        ({"ulp_baseline": "yes"}, "`ulp_baseline` must be true or false"),
        ({"train": {"seed": 3}}, "[train] may not set seed"),
        ({"train": {"protocol": "quick", "epochs": 3}}, "unknown option epochs for model autoencoder"),
        ({"train": {"protocol": "slow"}}, "--protocol must be one of"),
        ({"train": {"images": -1}}, "--images must be a whole number >= 1"),
        ({"train": {"data": "/no/such/mnist.npz"}}, "no such file"),
        ({"configurations": {}}, "at least one"),
        ({"configurations": {"a": {"device": "tpu"}}}, "Unknown device 'tpu'"),
        ({"configurations": {"a": {"backend": "mxnet"}}}, "Unknown backend 'mxnet'"),
        ({"configurations": {"a": {"threads": 0}}}, "`threads` must be >= 1"),
        ({"configurations": {"a": {"emulate_cpu_aliasing": True}}}, "unknown key emulate_cpu_aliasing"),
        ({"configurations": {"a": {"threads": 1}, "b": {"threads": 1}}}, "configurations a and b are the same arm"),
        ({"configurations": {"a b": {}}}, "configuration name 'a b'"),
        ({"runtime": {"gpu": True}}, "[runtime]: unknown key gpu"),
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
    assert "Error:" in result.output and "`threads` must be a whole number" in result.output
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


def test_a_study_run_before_a_train_option_existed_resumes_with_that_options_old_value(tmp_path):
    import json
    from pathlib import Path

    from prednet_keras.study import runner

    path = Path(__file__).resolve().parents[2] / "docs" / "study" / "lotter-prednet.toml"
    spec = load_spec(path)
    assert spec.train["unroll"] is False
    # lotter-prednet/'s first runs were recorded before [train] had `unroll`; they trained the loop rolled.
    recorded = json.loads(json.dumps(spec.to_dict()))
    del recorded["train"]["unroll"]
    runner._check_compatible(recorded, spec, tmp_path)
    changed = tmp_path / "changed.toml"
    changed.write_text(path.read_text().replace("unroll = false", "unroll = true"))
    with pytest.raises(SpecError, match=r"another \[train\] unroll"):
        runner._check_compatible(recorded, load_spec(changed), tmp_path)
