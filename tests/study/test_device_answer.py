"""The device study's answer, as the README and docs/study/device/README.md state it, recomputed from the
committed runs: the plan's analysis run again (`read_values` + `analyse`, what `prednet-study confirm` runs),
every number of the answer derived from its result, and a sentence whose number drifts from the records
fails here. The committed report (docs/study/device/confirmatory/confirmatory.json) must hold the same
numbers: the answer and the report cannot part."""

import functools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from prednet_keras.study.report.confirmatory_report import load_plan, read_pair_measures, read_values
from prednet_keras.study.report.wording import number, p_value
from prednet_keras.study.stats.confirmatory import analyse

from .test_device_study import _manifests
from .test_published_answer import NUMBER, _load, _per_seed, _section

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "docs" / "study" / "device"
# Numbers of the set-up, not results: the frame size, the channels, the paper's metric's window, the margin.
SETUP = ["32x40 frames", "channels 3,16,32,64", "last 50 training losses", "95% t interval", "5%"]


def percent(value):
    """As the report writes a change: three significant digits."""
    return f"{number(value, 3)}%"


def percent_interval(bounds):
    return f"[{percent(bounds[0])}, {percent(bounds[1])}]"


def multiple(noise):
    return f"{number(noise['multiple'], 3)} [{number(noise['interval'][0], 3)}, {number(noise['interval'][1], 3)}]"


@functools.lru_cache(maxsize=None)
def analysis(plan_file="confirmatory-plan.toml", study=STUDY):
    plan = load_plan(study / plan_file)
    values, runs = read_values([study], plan)
    return plan, analyse(plan, values), runs


def _contrast(result, hypothesis, metric):
    (found,) = [c for c in result["contrasts"] if c["hypothesis"] == hypothesis and c["metric"] == metric]
    return found


def _floor(result, name, metric):
    (found,) = [f for f in result["floors"] if f["floor"] == name and f["metric"] == metric]
    return found


def _one_ulp(contrast):
    (found,) = [n for n in contrast["noise"] if n["floor"] == "one-ulp"]
    return found


