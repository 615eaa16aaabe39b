"""The pre-registration's secondary measures in `prednet-study confirm` (study/stats/pair_measures.py, read and
rendered by study/report/confirmatory_report.py): per contrast, over seeds, the prediction disagreement, the
weight distance over training and the first update whose loss differs, from a study's pairs/ files. On
hand-made pairs files whose numbers are checked by hand, and on the device study's committed pairs."""

import json
import lzma
import math
from pathlib import Path

import numpy as np
import pytest

from prednet_keras.study.report.confirmatory_report import load_plan, pair_measures_lines, read_pair_measures
from prednet_keras.study.report.seed_pairs import FORMAT, PairsError, pairs_file, read_seed_pairs
from prednet_keras.study.report.wording import number
from prednet_keras.study.stats.confirmatory import plan_from_dict

from .test_confirmatory import PLAN_TOML, confirm, synthetic_study

DEVICE = Path(__file__).resolve().parents[2] / "docs" / "study" / "device"
STEPS = [0, 5, 10]


def pair(a, b, rms, scale, l2, cosine, first):
    return {"a": a, "b": b, "first_differing_update": first, "updates": [10, 10], "prediction_rms": rms,
            "prediction_rms_per_sequence": {"s0": rms}, "prediction_scale": scale,
            "weight_distance": {"steps": STEPS, "normalised_l2": l2, "cosine_distance": cosine}}


