"""The study's factors are one table (study/factors.py): whether arms that differ in a factor are compared, or
split into separate protocols, is what its entry says, and nothing else lists factors by hand."""

import json

import pytest

from prednet_keras.runtime.options import RUNTIME_OPTIONS, RuntimeOption
from prednet_keras.study import factors
from prednet_keras.study.report import configurations
from prednet_keras.study.factors import STUDY_FACTORS, StudyFactor
from prednet_keras.study.report import build_report
from prednet_keras.study.spec import SpecError, parse_spec

from .synthetic_runs import write_run

SEEDS = range(6)


def _with(table, factor):
    """A copy of `table` with `factor` in place of the entry of its name, or added at the end."""
    names = [f.name for f in table]
    if factor.name in names:
        return tuple(factor if f.name == factor.name else f for f in table)
    return (*table, factor)


def _two_arms(root, name, values):
    """Runs of two arms that differ only in the schedule's `name` (values[0] vs values[1]), same runtime."""
    folder = root / f"runs-{name}"
    for arm, value in enumerate(values):
        for seed in SEEDS:
            path = write_run(folder, f"arm{arm}-s{seed}", seed=seed, threads=1, shift=0.02 * arm, noise=arm)
            manifest = path / "manifest.json"
            record = json.loads(manifest.read_text())
            record["schedule"][name] = value
            manifest.write_text(json.dumps(record))
    return folder


# batch_size: today a part of the protocol; warmup_steps: a factor no table has (a throwaway).
CASES = {"batch_size": (2, 4), "warmup_steps": (0, 100)}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("comparable", [True, False])
def test_arms_that_differ_in_a_factor_are_compared_or_split_as_its_entry_says(name, comparable, tmp_path):
    folder = _two_arms(tmp_path, name, CASES[name])
    table = _with(STUDY_FACTORS, StudyFactor(name, comparable, records=("schedule", "options")))
    report, _ = build_report([folder], factors=table)
    sections = report["protocols"]
    if comparable:
        # One protocol, two configurations told apart by the factor, compared with each other.
        (section,) = sections
        configs = section["configurations"]
        assert sorted(c["settings"][name] for c in configs) == sorted(CASES[name])
        assert {c["label"].rsplit(", ", 1)[1] for c in configs} == {f"{name}={v}" for v in CASES[name]}
        assert {c["id"] for c in configs} == {f"tensorflow-cpu-{name.replace('_', '-')}-{v}" for v in CASES[name]}
        (pair,) = section["comparisons"]["pairs"]
        assert {pair["a"], pair["b"]} == {c["id"] for c in configs}
        assert not any("different protocols" in w for w in report["warnings"])
    else:
        # Two protocols, each reported on its own, never compared; the warning says what splits them.
        assert len(sections) == 2
        assert all(len(s["configurations"]) == 1 and not s["comparisons"]["pairs"] for s in sections)
        (warning,) = [w for w in report["warnings"] if "different protocols" in w]
        assert f"schedule ({name})" in warning


def test_the_default_table_splits_batch_size_and_says_so(tmp_path):
    """Batch size is part of the protocol until its entry says otherwise: the published studies' grouping."""
    entry = {f.name: f for f in STUDY_FACTORS}["batch_size"]
    assert not entry.comparable and {"schedule", "options"} <= set(entry.records)
    report, _ = build_report([_two_arms(tmp_path, "batch_size", (2, 4))])
    assert len(report["protocols"]) == 2


def test_a_factor_made_comparable_is_an_arm_factor_of_the_spec():
    """The spec's keys come from the table too: a comparable factor that is one of the kind's training options
    is set per configuration (by its [train] rule), refused in [train], and reaches the run's options."""
    spec = {"model": "autoencoder", "seeds": 1, "train": {"protocol": "quick"},
            "configurations": {"few": {"images": 20}, "many": {"images": 40}}}
    with pytest.raises(SpecError, match="unknown key images"):
        parse_spec(spec)
    table = _with(STUDY_FACTORS, StudyFactor("images", True))
    parsed = parse_spec(spec, factors=table)
    assert [c.factors for c in parsed.configurations] == [{"images": 20}, {"images": 40}]
    assert "images" not in parsed.train
    # Where a configuration sets none: the value [train] resolves to (the config class's default).
    unset = dict(spec, configurations={"few": {}})
    assert parse_spec(unset, factors=table).configurations[0].factors == {"images": parse_spec(unset).train["images"]}
    assert parsed.run_options(parsed.planned_runs()[1], "w.h5")["images"] == 40
    with pytest.raises(SpecError, match="an arm factor"):
        parse_spec(dict(spec, train={"protocol": "quick", "images": 20}), factors=table)
    with pytest.raises(SpecError, match="images"):
        parse_spec(dict(spec, configurations={"few": {"images": "twenty"}}), factors=table)


def test_runtime_switches_come_from_the_runtime_table():
    """Every runtime setting is a comparable factor, in no second list; the switches of the first studies are
    named always, each one since only where a run set it, and a resumed study assumes its default."""
    runtime = [f for f in STUDY_FACTORS if "runtime" in f.records]
    assert {f.name for f in runtime} == {o.name for o in RUNTIME_OPTIONS if o.setting}
    assert all(f.comparable for f in runtime)
    assert configurations.SETTINGS == ("backend", "device", "threads", "interop_threads", "deterministic", "cudnn",
                                       "tf32", "onednn", "xla")
    # What the runner assumed by hand before the table: unchanged.
    assert factors.predating_runtime() == {"precision": "float32", "autotune": None, "devices": 1}

    fast_math = RuntimeOption("fast_math", "switch", None, doc="fast-math rewrites.", help="Fast math.")
    table = factors.runtime_factors((*RUNTIME_OPTIONS, fast_math)) + factors.PROTOCOL_FACTORS
    assert factors.predating_runtime(table)["fast_math"] is None
    base = {"backend": "jax", "device": "cpu", "threads": None}
    unset = configurations.configuration_settings(base, {}, table)
    assert "fast_math" not in unset and unset == configurations.configuration_settings(base, {})
    on = configurations.configuration_settings(dict(base, fast_math=True), {}, table)
    assert on["fast_math"] is True
    assert configurations.describe_settings(on, {"cpu": "x"}, {}, table).endswith("fast_math=True")


def test_a_kind_adds_its_own_factors():
    from prednet_keras import model_kinds

    chainer = model_kinds.get("prednet-chainer")
    arms = factors.arm_factors(chainer)
    assert list(arms) == ["tbptt", "emulate_cpu_aliasing"]
    assert all(f.comparable and f.records == ("study",) for f in arms.values())
    assert arms["emulate_cpu_aliasing"].default is False
    assert factors.arm_factors(model_kinds.get("autoencoder")) == {}


def test_an_entry_must_say_where_it_is_recorded():
    with pytest.raises(ValueError, match="records"):
        StudyFactor("x", True, records=("nowhere",))