@functools.lru_cache(maxsize=None)
def facts():
    """[the phrases the answer must contain], each recomputed from the records."""
    plan, result, _ = analysis()
    primary, heldout = "mean_last_50_updates", "heldout_error"
    out = []
    for hypothesis in ("H1", "H2", "H4"):
        for metric in (primary, heldout):
            c = _contrast(result, hypothesis, metric)
            out.append(f"{percent(c['mean_percent'])} {percent_interval(c['t_interval_percent'])}")
    h1, h1_held = _contrast(result, "H1", primary), _contrast(result, "H1", heldout)
    h2, h2_held = _contrast(result, "H2", primary), _contrast(result, "H2", heldout)
    h3, h3_held = _contrast(result, "H3", primary), _contrast(result, "H3", heldout)
    h4, h4_held = _contrast(result, "H4", primary), _contrast(result, "H4", heldout)
    assert {c["verdict"] for c in (h1, h1_held, h2, h2_held, h3, h3_held)} == {"no effect larger than 5%"}
    assert h4["verdict"] == h4_held["verdict"] == "effect"
    out.append(f"TOST Holm p {p_value(max(h1['tost_holm_p'], h1_held['tost_holm_p']))}")
    out.append(f"Holm p {p_value(h1['holm_p'])} and {p_value(h1_held['holm_p'])}")
    out.append(f"TOST Holm p {p_value(h2['tost_holm_p'])} and {p_value(h2_held['tost_holm_p'])}")
    out.append(f"Holm p {p_value(h2['holm_p'])} and {p_value(h2_held['holm_p'])}")
    # H3: the arms computed the same bits, so its 0% is no measurement of TF32.
    manifests = _manifests()
    seeds = sorted({int(key.split("/seed-")[1][:4]) for key in manifests})
    same = sum(manifests[f"jax-gpu-repeatable-tf32/seed-{s:04d}-r1"]["result"]["weights_checksum"]
               == manifests[f"jax-gpu-repeatable/seed-{s:04d}-r1"]["result"]["weights_checksum"] for s in seeds)
    assert same == h3["n"] and all(d == 0 for d in h3["log_ratios"] + h3_held["log_ratios"])
    out.append(f"identical weights in {same} of {len(seeds)} seeds")
    out.append(f"{percent(h3['mean_percent'])} {percent_interval(h3['t_interval_percent'])}")
    # H4.
    out.append(f"more than 5% higher in {h4['beyond_margin']['above']} of {h4['n']} seeds")
    out.append(f"Holm p {p_value(max(h4['holm_p'], h4_held['holm_p']))}")
    # The one-ulp floor and the noise rule.
    ulp, ulp_held = _floor(result, "one-ulp", primary), _floor(result, "one-ulp", heldout)
    out.append(f"by {percent(100 * math.expm1(ulp['median_abs']))} (median")
    out.append(f"over seeds; {percent(100 * math.expm1(ulp_held['median_abs']))} held out")
    out.append(f"moves {ulp['beyond_margin']['above'] + ulp['beyond_margin']['below']} of the {ulp['n']} seeds")
    moved = [c["beyond_margin"]["above"] + c["beyond_margin"]["below"] for c in (h1, h2)]
    out.append(f"the device moves {moved[0]} (JAX) and {moved[1]}")
    outcomes = {}
    for name, c in (("JAX", h1), ("JAX held", h1_held), ("PyTorch", h2), ("PyTorch held", h2_held)):
        noise = _one_ulp(c)
        outcomes[name] = noise["outcome"]
        out.append(f"{name.split()[0]} {multiple(noise)}")
    assert outcomes == {"PyTorch": "no larger than the one-ulp noise", "JAX held": "no larger than the one-ulp noise",
                        "JAX": "not separable from the one-ulp noise with these seeds",
                        "PyTorch held": "not separable from the one-ulp noise with these seeds"}
    out.append(f"upper end below {plan.noise_multiple:g}")
    out.append(f"with {h1['n']} seeds either way")
    # The study itself.
    out.append(f"{len(seeds)} fresh seeds ({seeds[0]}-{seeds[-1]}), {len(manifests)} runs")
    # The retraction study's code-path effect, for comparison (JAX on the GPU, 30 seeds).
    retraction = _per_seed(_load("retraction", "mean_last_50_updates"))
    cpu, gpu = retraction["gpu-jax-cpu-path"], retraction["gpu-jax-gpu-path"]
    mean = float(np.mean([math.log(cpu[s] / gpu[s]) for s in gpu]))
    out.append(f"there {100 * math.expm1(mean):.2g}% with JAX on the GPU")
    return out + _exploratory_facts() + _pair_facts(plan)


def _pair_facts(plan):
    """The secondary measures (the pairs of runs the GPU machine computed), as the report summarises them."""
    measures = {c["name"]: c for c in read_pair_measures([STUDY], plan)["contrasts"]}
    h1, h2 = measures["H1"], measures["H2"]
    first = {name: measures[name]["first_differing_update"]["median"] for name in ("H1", "H2", "one-ulp")}
    last = {name: measures[name]["weights"]["last"]["normalised_l2"]["median"] for name in ("H1", "H2", "H4", "one-ulp")}
    disagree = {name: measures[name]["prediction_disagreement"]["median"] for name in ("H1", "H2", "H4", "one-ulp")}
    return [f"{h1['n']} seeds for JAX's arms, {h2['n']} for PyTorch's",
            f"update {first['H1']:g} with JAX and {first['H2']:g} with PyTorch",
            f"the one-ulp runs' at {first['one-ulp']:g}, and in {measures['one-ulp']['first_differing_update']['never']} "
            f"of {measures['one-ulp']['n']} seeds never",
            f"{number(last['H1'], 3)} (JAX) and {number(last['H2'], 3)} (PyTorch) at the last snapshot against "
            f"{number(last['one-ulp'], 3)} for the",
            f"differ by {number(disagree['H1'], 3)} and {number(disagree['H2'], 3)} of the predictions' RMS against "
            f"{number(disagree['one-ulp'], 3)}",
            f"weights {number(last['H4'], 3)}, predictions {number(disagree['H4'], 3)}"]


