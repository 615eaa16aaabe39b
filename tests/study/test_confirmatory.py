"""The pre-registered confirmatory analysis (study/stats/confirmatory.py, study/report/confirmatory_report.py and
`prednet-study confirm`), on synthetic per-seed values and run folders only: planted effects give the
plan's verdicts, every number is recomputed here by hand, and bad input is refused in one line."""

import json
import math
import re
import tomllib

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from prednet_keras.cli.study import main
from prednet_keras.session.records import RUN_FORMAT
from prednet_keras.study import archive
from prednet_keras.study.stats.confirmatory import (
    PlanError,
    analyse,
    arm_key,
    median_log_ratio,
    noise_multiple,
    plan_from_dict,
)
from prednet_keras.study.stats.power import seeds_needed_equivalence

MARGIN = math.log(1.05)
SEEDS = list(range(100, 130))


def plan_table(**changes):
    """A plan like the device study's: four hypotheses, two metrics, two floors, the rule on H1-H3."""
    table = {
        "smallest_effect": 0.05, "alpha": 0.05,
        "metrics": {"primary": "mean_last_50_updates", "co_primary": ["heldout_error"]},
        "hypotheses": [
            {"name": "H1", "arm": "jax-cpu", "reference": "jax-gpu", "expectation": "none"},
            {"name": "H2", "arm": "torch-cpu", "reference": "torch-gpu", "expectation": "none"},
            {"name": "H3", "arm": "jax-gpu-tf32", "reference": "jax-gpu", "expectation": "none"},
            {"name": "H4", "arm": "jax-gpu-cpu-path", "reference": "jax-gpu", "expectation": "CPU path higher"},
        ],
        "floors": [{"name": "one-ulp", "arm": "jax-gpu/ulp", "reference": "jax-gpu"},
                   {"name": "nondeterministic", "arm": "jax-gpu-nondeterministic/r2",
                    "reference": "jax-gpu-nondeterministic/r1"}],
        "noise_rule": {"floor": "one-ulp", "multiple": 3, "hypotheses": ["H1", "H2", "H3"]},
    }
    table.update(changes)
    return table


def planted_values(seeds=SEEDS):
    """Per-seed values with planted effects, the same for both metrics (their references differ):
    H1 +20% (SD 0.01), H2 0 (SD 0.001), H3 +3% (SD 0.001), H4 huge spread (SD 0.5); floors of SD 0.01."""
    rng = np.random.default_rng(42)
    values = {}
    for metric, level in (("mean_last_50_updates", 0.01), ("heldout_error", 0.004)):
        jax = {s: level * math.exp(rng.normal(0, 0.5)) for s in seeds}
        torch = {s: level * math.exp(rng.normal(0, 0.5)) for s in seeds}

        def moved(reference, log_shift, sd):
            return {s: v * math.exp(log_shift + rng.normal(0, sd)) for s, v in reference.items()}

        nondeterministic = {s: level * math.exp(rng.normal(0, 0.5)) for s in seeds}
        values[metric] = {
            "jax-gpu": jax, "torch-gpu": torch,
            "jax-cpu": moved(jax, math.log(1.2), 0.01), "torch-cpu": moved(torch, 0.0, 0.001),
            "jax-gpu-tf32": moved(jax, math.log(1.03), 0.001), "jax-gpu-cpu-path": moved(jax, 0.0, 0.5),
            "jax-gpu/ulp": moved(jax, 0.0, 0.01), "jax-gpu-nondeterministic/r1": nondeterministic,
            "jax-gpu-nondeterministic/r2": moved(nondeterministic, 0.0, 0.01),
        }
    return values


@pytest.fixture(scope="module")
def planted():
    plan = plan_from_dict(plan_table())
    return plan, planted_values(), analyse(plan, planted_values())


def contrast(result, hypothesis, metric="mean_last_50_updates"):
    return next(c for c in result["contrasts"] if c["hypothesis"] == hypothesis and c["metric"] == metric)


