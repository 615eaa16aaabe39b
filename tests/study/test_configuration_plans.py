"""Each configuration's own plan (issue 37): its replicates, replicate_seeds and 1-ulp baseline, planned, checked,
recorded apart from what the arm is, merged with a study.json from before plans, shown by --dry-run, and the
1-ulp starting points made only for the seeds whose configuration asks for them."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from prednet_keras.cli.study import main as study_cli
from prednet_keras.study import runner
from prednet_keras.study.executors import starting_points
from prednet_keras.study.spec import Plan, SpecError, load_spec, parse_spec

# The pre-registered study's shape: a deterministic reference that repeats its first two seeds (a bit-identity
# check) and is nudged by one ulp, and a nondeterministic arm run twice per seed.
STUDY = {
    "model": "autoencoder",
    "seeds": 3,
    "train": {"protocol": "quick", "images": 20},
    "configurations": {
        "reference": {"deterministic": True, "replicates": 2, "replicate_seeds": 2, "ulp_baseline": True},
        "nondeterministic": {"deterministic": False, "replicates": 2},
        "two-threads": {"deterministic": True, "threads": 2},
    },
}


def study_with(top=None, **configurations):
    """STUDY with top-level `top` and each named configuration's table replaced."""
    data = json.loads(json.dumps(STUDY))
    data.update(top or {})
    data["configurations"].update(configurations)
    return data


def test_each_configuration_plans_its_own_replicates_and_ulp_runs():
    spec = parse_spec(study_with())
    # Seed-major: every arm's first run of a seed, then the second runs of the arms that repeat it, then its
    # 1-ulp runs.
    assert [r.key for r in spec.planned_runs()] == [
        "reference/seed-0000-r1", "nondeterministic/seed-0000-r1", "two-threads/seed-0000-r1",
        "reference/seed-0000-r2", "nondeterministic/seed-0000-r2", "reference/seed-0000-ulp",
        "reference/seed-0001-r1", "nondeterministic/seed-0001-r1", "two-threads/seed-0001-r1",
        "reference/seed-0001-r2", "nondeterministic/seed-0001-r2", "reference/seed-0001-ulp",
        "reference/seed-0002-r1", "nondeterministic/seed-0002-r1", "two-threads/seed-0002-r1",
        "nondeterministic/seed-0002-r2", "reference/seed-0002-ulp",
    ]
    assert [spec.replicates_of(seed, "reference") for seed in spec.seeds] == [2, 2, 1]
    assert [spec.replicates_of(seed, "nondeterministic") for seed in spec.seeds] == [2, 2, 2]
    plans = {c.name: c.plan for c in spec.configurations}
    assert plans == {"reference": Plan(2, (0, 1), True), "nondeterministic": Plan(2, None, False),
                     "two-threads": Plan(1, None, False)}
    # Plan keys say how many runs, not what is trained: neither runtime options nor arm factors.
    for config in spec.configurations:
        assert not set(config.runtime) & {"replicates", "replicate_seeds", "ulp_baseline"}
        assert config.factors == {}
    assert spec.to_dict()["configurations"][0]["plan"] == {"replicates": 2, "replicate_seeds": [0, 1],
                                                            "ulp_baseline": True}
    # The top level keeps its own values: the default of a configuration that sets none.
    assert (spec.replicates, spec.replicate_seeds, spec.ulp_baseline) == (1, None, False)


def test_the_top_level_keys_are_each_configurations_default():
    top = {"replicates": 2, "replicate_seeds": [2], "ulp_baseline": True}
    spec = parse_spec(study_with(top, reference={"deterministic": True}, nondeterministic={"replicates": 3},
                                 **{"two-threads": {"threads": 2, "replicates": 1, "ulp_baseline": False}}))
    plans = {c.name: c.plan for c in spec.configurations}
    assert plans == {
        "reference": Plan(2, (2,), True),  # all three inherited
        "nondeterministic": Plan(3, (2,), True),  # its own replicates of the top level's seeds
        "two-threads": Plan(1, None, False),  # one run of every seed: the top level's seeds mean nothing to it
    }
    assert len(spec.planned_runs()) == (3 + 1 + 3) + (3 + 2 + 3) + 3


def test_two_configurations_differing_only_in_their_plans_are_one_arm():
    data = study_with(nondeterministic={"deterministic": True, "replicates": 3})
    with pytest.raises(SpecError, match="configurations reference and nondeterministic are the same arm"):
        parse_spec(data)