def _exploratory_facts():
    """The exploratory contrasts (exploratory-plan.toml, read after the confirmatory analysis)."""
    plan, result, _ = analysis("exploratory-plan.toml")
    names = [h.name for h in plan.hypotheses]
    out = [f"Holm over their own {len(names) * len(plan.metrics)}", f"rows {names[0]}-{names[-1]}"]
    verdicts = {}
    for name in names:
        both = [_contrast(result, name, metric) for metric in plan.metrics]
        out.append(f"{percent(both[0]['mean_percent'])} {percent_interval(both[0]['t_interval_percent'])}")
        out.append(f"{percent(both[1]['mean_percent'])} {percent_interval(both[1]['t_interval_percent'])}")
        verdicts[name] = {c["verdict"] for c in both}
    assert all(verdicts[n] == {"no effect larger than 5%"} for n in ("E1", "E2", "E3", "E4", "E5", "E9"))
    assert all(verdicts[n] == {"effect"} for n in ("E6", "E7", "E8"))
    assert verdicts["E10"] == {"inconclusive"}
    e10 = [_contrast(result, "E10", metric)["seeds_needed"] for metric in plan.metrics]
    out.append(f"TOST would need {e10[0]} seeds ({e10[1]} held out)")
    larger = {"E2 paper": _one_ulp(_contrast(result, "E2", plan.metrics[0])),
              "E4 paper": _one_ulp(_contrast(result, "E4", plan.metrics[0])),
              "E4 held": _one_ulp(_contrast(result, "E4", plan.metrics[1]))}
    assert {n["outcome"] for n in larger.values()} == {"larger than the one-ulp noise"}
    out.append(f"G {multiple(larger['E2 paper'])} for E2")
    out.append(f"{multiple(larger['E4 paper'])} and {multiple(larger['E4 held'])} for E4")
    return out


TEXTS = {
    "README.md": lambda: _section((ROOT / "README.md").read_text(), "### The answer: the device within one library",
                                  "### At the paper's full size"),
}


@pytest.mark.parametrize("study, plan_file, folder", [("device", "confirmatory-plan.toml", "confirmatory"),
                                                      ("device", "exploratory-plan.toml", "exploratory"),
                                                      ("device-full", "confirmatory-plan.toml", "confirmatory")])
def test_the_committed_report_is_the_plans_analysis_of_the_committed_runs(study, plan_file, folder):
    _, result, runs = analysis(plan_file, STUDY.parent / study)
    committed = json.loads((STUDY.parent / study / folder / "confirmatory.json").read_text())
    assert runs["used"] == committed["runs"]["used"] and not runs["left_out"]
    for mine, theirs in zip(result["contrasts"], committed["contrasts"], strict=True):
        for key in ("hypothesis", "metric", "n", "mean", "holm_p", "tost_holm_p", "verdict"):
            assert mine[key] == pytest.approx(theirs[key], rel=1e-12) if isinstance(mine[key], float) \
                else mine[key] == theirs[key]


def assert_says_the_records(name, text, phrases, setup):
    """`text` holds every recomputed phrase, and no number beyond them and the set-up's."""
    missing = [phrase for phrase in phrases if phrase not in text]
    assert not missing, f"{name} does not say what the records give: {missing}"
    rest = text
    for phrase in sorted(phrases + setup, key=len, reverse=True):
        rest = rest.replace(phrase, " ")
    assert not NUMBER.findall(rest), f"numbers in {name}'s answer that no record gives: {NUMBER.findall(rest)}"


@pytest.mark.parametrize("name", list(TEXTS))
def test_every_number_of_the_device_answer_is_recomputed_from_the_records(name):
    assert_says_the_records(name, TEXTS[name](), facts(), SETUP)


def table_rows():
    """The device README's answer table, one row per hypothesis, from the recomputed analysis."""
    _, result, _ = analysis()
    rows = []
    for hypothesis in ("H1", "H2", "H3", "H4"):
        contrasts = [_contrast(result, hypothesis, metric) for metric in ("mean_last_50_updates", "heldout_error")]
        cells = [f"{percent(c['mean_percent'])} {percent_interval(c['t_interval_percent'])}: {c['verdict']}"
                 for c in contrasts]
        for c in contrasts:
            noise = [n for n in c.get("noise", []) if n["floor"] == "one-ulp"]
            cells.append(f"{multiple(noise[0])}: {noise[0]['outcome']}" if noise else "not in the rule")
        rows.append(f"| {hypothesis} | " + " | ".join(cells) + " |")
    return rows


def test_the_device_studys_readme_table_is_the_analysis():
    text = (STUDY / "README.md").read_text()
    table = text[text.index("| | paper's metric |"):text.index("\n\n", text.index("| | paper's metric |"))]
    assert table.splitlines()[2:] == table_rows()