def test_planted_effects_give_the_plans_verdicts(planted):
    _, _, result = planted
    assert result["family"] == {"contrasts": 8, "alpha": 0.05, "strictest_level": 0.05 / 8}
    assert [(c["metric"], c["hypothesis"]) for c in result["contrasts"]] == [
        (m, h) for m in ("mean_last_50_updates", "heldout_error") for h in ("H1", "H2", "H3", "H4")]
    for metric in ("mean_last_50_updates", "heldout_error"):
        effect = contrast(result, "H1", metric)
        assert effect["verdict"] == "effect" and effect["direction"] == "arm higher" and effect["n"] == 30
        assert effect["mean_percent"] == pytest.approx(20, abs=0.5)
        for bounds in (effect["t_interval_percent"], effect["bootstrap_interval_percent"]):
            assert 18 < bounds[0] < effect["mean_percent"] < bounds[1] < 22
        assert effect["beyond_margin"] == {"above": 30, "below": 0}
        assert contrast(result, "H2", metric)["verdict"] == "no effect larger than 5%"
        small = contrast(result, "H3", metric)
        assert small["verdict"] == "an effect smaller than 5%" and small["mean_percent"] == pytest.approx(3, abs=0.1)
        assert small["beyond_margin"] == {"above": 0, "below": 0}
        wide = contrast(result, "H4", metric)
        assert wide["verdict"] == "inconclusive"
        # At Holm's strictest step, alpha / 8, as the preregistration computed its 35 seeds.
        assert wide["seeds_needed"] == seeds_needed_equivalence(wide["sd"], MARGIN, alpha=0.05 / 8, paired=True)
        assert wide["seeds_needed"] > seeds_needed_equivalence(wide["sd"], MARGIN, alpha=0.05, paired=True) > 30
        assert all(c["seeds_needed"] is None for c in result["contrasts"] if c["verdict"] != "inconclusive")


def test_a_lower_arm_is_an_effect_of_the_other_sign():
    values = planted_values()
    for metric in values:
        values[metric]["jax-cpu"] = {s: v / 1.44 for s, v in values[metric]["jax-cpu"].items()}  # 1.2 / 1.44 = 1 / 1.2
    effect = contrast(analyse(plan_from_dict(plan_table()), values), "H1")
    assert effect["verdict"] == "effect" and effect["direction"] == "arm lower"
    assert effect["mean_percent"] == pytest.approx(100 * (1 / 1.2 - 1), abs=0.5)
    assert effect["t_interval_percent"][1] < 0 and effect["beyond_margin"] == {"above": 0, "below": 30}