def write_pairs(study, seed, pairs):
    """A seed's pairs file in the format `prednet-study pairs` writes (report.seed_pairs)."""
    record = {"format": FORMAT, "seed": seed, "runs": sorted({p[k] for p in pairs for k in "ab"}), "pairs": pairs}
    path = pairs_file(study, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(lzma.compress((json.dumps(record) + "\n").encode()))
    return path


def hand_made_pairs(study):
    """Seeds 1-3 of PLAN_TOML's arms: H1 cpu / gpu, H2 tf32 / gpu (equal runs; seed 3 has no tf32 pair, like an
    arm added later), the one-ulp floor gpu/ulp / gpu (equal in seed 2), the nondeterministic floor."""
    zero = [0.0, 0.0, 0.0]
    for seed, h1, ulp in (
            (1, (0.02, 0.5, [0.0, 0.1, 0.3], [0.0, 0.01, 0.05], 3), (0.01, 0.5, [1e-7, 0.01, 0.1], zero, 7)),
            (2, (0.03, 0.6, [0.0, 0.2, 0.5], [0.0, 0.02, 0.07], 2), (0.0, 0.6, zero, zero, None)),
            (3, (0.12, 0.6, [0.0, 0.3, 0.9], [0.0, 0.03, 0.2], 1), (0.03, 0.6, [0.0, 0.05, 0.4], zero, 12))):
        run = f"seed-{seed:04d}"
        pairs = [pair(f"cpu/{run}-r1", f"gpu/{run}-r1", *h1),
                 pair(f"gpu/{run}-r1", f"gpu/{run}-ulp", *ulp),
                 # The pairs file orders each pair's runs by key; a contrast finds its pair either way.
                 pair(f"nondet/{run}-r1", f"nondet/{run}-r2", 0.005, 0.5, [0.0, 0.02, 0.2], zero, 4)]
        if seed != 3:
            pairs.append(pair(f"gpu/{run}-r1", f"tf32/{run}-r1", 0.0, 0.5, zero, zero, None))
        write_pairs(study, seed, pairs)


def plan():
    import tomllib

    return plan_from_dict(tomllib.loads(PLAN_TOML))


def by_name(measures):
    return {c["name"]: c for c in measures["contrasts"]}


def test_the_measures_of_each_contrast_by_hand(tmp_path):
    hand_made_pairs(tmp_path)
    measures = read_pair_measures([tmp_path], plan())
    assert measures["seeds"] == 3 and measures["floor"] == "one-ulp"
    assert measures["folders"] == [str(tmp_path / "pairs")]
    h1, h2, ulp, nondet = (by_name(measures)[n] for n in ("H1", "H2", "one-ulp", "nondeterministic"))
    assert [c["kind"] for c in (h1, h2, ulp, nondet)] == ["hypothesis", "hypothesis", "floor", "floor"]
    assert (h1["n"], h2["n"], ulp["n"], nondet["n"]) == (3, 2, 3, 3)
    # H1: prediction_rms / prediction_scale = 0.04, 0.05, 0.2.
    prediction = h1["prediction_disagreement"]
    assert prediction["values"] == pytest.approx([0.04, 0.05, 0.2])
    assert (prediction["median"], prediction["min"], prediction["max"]) == pytest.approx((0.05, 0.04, 0.2))
    weights = h1["weights"]
    assert weights["steps"] == STEPS and weights["median_normalised_l2"] == pytest.approx([0.0, 0.2, 0.5])
    assert weights["last"]["step"] == 10 and weights["identical"] == 0
    assert [weights["last"]["normalised_l2"][k] for k in ("median", "min", "max")] == pytest.approx([0.5, 0.3, 0.9])
    assert [weights["last"]["cosine_distance"][k] for k in ("median", "min", "max")] == pytest.approx([0.07, 0.05, 0.2])
    first = h1["first_differing_update"]
    assert first["values"] == [3, 2, 1] and first["median"] == 2 and first["never"] == 0 and first["updates"] == 10
    # H2: equal runs in both its seeds; nothing differs, the weights are equal at every snapshot.
    assert h2["seeds"] == [1, 2] and h2["prediction_disagreement"]["median"] == 0.0
    assert h2["weights"]["identical"] == 2 and h2["weights"]["median_normalised_l2"] == [0.0, 0.0, 0.0]
    assert h2["first_differing_update"]["never"] == 2 and "median" not in h2["first_differing_update"]
    # The one-ulp floor: seed 2 never differs; the median update is over the seeds that differ, (7 + 12) / 2.
    assert ulp["prediction_disagreement"]["median"] == pytest.approx(0.02)
    assert ulp["first_differing_update"]["values"] == [7, None, 12]
    assert ulp["first_differing_update"]["median"] == 9.5 and ulp["first_differing_update"]["never"] == 1
    assert ulp["weights"]["identical"] == 1 and ulp["weights"]["last"]["normalised_l2"]["median"] == pytest.approx(0.1)


def test_the_section_as_the_command_writes_it(tmp_path):
    study = tmp_path / "study"
    synthetic_study(study)
    hand_made_pairs(study)
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(PLAN_TOML)
    result = confirm(study, "--plan", plan_path, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "out" / "confirmatory.json").read_text())
    assert record["pair_measures"] == json.loads(json.dumps(read_pair_measures([study], plan())))
    assert record["files"][-1] == "confirmatory-weights.png" and record["weights_plot"] == "confirmatory-weights.png"
    assert (tmp_path / "out" / "confirmatory-weights.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (tmp_path / "out" / "confirmatory.md").read_text()
    section = markdown[markdown.index("## Secondary measures"):markdown.index("## Code")]
    for row in ("## Secondary measures: pairs of runs (secondary: reported, not tested)",
                "| H1: `cpu/r1` / `gpu/r1` | 3 | 0.05 [0.04, 0.2] | 2.5x | 2 [1, 3] | 0 of 3 |",
                "| H2: `tf32/r1` / `gpu/r1` | 2 | 0 [0, 0] | 0x | n/a | 2 of 2 |",
                "| floor one-ulp: `gpu/ulp` / `gpu/r1` | 3 | 0.02 [0, 0.05] | 1x | 9.5 [7, 12] | 1 of 3 |",
                "| floor nondeterministic: `nondet/r2` / `nondet/r1` | 3 | 0.01 [0.01, 0.01] | 0.5x | 4 [4, 4] | 0 of 3 |",
                "| H1: `cpu/r1` / `gpu/r1` | 3 | 0.5 [0.3, 0.9] | 5x | 0.07 [0.05, 0.2] | 0 of 3 |",
                "| floor one-ulp: `gpu/ulp` / `gpu/r1` | 3 | 0.1 [0, 0.4] | 1x | 0 [0, 0] | 1 of 3 |",
                "(update 10)", "![Median normalised L2 distance of the weights over training](confirmatory-weights.png)"):
        assert row in section, row
    # The tests' tables are those of the same runs without pairs: the section is beside them, nothing else moves.
    (study / "pairs").rename(tmp_path / "aside")
    assert confirm(study, "--plan", plan_path, "-o", tmp_path / "without").exit_code == 0
    without = json.loads((tmp_path / "without" / "confirmatory.json").read_text())
    assert without["contrasts"] == record["contrasts"] and without["floors"] == record["floors"]
    assert markdown.replace(section, "") == (tmp_path / "without" / "confirmatory.md").read_text().replace(
        pair_measures_lines(None)[0] + "\n\n", "")


def test_a_study_without_pairs_says_so_in_one_line(tmp_path):
    study = tmp_path / "study"
    synthetic_study(study)
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(PLAN_TOML)
    assert confirm(study, "--plan", plan_path, "-o", tmp_path / "out").exit_code == 0
    record = json.loads((tmp_path / "out" / "confirmatory.json").read_text())
    assert record["pair_measures"] is None and "weights_plot" not in record
    assert record["files"] == ["confirmatory.json", "confirmatory.md", "confirmatory.png"]
    markdown = (tmp_path / "out" / "confirmatory.md").read_text()
    assert "## Secondary measures" not in markdown
    assert markdown.count("Secondary measures") == 1 and "no source has a pairs/ folder" in markdown


def nan_prediction(pairs):
    pairs[0]["prediction_rms"] = math.nan


def infinite_weights(pairs):
    pairs[1]["weight_distance"]["normalised_l2"][2] = math.inf


def no_scale(pairs):
    del pairs[0]["prediction_scale"]


@pytest.mark.parametrize("spoil, message", [
    (nan_prediction, "pair cpu/seed-0002-r1 / gpu/seed-0002-r1: a prediction disagreement that is not a finite"),
    (infinite_weights, "pair gpu/seed-0002-r1 / gpu/seed-0002-ulp: weight_distance.normalised_l2 is not one finite"),
    (no_scale, "pair cpu/seed-0002-r1 / gpu/seed-0002-r1: a prediction disagreement that is not a finite"),
])
def test_a_pair_with_numbers_that_are_not_finite_is_refused_naming_its_file(tmp_path, spoil, message):
    study = tmp_path / "study"
    synthetic_study(study, seeds=range(1, 4))
    hand_made_pairs(study)
    path = pairs_file(study, 2)
    record = read_seed_pairs(path)
    spoil(record["pairs"])
    write_pairs(study, 2, record["pairs"])  # json writes NaN and Infinity, which it reads back
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(PLAN_TOML)
    result = confirm(study, "--plan", plan_path, "-o", tmp_path / "out")
    assert result.exit_code == 1 and result.output.startswith(f"Error: {path}: {message}"), result.output
    assert result.output.count("\n") == 1 and not (tmp_path / "out" / "confirmatory.json").exists()


def test_an_unreadable_pairs_file_is_refused_naming_it(tmp_path):
    hand_made_pairs(tmp_path)
    path = pairs_file(tmp_path, 2)
    path.write_bytes(b"not xz")
    with pytest.raises(PairsError, match=f"^{path}: not a readable pairs file"):
        read_pair_measures([tmp_path], plan())
    path.write_bytes(lzma.compress(b"[1, 2]"))
    with pytest.raises(PairsError, match=f"^{path}: not a pairs file"):
        read_pair_measures([tmp_path], plan())


def test_snapshots_at_other_steps_are_refused_naming_the_folder(tmp_path):
    hand_made_pairs(tmp_path)
    record = read_seed_pairs(pairs_file(tmp_path, 3))
    record["pairs"][0]["weight_distance"]["steps"] = [0, 4, 10]
    write_pairs(tmp_path, 3, record["pairs"])
    with pytest.raises(PairsError, match=r"pairs: H1: seeds 1 and 3 have weight snapshots at different steps"):
        read_pair_measures([tmp_path], plan())


def test_the_device_studys_pairs_give_the_numbers_the_section_prints():
    """H1's median prediction disagreement and the one-ulp floor's seeds that never differ, recomputed from the
    committed pairs files with no code of the report, and found in the section's rows."""
    plan = load_plan(DEVICE / "confirmatory-plan.toml")
    measures = read_pair_measures([DEVICE], plan)
    h1, ulp = by_name(measures)["H1"], by_name(measures)["one-ulp"]
    disagreement, never = {}, 0
    for path in sorted((DEVICE / "pairs").glob("seed-*.json.xz")):
        record = json.loads(lzma.decompress(path.read_bytes()))
        seed = record["seed"]
        for p in record["pairs"]:
            runs = {p["a"], p["b"]}
            if runs == {f"jax-cpu/seed-{seed:04d}-r1", f"jax-gpu-repeatable/seed-{seed:04d}-r1"}:
                disagreement[seed] = p["prediction_rms"] / p["prediction_scale"]
            if runs == {f"jax-gpu-repeatable/seed-{seed:04d}-ulp", f"jax-gpu-repeatable/seed-{seed:04d}-r1"}:
                never += p["first_differing_update"] is None
    # jax-gpu-repeatable was added after seeds 100-108 (README.md): those seeds have no pairs of it.
    assert sorted(disagreement) == list(range(109, 135)) == h1["seeds"] == ulp["seeds"]
    median = float(np.median(list(disagreement.values())))
    assert h1["prediction_disagreement"]["median"] == median
    lines = pair_measures_lines(measures)
    # The first table's rows: prediction disagreement, its multiple of the floor's, first differing update, never.
    row = next(line for line in lines if line.startswith("| H1: `jax-cpu/r1` / `jax-gpu-repeatable/r1` | 26 | "))
    assert row.split(" | ")[2].startswith(f"{number(median, 3)} [")
    floor_row = next(line for line in lines if line.startswith("| floor one-ulp: "))
    assert floor_row.endswith(f" | {never} of 26 |")