@pytest.mark.parametrize("table, expected", [
    ({"replicates": 0}, "[configurations.x] replicates: must be a whole number from 1 to 100 (re-runs of one seed "
                        "measure run-to-run variation; 100 is far more than that needs), got 0."),
    ({"replicates": "2"}, '[configurations.x] replicates: must be a whole number from 1 to 100'),
    ({"ulp_baseline": "yes"}, '[configurations.x] ulp_baseline: must be true or false, got "yes" (a string).'),
    ({"replicate_seeds": [0]}, "[configurations.x] replicate_seeds: names the seeds that get `replicates` runs, "
                               "but `replicates` is 1: set `replicates` >= 2, or leave `replicate_seeds` out."),
    ({"replicates": 2, "replicate_seeds": 4}, "[configurations.x] replicate_seeds: as a count must be between 1 "
                                              "and the number of seeds (3), got 4."),
    ({"replicates": 2, "replicate_seeds": [1, 7]}, "[configurations.x] replicate_seeds: names seed 7, not in "
                                                   "`seeds` (0, 1, 2)."),
    ({"replicates": 2, "replicate_seeds": [1, 1]}, "[configurations.x] replicate_seeds: lists a seed twice: [1, 1]."),
    ({"replicates": 2, "replicate_seeds": "all"}, "[configurations.x] replicate_seeds: must be a count"),
])
def test_a_bad_plan_key_is_refused_with_its_place(tmp_path, table, expected):
    path = tmp_path / "plans.toml"
    lines = "\n".join(f"{key} = {json.dumps(value)}" for key, value in table.items())
    path.write_text('model = "autoencoder"\nseeds = 3\n[train]\nprotocol = "quick"\nimages = 20\n'
                    f"[configurations.x]\nthreads = 1\n{lines}\n")
    with pytest.raises(SpecError) as error:
        load_spec(path)
    assert str(error.value).startswith(f"{path}: {expected}")


def test_the_plan_size_cap_counts_each_configurations_own_runs():
    data = study_with({"seeds": 10_000}, nondeterministic={"deterministic": False, "replicates": 9})
    with pytest.raises(SpecError) as error:
        parse_spec(data)
    assert str(error.value) == (
        "the plan has 120,002 runs (10,000 to 90,000 per configuration, 3 configurations); at most 100,000 (each "
        "run is a training process and a run folder): fewer seeds, replicates or configurations.")


def _recorded_before_plans(spec, **top):
    """spec.to_dict() as a study.json written before configurations had plans: no `plan`, the top-level keys."""
    record = json.loads(json.dumps(spec.to_dict()))
    for config in record["configurations"]:
        del config["plan"]
    record.update(top)
    return record


def test_a_study_json_from_before_plans_still_merges():
    spec = parse_spec(study_with())
    # The old study replicated seed 2 of every configuration and ran the 1-ulp baseline everywhere; it also had
    # an arm the spec has dropped.
    old = _recorded_before_plans(spec, replicates=3, replicate_seeds=[2], ulp_baseline=True)
    old["configurations"].append({**old["configurations"][2], "name": "dropped"})
    merged = runner._merge(old, spec.to_dict())
    plans = {c["name"]: c["plan"] for c in merged["configurations"]}
    assert plans == {
        "reference": {"replicates": 3, "replicate_seeds": None, "ulp_baseline": True},  # seeds 0, 1 and 2: all
        "nondeterministic": {"replicates": 3, "replicate_seeds": None, "ulp_baseline": True},
        "two-threads": {"replicates": 3, "replicate_seeds": [2], "ulp_baseline": True},
        "dropped": {"replicates": 3, "replicate_seeds": [2], "ulp_baseline": True},
    }
    assert (merged["replicates"], merged["replicate_seeds"], merged["ulp_baseline"]) == (3, [2], True)
    # A plan's "every seed" is every seed of its own spec, not the seeds added later.
    more = parse_spec(study_with({"seeds": 4}))
    plans = {c["name"]: c["plan"] for c in runner._merge(_recorded_before_plans(spec, replicates=2),
                                                         more.to_dict())["configurations"]}
    assert plans["two-threads"] == {"replicates": 2, "replicate_seeds": [0, 1, 2], "ulp_baseline": False}
    assert plans["reference"] == {"replicates": 2, "replicate_seeds": [0, 1, 2], "ulp_baseline": True}