def hand_holm(pvalues):
    """Holm's step-down, written out: the i-th smallest p times (m - i), running maximum, at most 1."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 0.0
    for step, index in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - step) * pvalues[index]))
        adjusted[index] = running
    return adjusted


def test_holm_runs_over_the_family_of_eight_for_each_test(planted):
    _, _, result = planted
    contrasts = result["contrasts"]
    assert [c["holm_p"] for c in contrasts] == pytest.approx(hand_holm([c["p"] for c in contrasts]), rel=1e-12)
    assert [c["tost_holm_p"] for c in contrasts] == pytest.approx(hand_holm([c["tost_p"] for c in contrasts]),
                                                                  rel=1e-12)
    h3 = contrast(result, "H3")
    assert h3["tost_holm_p"] > h3["tost_p"] and h3["holm_p"] > h3["p"]  # adjusted, not the raw p-values


def test_one_contrast_recomputed_with_numpy_and_scipy(planted):
    plan, values, result = planted
    c = contrast(result, "H3", "heldout_error")
    arm, reference = values["heldout_error"]["jax-gpu-tf32"], values["heldout_error"]["jax-gpu"]
    d = np.log(np.array([arm[s] / reference[s] for s in SEEDS]))
    n, mean, se = d.size, d.mean(), d.std(ddof=1) / math.sqrt(d.size)
    half = stats.t.ppf(0.975, n - 1) * se
    assert c["log_ratios"] == d.tolist() and c["mean"] == pytest.approx(mean, rel=1e-12)
    assert c["t_interval"] == pytest.approx([mean - half, mean + half], rel=1e-10)
    assert c["t_interval_percent"] == pytest.approx([100 * math.expm1(mean - half), 100 * math.expm1(mean + half)])
    assert c["p"] == pytest.approx(2 * stats.t.sf(abs(mean / se), n - 1), rel=1e-8)
    p_lower = stats.t.sf((mean + MARGIN) / se, n - 1)  # H0: mean d <= -margin
    p_upper = stats.t.cdf((mean - MARGIN) / se, n - 1)  # H0: mean d >= +margin
    assert c["tost_p"] == pytest.approx(max(p_lower, p_upper), rel=1e-6)
    assert c["wilcoxon_p"] == pytest.approx(stats.wilcoxon(d).pvalue)


def test_the_bootstrap_interval_is_the_plans_and_reproducible(planted):
    plan, values, result = planted
    c = contrast(result, "H1")
    d = np.asarray(c["log_ratios"])
    resamples = np.random.default_rng(0).integers(0, d.size, size=(10_000, d.size))
    means = np.sort(d[resamples].mean(axis=1))
    # The order statistics at the 2.5% and 97.5% points, without interpolation.
    assert c["bootstrap_interval"] == [means[249], means[9750]]
    again = analyse(plan, values)
    assert json.dumps(again) == json.dumps(result)
    other_seed = analyse(plan_from_dict(plan_table(bootstrap_seed=1)), values)
    assert contrast(other_seed, "H1")["bootstrap_interval"] != c["bootstrap_interval"]


def test_the_noise_multiple_by_hand_with_zero_differences():
    plan = plan_from_dict(plan_table(bootstrap_resamples=2000))
    # Per seed |d| / |u|: 0 (d = 0), 2, 0.5, 4, 3, 0 (d = 0 and u = 0: the smallest), inf (u = 0).
    d = [0.0, 0.02, -0.01, 0.04, 0.003, 0.0, 0.005]
    u = [0.01, 0.01, 0.02, -0.01, 0.001, 0.0, 0.0]
    out = noise_multiple(d, u, plan, rule="one-ulp")
    assert out["n"] == 7 and out["multiple"] == pytest.approx(2.0)
    assert out["rms_ratio"] == pytest.approx(math.sqrt(np.mean(np.square(d)) / np.mean(np.square(u))))
    # The midpoint of the two middle values; -inf and +inf meet at 0 (a ratio of 1).
    assert median_log_ratio([-np.inf, np.inf]) == 0.0
    assert median_log_ratio([-np.inf, -np.inf, 1.0, np.inf]) == -np.inf
    assert median_log_ratio([[1.0, 3.0], [-np.inf, 2.0]]).tolist() == [2.0, -np.inf]
    # Every arm equal to its reference: G = 0, whatever the floor did.
    assert noise_multiple([0.0, 0.0, 0.0], [0.01, 0.0, 0.02], plan)["multiple"] == 0.0
    # A floor that never moved while the arm did: infinitely larger, written as "inf".
    assert noise_multiple([0.01, 0.02, 0.03], [0.0, 0.0, 0.0], plan, rule="one-ulp")["multiple"] == "inf"


def test_the_noise_rule_outcomes_and_its_bootstrap():
    plan = plan_from_dict(plan_table())
    u = np.random.default_rng(3).normal(0, 0.01, 35)
    both = noise_multiple(2 * u, u, plan, rule="one-ulp")
    assert both["multiple"] == pytest.approx(2.0) and both["interval"] == pytest.approx([2.0, 2.0])
    assert both["outcomes"] == ["no larger than the one-ulp noise", "larger than the one-ulp noise"]
    same = noise_multiple(u * np.exp(np.random.default_rng(4).normal(0, 0.1, 35)), u, plan, rule="one-ulp")
    assert same["outcome"] == "no larger than the one-ulp noise"
    larger = noise_multiple(10 * u, u, plan, rule="one-ulp")
    assert larger["outcome"] == "larger than the one-ulp noise"
    d = u * np.exp(np.random.default_rng(5).normal(1.5, 3, 35))
    wide = noise_multiple(d, u, plan, rule="one-ulp")
    assert wide["outcome"] == "not separable from the one-ulp noise with these seeds"
    assert "outcome" not in noise_multiple(d, u, plan)  # a floor that is described only
    # The interval: seeds resampled jointly (one index for d and u), the median's order statistics.
    log_ratios = np.log(np.abs(d)) - np.log(np.abs(u))
    resamples = np.random.default_rng(0).integers(0, 35, size=(10_000, 35))
    medians = np.sort(np.median(log_ratios[resamples], axis=1))
    assert wide["interval"] == pytest.approx([math.exp(medians[249]), math.exp(medians[9750])], rel=1e-12)
    assert wide["multiple"] == pytest.approx(math.exp(np.median(log_ratios)), rel=1e-12)


def test_the_floors_beside_the_contrasts(planted):
    _, values, result = planted
    floors = [(f["metric"], f["floor"]) for f in result["floors"]]
    assert floors == [(m, f) for m in ("mean_last_50_updates", "heldout_error")
                      for f in ("one-ulp", "nondeterministic")]
    ulp = result["floors"][0]
    u = np.log([values["mean_last_50_updates"]["jax-gpu/ulp"][s] / values["mean_last_50_updates"]["jax-gpu"][s]
                for s in SEEDS])
    assert ulp["rms"] == pytest.approx(math.sqrt(np.mean(u**2))) and ulp["beyond_margin"] == {"above": 0, "below": 0}
    h1 = contrast(result, "H1")
    assert [(n["floor"], n["rule"]) for n in h1["noise"]] == [("one-ulp", True), ("nondeterministic", False)]
    assert h1["noise"][0]["outcome"] == "larger than the one-ulp noise" and "outcome" not in h1["noise"][1]
    assert "noise" not in contrast(result, "H4")  # not a hypothesis of the rule


def test_identical_arms_and_missing_seeds():
    values = planted_values()
    for metric in values:
        values[metric]["torch-cpu"] = dict(values[metric]["torch-gpu"])  # bit-identical on every seed
        del values[metric]["jax-cpu"][101]
        del values[metric]["jax-gpu/ulp"][102]
    result = analyse(plan_from_dict(plan_table()), values)
    same = contrast(result, "H2")
    assert same["wilcoxon_p"] is None and same["p"] == 1.0 and same["verdict"] == "no effect larger than 5%"
    assert same["direction"] is None and same["noise"][0]["multiple"] == 0.0
    h1 = contrast(result, "H1")
    assert h1["n"] == 29 and 101 not in h1["seeds"] and h1["left_out"] == {"arm_only": [], "reference_only": [101]}
    assert h1["noise"][0]["n"] == 28  # seeds complete in all four arms


def test_a_hypothesis_not_testable_as_planned_stays_in_the_family():
    table = plan_table()
    table["hypotheses"][0]["not_testable"] = "the JAX float32 GPU reference does not repeat"
    values = planted_values()
    result = analyse(plan_from_dict(table), values)
    h1 = contrast(result, "H1")
    assert h1["verdict"] == "not testable as planned: the JAX float32 GPU reference does not repeat"
    assert h1["exploratory_verdict"] == "effect"
    assert [c["holm_p"] for c in result["contrasts"]] == [c["holm_p"] for c in analyse(plan_from_dict(plan_table()),
                                                                                         values)["contrasts"]]


@pytest.mark.parametrize("value", [math.nan, math.inf, 0.0, -0.01])
def test_values_a_log_ratio_cannot_take_are_refused(value):
    values = planted_values()
    values["heldout_error"]["jax-gpu-tf32"][107] = value
    with pytest.raises(PlanError, match=r"arm jax-gpu-tf32/r1, seed 107, metric 'heldout_error'"):
        analyse(plan_from_dict(plan_table()), values)


def test_missing_values_are_refused():
    values = planted_values()
    del values["heldout_error"]["jax-gpu/ulp"]
    with pytest.raises(PlanError, match="metric 'heldout_error': no values of arm jax-gpu/ulp"):
        analyse(plan_from_dict(plan_table()), values)
    with pytest.raises(PlanError, match="no values of metric 'heldout_error'"):
        analyse(plan_from_dict(plan_table()), {"mean_last_50_updates": planted_values()["mean_last_50_updates"]})
    values = planted_values()
    values["heldout_error"]["jax-gpu/r1"] = values["heldout_error"]["jax-gpu"]
    with pytest.raises(PlanError, match="arm jax-gpu/r1 is given twice"):
        analyse(plan_from_dict(plan_table()), values)


def test_arm_keys():
    assert arm_key("jax-gpu") == "jax-gpu/r1" and arm_key("jax-gpu/ulp") == "jax-gpu/ulp"
    assert arm_key("jax-gpu-nondeterministic/r2") == "jax-gpu-nondeterministic/r2"
    with pytest.raises(PlanError, match="configuration/rN or configuration/ulp"):
        arm_key("jax-gpu/r0")


@pytest.mark.parametrize("change, message", [
    ({"alpha": None}, "plan: missing key(s) alpha"),
    ({"margin": 0.05}, "plan: unknown key(s) margin"),
    ({"smallest_effect": 0}, "smallest_effect: a number in (0, inf)"),
    ({"hypotheses": []}, "hypotheses: a non-empty list"),
    ({"hypotheses": [{"name": "H1", "arm": "a", "reference": "b"}]}, "hypotheses[1]: missing key(s) expectation"),
    ({"hypotheses": [{"name": "H1", "arm": "a", "reference": "a/r1", "expectation": "x"}]}, "the same runs (a/r1)"),
    ({"noise_rule": {"floor": "two-ulp", "multiple": 3, "hypotheses": ["H1"]}}, "'two-ulp' is not one of the"),
    ({"noise_rule": {"floor": "one-ulp", "multiple": 3, "hypotheses": ["H9"]}}, "noise_rule.hypotheses"),
    ({"metrics": {"primary": "m", "co_primary": ["m"]}}, "a metric is named twice"),
])
def test_bad_plans_are_refused(change, message):
    table = plan_table(**change)
    table = {k: v for k, v in table.items() if v is not None}
    with pytest.raises(PlanError, match=re.escape(message)):
        plan_from_dict(table)


# ------------------------------------------------------------------------------------ the command

PLAN_TOML = """\
title = "A synthetic study"
smallest_effect = 0.05
alpha = 0.05
bootstrap_resamples = 500
deviations = ["2026-12-06: a synthetic deviation"]

