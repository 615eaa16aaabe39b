"""The full-size secondary answer (docs/study/device-full/), as the README and the study's README state it,
recomputed from the committed runs and pairs: the plan's analysis run again, every number of the section
derived from its result or from the runs' manifests, and a number no record gives fails here."""

import functools
import math
from pathlib import Path

import pytest

from prednet_keras.study.report.confirmatory_report import read_pair_measures
from prednet_keras.study.report.wording import number, p_value

from .test_device_answer import _contrast, analysis, assert_says_the_records, percent, percent_interval
from .test_device_study import _manifests
from .test_published_answer import _section

ROOT = Path(__file__).resolve().parents[2]
FULL = ROOT / "docs" / "study" / "device-full"
# Numbers of the set-up, not results.
SETUP = ["120x160 frames", "channels 3,48,96,192", "205 updates", "10 bits of mantissa", "by 5%", "than 5%",
         "Amendment 1", "2026-12-06", "inconclusive, 0 seeds"]
PRIMARY, HELDOUT = "mean_last_50_updates", "heldout_error"


@functools.lru_cache(maxsize=None)
def manifests():
    return _manifests(FULL)


def _checksum(run):
    return manifests()[run]["result"]["weights_checksum"]


def _moved(contrast):
    return contrast["beyond_margin"]["above"] + contrast["beyond_margin"]["below"]


@functools.lru_cache(maxsize=None)
def facts():
    plan, result, _ = analysis("confirmatory-plan.toml", FULL)
    seeds = sorted({int(key.split("/seed-")[1][:4]) for key in manifests()})
    out = [f"{len(seeds)} fresh seeds ({seeds[0]}-{seeds[-1]}), {len(manifests())} runs"]
    # The floors: every per-seed ratio exactly 0, the re-runs and the one-ulp runs bit for bit where it shows.
    floors = result["floors"]
    assert floors and all(f["rms"] == 0.0 and f["n"] == len(seeds) for f in floors)
    rerun_same = sum(_checksum(f"jax-gpu/seed-{s:04d}-r1") == _checksum(f"jax-gpu/seed-{s:04d}-r2") for s in seeds)
    out.append(f"identical weights in {rerun_same} of {len(seeds)} seeds")
    measures = {m["name"]: m for m in read_pair_measures([FULL], plan)["contrasts"]}
    ulp = measures["one-ulp"]
    assert ulp["first_differing_update"]["never"] == ulp["weights"]["identical"] == ulp["n"]
    assert ulp["prediction_disagreement"]["max"] == 0.0
    out.append(f"sampled the same weights as their reference in {ulp['n']} of {len(seeds)} seeds")
    nudged_apart = sum(_checksum(f"jax-gpu-tf32/seed-{s:04d}-ulp") != _checksum(f"jax-gpu-tf32/seed-{s:04d}-r1")
                       for s in seeds)
    out.append(f"differ in {nudged_apart})")
    repeated = [s for s in seeds if f"jax-gpu-tf32/seed-{s:04d}-r2" in manifests()]
    assert all(_checksum(f"{arm}/seed-{s:04d}-r1") == _checksum(f"{arm}/seed-{s:04d}-r2")
               for arm in ("jax-gpu-tf32", "jax-gpu-tf32-cpu-path") for s in repeated)
    out.append(f"(seeds {repeated[0]} and {repeated[1]})")
    # H3-full.
    h3, h3_held = _contrast(result, "H3-full", PRIMARY), _contrast(result, "H3-full", HELDOUT)
    assert h3["verdict"] == h3_held["verdict"] == "inconclusive"
    tf32 = measures["H3-full"]
    out.append(f"first differ at update {tf32['first_differing_update']['median']:g} (median")
    out.append(f"end {number(tf32['weights']['last']['normalised_l2']['median'], 3)} apart")
    out.append(f"differ by {number(tf32['prediction_disagreement']['median'], 3)} of")
    out.append(f"{percent(h3['mean_percent'])} {percent_interval(h3['t_interval_percent'])} on the paper's metric")
    out.append(f"{percent(h3_held['mean_percent'])} {percent_interval(h3_held['t_interval_percent'])} held out")
    out.append(f"inconclusive at {h3['n']} seeds")
    out.append(f"TOST would need {h3['seeds_needed']} seeds ({h3_held['seeds_needed']} held out)")
    out.append(f"moves {_moved(h3)} of the {h3['n']} seeds by more than 5% ({_moved(h3_held)} held out)")
    for contrast in (h3, h3_held):
        (rule,) = [n for n in contrast["noise"] if n["rule"]]
        assert rule["multiple"] == "inf" and rule["outcome"] == "larger than the tf32-off-rerun noise"
    # H4-full.
    h4, h4_held = _contrast(result, "H4-full", PRIMARY), _contrast(result, "H4-full", HELDOUT)
    assert h4["verdict"] == h4_held["verdict"] == "effect"
    out.append(f"{percent(h4['mean_percent'])} {percent_interval(h4['t_interval_percent'])} higher")
    out.append(f"more than 5% higher in {h4['beyond_margin']['above']} of {h4['n']} seeds")
    out.append(f"{percent(h4_held['mean_percent'])} {percent_interval(h4_held['t_interval_percent'])} higher held")
    out.append(f"Holm p {p_value(max(h4['holm_p'], h4_held['holm_p']))}")
    path = measures["H4-full"]
    out.append(f"weights end {number(path['weights']['last']['normalised_l2']['median'], 3)} apart, the "
               f"predictions differ by {number(path['prediction_disagreement']['median'], 3)}")
    assert not math.isnan(h4["mean"])
    return out


TEXTS = {
    "README.md": lambda: _section((ROOT / "README.md").read_text(), "### At the paper's full size",
                                  "### Earlier answers"),
    "docs/study/device-full/README.md": lambda: _section((FULL / "README.md").read_text(), "## The answer",
                                                         "\n## "),
}


@pytest.mark.parametrize("name", list(TEXTS))
def test_every_number_of_the_full_size_answer_is_recomputed_from_the_records(name):
    assert_says_the_records(name, TEXTS[name](), facts(), SETUP)