def test_a_committed_study_folder_from_before_plans_records_the_plans_it_ran():
    root = Path(__file__).resolve().parents[2] / "docs" / "study"
    recorded = json.loads((root / "retraction" / runner.STUDY_RECORD).read_text())["spec"]
    assert all("plan" not in c for c in recorded["configurations"])
    spec = load_spec(root / "retraction" / "spec.toml")
    merged = runner._merge(recorded, spec.to_dict())
    expected = {"replicates": spec.replicates, "replicate_seeds": spec.replicate_seeds,
                "ulp_baseline": spec.ulp_baseline}
    assert [c["plan"] for c in merged["configurations"]] == [expected] * len(spec.configurations)
    assert [c.plan.to_dict() for c in spec.configurations] == [expected] * len(spec.configurations)


def test_dry_run_lists_each_configurations_plan_and_runs(tmp_path):
    path = tmp_path / "plans.toml"
    path.write_text('model = "autoencoder"\nseeds = 3\n[train]\nprotocol = "quick"\nimages = 20\n'
                    "[configurations.reference]\ndeterministic = true\nreplicates = 2\nreplicate_seeds = 2\n"
                    "ulp_baseline = true\n"
                    "[configurations.nondeterministic]\ndeterministic = false\nreplicates = 2\n")
    result = CliRunner().invoke(study_cli, ["run", str(path), "-o", str(tmp_path / "out"), "--dry-run"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == ("Study plans: model autoencoder, 3 seeds, each configuration's own replicates x 2 "
                        "configuration(s) = 14 runs; 0 done, 14 to run.")
    assert lines[1].startswith("  reference: backend=tensorflow") and lines[1].endswith(
        "  [3 seeds (2 of them x 2 replicates: 0, 1; the others x 1) + 1-ulp baseline = 8 runs]")
    assert lines[2].endswith("  [3 seeds x 2 replicate(s) = 6 runs]")
    assert not (tmp_path / "out").exists()


def test_only_the_seeds_of_an_ulp_configurations_runs_get_ulp_weights(tmp_path, monkeypatch):
    asked = []

    def child(spec, study_dir, seeds, nudged, backend):
        asked.append((list(seeds), list(nudged)))

    monkeypatch.setattr(starting_points, "_start_child", child)
    spec = parse_spec(study_with({"seeds": 3}, reference={"deterministic": True, "replicates": 2,
                                                          "replicate_seeds": 2, "ulp_baseline": False},
                                 nondeterministic={"deterministic": False, "ulp_baseline": True}))
    runs = spec.planned_runs()
    starting_points.start(spec, tmp_path, runs, "tensorflow")
    starting_points.start(spec, tmp_path, [r for r in runs if r.configuration.name != "nondeterministic"],
                          "tensorflow")
    starting_points.start(spec, tmp_path, [r for r in runs if (r.seed, r.perturbation) in ((1, None), (2, "ulp"))],
                          "tensorflow")
    assert asked == [([0, 1, 2], [0, 1, 2]), ([0, 1, 2], []), ([1, 2], [2])]


def test_a_seed_is_remade_for_its_ulp_weights_and_old_every_weight_ones_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(starting_points, "_start_child", lambda spec, study_dir, seeds, nudged, backend: None)
    spec = parse_spec(study_with())
    folder = starting_points.seed_folder(tmp_path, 0)
    folder.mkdir(parents=True)
    (folder / starting_points.WEIGHTS).write_bytes(b"weights")
    record = {"seed": 0, "checksum": "c0", "protocol": spec.protocol_dict()}
    (folder / starting_points.SEED_RECORD).write_text(json.dumps(record))
    first, ulp = [r for r in spec.planned_runs() if r.seed == 0 and r.configuration.name == "reference"][::2]
    assert ulp.perturbation == "ulp"
    # Enough for a run from the seed's own weights; a 1-ulp run needs the seed made again, with its ulp file.
    assert starting_points.start(spec, tmp_path, [first], "tensorflow").wait() == {0: record}
    assert starting_points.start(spec, tmp_path, [ulp], "tensorflow")._missing == [0]
    # 1-ulp weights from before the baseline nudged one weight (the record says no ulp_change): refused.
    (folder / starting_points.ULP_WEIGHTS).write_bytes(b"every weight nudged")
    (folder / starting_points.SEED_RECORD).write_text(json.dumps({**record, "ulp_checksum": "c1"}))
    with pytest.raises(starting_points.StartingPointError, match="every weight nudged, made before the baseline"):
        starting_points.start(spec, tmp_path, [ulp], "tensorflow")
    assert starting_points.start(spec, tmp_path, [first], "tensorflow").wait()[0]["ulp_checksum"] == "c1"