[metrics]
primary = "mean_last_50_updates"
co_primary = ["heldout_error"]

[[hypotheses]]
name = "H1"
arm = "cpu"
reference = "gpu"
expectation = "none"

[[hypotheses]]
name = "H2"
arm = "tf32"
reference = "gpu"
expectation = "none"
note = "a note"

[[floors]]
name = "one-ulp"
arm = "gpu/ulp"
reference = "gpu"

[[floors]]
name = "nondeterministic"
arm = "nondet/r2"
reference = "nondet/r1"

[noise_rule]
floor = "one-ulp"
multiple = 3
hypotheses = ["H1", "H2"]
"""


def write_run(runs, configuration, seed, tail, metric, heldout, status="complete"):
    """A run folder as a study writes it, reduced to what the analysis reads: manifest and history."""
    folder = runs / configuration / f"seed-{seed:04d}-{tail}"
    folder.mkdir(parents=True)
    manifest = {"format": RUN_FORMAT, "format_version": 1, "status": status, "seeds": {"seed": seed},
                "study": {"configuration": configuration, "replicate": None if tail == "ulp" else int(tail[1:]),
                          "perturbation": "ulp" if tail == "ulp" else None},
                "metric": {"name": "mean_last_50_updates", "value": metric}, "result": {"heldout_error": heldout}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "history.csv").write_text("update,loss\n1,0.5\n")
    return folder


def synthetic_study(root, seeds=range(1, 13)):
    """runs/ of a small study: H1 +20%, H2 identical, floors of about 1%; returns the values written."""
    rng = np.random.default_rng(9)
    values = {"mean_last_50_updates": {}, "heldout_error": {}}
    runs = root / "runs"
    for seed in seeds:
        base = (0.01 * math.exp(rng.normal(0, 0.3)), 0.004 * math.exp(rng.normal(0, 0.3)))
        nondet = 0.01 * math.exp(rng.normal(0, 0.3))
        for configuration, tail, factor in (("gpu", "r1", 1.0), ("gpu", "ulp", math.exp(rng.normal(0, 0.01))),
                                            ("cpu", "r1", 1.2 * math.exp(rng.normal(0, 0.01))), ("tf32", "r1", 1.0),
                                            ("nondet", "r1", nondet / base[0]),
                                            ("nondet", "r2", nondet / base[0] * math.exp(rng.normal(0, 0.01))),
                                            ("other", "r1", 2.0)):
            metric, heldout = base[0] * factor, base[1] * factor
            write_run(runs, configuration, seed, tail, metric, heldout)
            values["mean_last_50_updates"].setdefault(f"{configuration}/{tail}", {})[seed] = metric
            values["heldout_error"].setdefault(f"{configuration}/{tail}", {})[seed] = heldout
    write_run(runs, "cpu", 13, "r1", 0.01, 0.004, status="running")  # left out, listed
    return values


def confirm(*arguments):
    return CliRunner().invoke(main, ["confirm", *map(str, arguments)])


def test_the_command_writes_the_analysis_of_a_folder_and_of_its_archive(tmp_path):
    study = tmp_path / "study"
    values = synthetic_study(study)
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(PLAN_TOML)
    result = confirm(study, "--plan", plan_path, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "72 runs of the plan's arms used, of 85 found (1 left out, see confirmatory.md)" in result.output
    assert "H1 mean_last_50_updates: mean 19.5% [18.8%, 20.3%], effect; larger than the one-ulp noise" in result.output
    record = json.loads((tmp_path / "out" / "confirmatory.json").read_text())
    assert record["files"] == ["confirmatory.json", "confirmatory.md", "confirmatory.png"]
    assert (tmp_path / "out" / "confirmatory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # What the runs hold, read through their manifests, is what the analysis used.
    wanted = {k: {arm: by_seed for arm, by_seed in v.items() if not arm.startswith("other")} for k, v in values.items()}
    expected = json.loads(json.dumps(analyse(plan_from_dict(tomllib.loads(PLAN_TOML)), wanted)))
    assert record["contrasts"] == expected["contrasts"] and record["floors"] == expected["floors"]
    assert [c["verdict"] for c in record["contrasts"]][:2] == ["effect", "no effect larger than 5%"]
    assert record["runs"]["left_out"] == [{"path": str(study / "runs/cpu/seed-0013-r1"), "reason": "status 'running'"}]
    markdown = (tmp_path / "out" / "confirmatory.md").read_text()
    for text in ("# A synthetic study", "## mean_last_50_updates (primary)", "## heldout_error (co-primary)",
                 "| H1: `cpu/r1` / `gpu/r1` | 12 |", "## Noise floors", "| mean_last_50_updates | H1 | one-ulp | 12 |",
                 "described, not the rule", "- 2026-12-06: a synthetic deviation",
                 "![Per-seed log-ratios](confirmatory.png)",
                 "`" + str(study / "runs/cpu/seed-0013-r1") + "`: status 'running'"):
        assert text in markdown, text
    # The same runs packed: the study folder is read through its archive, to the same numbers and bytes.
    archive.pack(study, remove=True)
    assert not (study / "runs").exists()
    for output in ("packed", "packed-again"):
        assert confirm(study, "--plan", plan_path, "-o", tmp_path / output, "--no-plot").exit_code == 0
    packed = json.loads((tmp_path / "packed" / "confirmatory.json").read_text())
    assert packed["contrasts"] == record["contrasts"] and "plot" not in packed
    assert (tmp_path / "packed" / "confirmatory.json").read_bytes() == \
        (tmp_path / "packed-again" / "confirmatory.json").read_bytes()
    again = confirm(study, "--plan", plan_path, "-o", tmp_path / "packed", "--no-plot")
    assert again.exit_code == 1 and "exists; pass --overwrite" in again.output


def refusal(tmp_path, plan_text=PLAN_TOML, change=None):
    study = tmp_path / "study"
    synthetic_study(study, seeds=range(1, 4))
    if change:
        change(study / "runs")
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(plan_text)
    result = confirm(study, "--plan", plan_path, "-o", tmp_path / "out")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1, result.output
    assert not (tmp_path / "out" / "confirmatory.json").exists()
    return result.output


def test_a_plan_without_a_key_is_refused(tmp_path):
    output = refusal(tmp_path, PLAN_TOML.replace("alpha = 0.05\n", ""))
    assert "plan.toml: plan: missing key(s) alpha" in output
    assert "not a TOML file" in refusal(tmp_path / "toml", "alpha = \n")


def test_an_arm_the_records_lack_is_refused(tmp_path):
    output = refusal(tmp_path, PLAN_TOML.replace('arm = "tf32"', 'arm = "tf64"'))
    assert "the plan names arm(s) tf64/r1, which the records do not have" in output


def test_a_run_without_a_metric_or_with_nan_is_refused(tmp_path):
    def drop(runs):
        path = runs / "tf32" / "seed-0002-r1" / "manifest.json"
        manifest = json.loads(path.read_text())
        del manifest["result"]["heldout_error"]
        path.write_text(json.dumps(manifest))

    assert "tf32/seed-0002-r1: no finite value of metric 'heldout_error'" in refusal(tmp_path, change=drop)

    def nan(runs):
        path = runs / "gpu" / "seed-0003-ulp" / "manifest.json"
        path.write_text(path.read_text().replace('"value": 0.', '"value": NaN, "was": 0.'))

    output = refusal(tmp_path / "nan", change=nan)
    assert "gpu/seed-0003-ulp: no finite value of metric 'mean_last_50_updates' (missing, NaN or inf" in output


def test_runs_without_their_provenance_are_refused_when_the_plan_requires_it(tmp_path):
    """require_provenance: every run used must say which committed, unchanged code ran and from which
    starting point; the code commits are counted in the output either way."""
    plan_text = PLAN_TOML.replace("alpha = 0.05\n", "alpha = 0.05\nrequire_provenance = true\n", 1)
    assert "records no code commit; the plan requires runs of committed, unchanged code" in \
        refusal(tmp_path / "none", plan_text)

    def provenance(dirty):
        def change(runs):
            for path in runs.glob("*/*/manifest.json"):
                manifest = json.loads(path.read_text())
                manifest["code"] = {"commit": "a" * 40, "dirty": dirty}
                manifest["initial_weights"] = {"checksum": "b" * 64}
                path.write_text(json.dumps(manifest))
        return change

    assert "with uncommitted changes" in refusal(tmp_path / "dirty", plan_text, provenance(True))
    study = tmp_path / "clean" / "study"
    synthetic_study(study, seeds=range(1, 4))
    provenance(False)(study / "runs")
    (tmp_path / "plan.toml").write_text(plan_text)
    result = confirm(study, "--plan", tmp_path / "plan.toml", "-o", tmp_path / "out", "--no-plot")
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "out" / "confirmatory.json").read_text())
    assert record["runs"]["code"] == [{"recorded": True, "commit": "a" * 40, "dirty": False, "runs": 18,
                                       "package_sha256": []}]
    assert f"| {'a' * 40} | no | 18 |" in (tmp_path / "out" / "confirmatory.md").read_text()


def test_code_known_by_its_package_checksum_is_accepted_only_where_the_plan_names_it(tmp_path):
    """code_checksums: runs that record no clean commit but the package checksum of a commit the plan names
    (the device study's portion 5 recorded a stale commit, "dirty", with the checksum of the code it ran)."""
    plan_text = PLAN_TOML.replace("alpha = 0.05\n", "alpha = 0.05\nrequire_provenance = true\n", 1)

    def stale_commit(runs):
        for path in runs.glob("*/*/manifest.json"):
            manifest = json.loads(path.read_text())
            manifest["code"] = {"commit": "c" * 40, "dirty": True, "package_sha256": "d" * 64}
            manifest["initial_weights"] = {"checksum": "b" * 64}
            path.write_text(json.dumps(manifest))

    assert "with uncommitted changes" in refusal(tmp_path / "unnamed", plan_text, stale_commit)
    other = plan_text + f'\n[code_checksums]\n{"e" * 64} = "{"a" * 40}"\n'
    assert "with uncommitted changes" in refusal(tmp_path / "other", other, stale_commit)
    named = plan_text + f'\n[code_checksums]\n{"d" * 64} = "{"a" * 40}"\n'
    study = tmp_path / "named" / "study"
    synthetic_study(study, seeds=range(1, 4))
    stale_commit(study / "runs")
    (tmp_path / "plan.toml").write_text(named)
    result = confirm(study, "--plan", tmp_path / "plan.toml", "-o", tmp_path / "out", "--no-plot")
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "out" / "confirmatory.json").read_text())
    assert record["plan"]["code_checksums"] == {"d" * 64: "a" * 40}
    assert (f"| {'c' * 40} (its package checksum is that of {'a' * 40}: the plan's code_checksums) | yes | 18 |"
            in (tmp_path / "out" / "confirmatory.md").read_text())
    for bad, said in (('alpha = 0.05\ncode_checksums = ["x"]\n', "a table of package_sha256"),
                      (f'\n[code_checksums]\nabc = "{"a" * 40}"\n', "is not a package_sha256"),
                      (f'\n[code_checksums]\n{"d" * 64} = "abc1234"\n', "is not a commit (40 lower-case hex digits)")):
        (tmp_path / "bad.toml").write_text(plan_text.replace("alpha = 0.05\n", bad, 1) if bad.startswith("alpha")
                                           else plan_text + bad)
        refused = confirm(study, "--plan", tmp_path / "bad.toml", "-o", tmp_path / "bad-out", "--no-plot")
        assert refused.exit_code != 0 and said in refused.output, refused.output


def test_the_device_studys_plan_file_says_what_the_preregistration_plans():
    """Only the plan file is read here, never the study's records (no interim looks)."""
    from pathlib import Path

    from prednet_keras.study.report.confirmatory_report import load_plan

    plan = load_plan(Path(__file__).resolve().parents[2] / "docs/study/device/confirmatory-plan.toml")
    assert [(h.name, h.arm, h.reference) for h in plan.hypotheses] == [
        ("H1", "jax-cpu/r1", "jax-gpu-repeatable/r1"), ("H2", "torch-cpu/r1", "torch-gpu/r1"),
        ("H3", "jax-gpu-repeatable-tf32/r1", "jax-gpu-repeatable/r1"),
        ("H4", "jax-gpu-repeatable-cpu-path/r1", "jax-gpu-repeatable/r1")]
    assert plan.metrics == ("mean_last_50_updates", "heldout_error") and plan.family_size == 8
    assert plan.margin == pytest.approx(0.0488, abs=5e-5) and plan.alpha == 0.05 and plan.power == 0.8
    assert (plan.bootstrap_resamples, plan.bootstrap_seed) == (10_000, 0)
    assert [(f.name, f.arm, f.reference) for f in plan.floors] == [
        ("one-ulp", "jax-gpu-repeatable/ulp", "jax-gpu-repeatable/r1"),
        ("nondeterministic", "jax-gpu-nondeterministic/r2", "jax-gpu-nondeterministic/r1")]
    assert (plan.noise_floor, plan.noise_multiple, plan.noise_hypotheses) == ("one-ulp", 3.0, ("H1", "H2", "H3"))
    assert plan.require_provenance is True
    # The deviations known so far, dated, as docs/study/device/README.md tells them.
    assert len(plan.deviations) == 8 and all(d.startswith(("2026-12-05", "2026-12-06")) for d in plan.deviations)
    assert "Amendment 1" in plan.deviations[0] and "Amendment 1, step 2" in plan.deviations[3]
    # Amendment 1's step 2 (2026-12-06): the reference with autotuning off. The one code checksum is
    # recomputed from git by tests/study/test_device_study.py.
    assert [commit[:7] for _, commit in plan.code_checksums] == ["5dcf122"]


@pytest.mark.parametrize("content, rule", [
    (b"PK\x03\x04\xe5\x00binary", r"cannot read the plan \(not UTF-8 text: "),
    (b"x" * ((1 << 20) + 1), r"larger than 1,024 KiB; a plan is a few KB of TOML, so this is not one\."),
    (b"[plan\n", r"not a TOML file \("),
])
def test_a_plan_file_that_is_no_plan_is_one_line_naming_it(tmp_path, content, rule):
    from prednet_keras.study.report.confirmatory_report import load_plan

    path = tmp_path / "plan.toml"
    path.write_bytes(content)
    with pytest.raises(PlanError, match=re.escape(str(path)) + ": " + rule):
        load_plan(path)
    with pytest.raises(PlanError, match=r": a folder, not a plan file\.$"):
        load_plan(tmp_path)
