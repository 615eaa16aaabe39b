"""The study's statistics on data with known answers, and against SciPy computed directly."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from prednet_keras.study import stats
from prednet_keras.study.stats import comparisons, curve_tests, determinism_audit, divergence, power


def _pair(seed, n_a, n_b, shift=0.0, sd_b=1.0):
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 1.0, n_a), rng.normal(shift, sd_b, n_b)


# ------------------------------------------------------------ against SciPy


def test_describe_matches_scipy_t_interval():
    x = np.random.default_rng(0).normal(3.0, 2.0, 12)
    d = stats.describe(x, alpha=0.05)
    low, high = sps.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
    assert d["n"] == 12
    assert d["mean"] == pytest.approx(x.mean())
    assert d["sd"] == pytest.approx(x.std(ddof=1))
    assert d["ci"] == pytest.approx([low, high])
    assert math.isnan(stats.describe([1.0])["sd"])


def test_welch_matches_scipy():
    a, b = _pair(1, 10, 14, shift=0.7, sd_b=2.0)
    ours = stats.welch_test(a, b)
    theirs = sps.ttest_ind(a, b, equal_var=False)
    ci = theirs.confidence_interval(0.95)
    assert ours["t"] == pytest.approx(theirs.statistic)
    assert ours["p"] == pytest.approx(theirs.pvalue)
    assert ours["df"] == pytest.approx(theirs.df)
    assert ours["ci"] == pytest.approx([ci.low, ci.high])


def test_paired_matches_scipy():
    a, b = _pair(2, 15, 15, shift=0.3)
    b = 0.8 * a + 0.2 * b
    ours = stats.paired_test(a, b)
    assert ours["t"] == pytest.approx(sps.ttest_rel(a, b).statistic)
    assert ours["p"] == pytest.approx(sps.ttest_rel(a, b).pvalue)
    assert ours["wilcoxon_p"] == pytest.approx(sps.wilcoxon(a - b).pvalue)


def test_mann_whitney_and_levene_match_scipy():
    a, b = _pair(3, 9, 11, shift=1.0, sd_b=3.0)
    mw = stats.mann_whitney(a, b)
    ref = sps.mannwhitneyu(a, b, alternative="two-sided")
    assert mw["u"] == pytest.approx(ref.statistic)
    assert mw["p"] == pytest.approx(ref.pvalue)
    assert mw["probability_of_superiority"] == pytest.approx(ref.statistic / (9 * 11))
    lev = stats.levene_test(a, b)
    ref = sps.levene(a, b, center="median")
    assert lev["w"] == pytest.approx(ref.statistic)
    assert lev["p"] == pytest.approx(ref.pvalue)


def test_tost_matches_two_one_sided_scipy_tests():
    a, b = _pair(4, 20, 25, shift=0.1)
    margin = 0.8
    ours = stats.tost_welch(a, b, margin)
    lower = sps.ttest_ind(a + margin, b, equal_var=False, alternative="greater").pvalue
    upper = sps.ttest_ind(a - margin, b, equal_var=False, alternative="less").pvalue
    assert ours["p_lower"] == pytest.approx(lower)
    assert ours["p_upper"] == pytest.approx(upper)
    assert ours["p"] == pytest.approx(max(lower, upper))
    # p < alpha exactly when the (1 - 2 alpha) CI lies inside +/- margin.
    inside = -margin < ours["ci"][0] and ours["ci"][1] < margin
    assert inside == (ours["p"] < 0.05)

    b2 = 0.9 * a + 0.1 * b[:20]
    paired = stats.tost_paired(a, b2, 0.1)
    d = a - b2
    lower = sps.ttest_1samp(d, -0.1, alternative="greater").pvalue
    upper = sps.ttest_1samp(d, 0.1, alternative="less").pvalue
    assert paired["p"] == pytest.approx(max(lower, upper))


def test_hedges_g_formula():
    a, b = _pair(5, 8, 10, shift=-1.0)
    sp = math.sqrt((7 * a.var(ddof=1) + 9 * b.var(ddof=1)) / 16)
    d = (a.mean() - b.mean()) / sp
    # The exact correction is within 1e-3 of the usual 1 - 3/(4 df - 1).
    assert stats.hedges_g(a, b) == pytest.approx(d * (1 - 3 / (4 * 16 - 1)), rel=1e-3)
    assert stats.hedges_g(a, b) == pytest.approx(d * math.gamma(8) / (math.sqrt(8) * math.gamma(7.5)))


def test_seed_differences_count_each_seed():
    a = np.array([0.10, 0.20, 0.30, 0.40, 0.50])
    b = np.array([0.10, 0.19, 0.33, 0.40, 0.45])
    out = stats.seed_differences(a, b, margin=0.02)
    assert (out["n"], out["a_higher"], out["b_higher"], out["equal"]) == (5, 2, 1, 2)
    assert out["largest"] == pytest.approx(0.05)
    assert out["beyond_margin"] == 2  # 0.03 and 0.05; 0.01 is inside
    assert stats.seed_differences(a, b)["beyond_margin"] is None


def test_holm_known_values():
    # Hand-computed: sorted 0.005, 0.01, 0.03, 0.04 x 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> monotone 0.06.
    adjusted = stats.holm([0.01, 0.04, 0.03, float("nan"), 0.005])
    assert adjusted[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(adjusted[3])
    assert adjusted[4] == pytest.approx(0.02)
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert stats.holm([]) == []


# ------------------------------------------------------------------- power


def test_seeds_needed_known_values():
    # Cohen's tables / G*Power: d = 0.5 needs 64 per group, d = 1 needs 17,
    # paired dz = 0.5 needs 34 (alpha 0.05 two-sided, power 0.8).
    assert power.seeds_needed_difference(1.0, 0.5) == 64
    assert power.seeds_needed_difference(1.0, 1.0) == 17
    assert power.seeds_needed_difference(1.0, 0.5, paired=True) == 34
    # study.md: 63-69 seeds per configuration for a 0.5 SD shift or equivalence.
    assert 64 <= power.seeds_needed_equivalence(1.0, 0.5) <= 72
    assert power.seeds_needed_equivalence(1.0, 0.5, true_difference=0.6) is None
    assert power.seeds_needed_difference(2.0, 1.0) == power.seeds_needed_difference(1.0, 0.5)


def test_power_formulas_match_simulation():
    rng = np.random.default_rng(0)
    n, sims, margin = 40, 4000, 0.6
    a = rng.standard_normal((sims, n))
    b = rng.standard_normal((sims, n))
    diff = a.mean(1) - b.mean(1)
    se = np.sqrt(a.var(1, ddof=1) / n + b.var(1, ddof=1) / n)
    df = 2 * n - 2
    critical = sps.t.ppf(0.95, df)
    equivalent = ((diff + margin) / se > critical) & ((diff - margin) / se < -critical)
    assert equivalent.mean() == pytest.approx(power.power_equivalence(n, 1.0, margin), abs=0.03)
    shifted = b + margin
    t = (a.mean(1) - shifted.mean(1)) / se
    detected = np.abs(t) > sps.t.ppf(0.975, df)
    assert detected.mean() == pytest.approx(power.power_difference(n, 1.0, margin), abs=0.03)


# --------------------------------------------------------------- verdicts


def test_identical_distributions_are_equivalent():
    rng = np.random.default_rng(10)
    groups = {"A": rng.normal(0, 1, 150), "B": rng.normal(0, 1, 150)}
    result = comparisons.compare_configurations(groups)
    (pair,) = result["pairs"]
    assert result["margin"] == pytest.approx(0.5 * stats.pooled_sd(groups.values()))
    assert pair["verdict_kind"] == "equivalent"
    assert pair["verdict"].startswith("equivalent within +/- ")
    assert pair["design"] == "independent"


def test_planted_shift_is_detected():
    rng = np.random.default_rng(11)
    groups = {"cpu": rng.normal(0, 1, 30), "gpu": rng.normal(1.5, 1, 30), "gpu2": rng.normal(1.5, 1, 30)}
    result = comparisons.compare_configurations(groups)
    by_pair = {(p["a"], p["b"]): p for p in result["pairs"]}
    assert by_pair["cpu", "gpu"]["verdict"] == "difference detected"
    assert by_pair["cpu", "gpu2"]["verdict"] == "difference detected"
    assert by_pair["cpu", "gpu"]["hedges_g"]["g"] < -1  # a planted shift of 1.5 SD
    assert by_pair["cpu", "gpu"]["seed_differences"] is None  # no seeds given: not paired
    assert by_pair["gpu", "gpu2"]["verdict_kind"] != "difference"
    # Holm over 3 pairs: the smallest p is multiplied by 3.
    ps = [p["primary"]["p"] for p in result["pairs"]]
    assert min(p["p_holm"]["primary"] for p in result["pairs"]) == pytest.approx(min(3 * min(ps), 1))


def test_too_few_seeds_is_inconclusive_with_seeds_needed():
    rng = np.random.default_rng(12)
    groups = {"A": rng.normal(0, 1, 4), "B": rng.normal(0.2, 1, 4)}
    (pair,) = comparisons.compare_configurations(groups)["pairs"]
    assert pair["verdict_kind"] == "inconclusive"
    needed = pair["power"]["seeds_needed"]
    # Margin = 0.5 pooled SD, so about 64-72 seeds per configuration.
    assert 60 <= needed <= 75
    assert pair["verdict"] == f"inconclusive: about {needed} seeds per configuration needed"
    one = comparisons.compare_configurations({"A": [1.0], "B": [2.0, 3.0]})["pairs"][0]
    assert one["verdict"] == "inconclusive: at least 2 seeds per configuration needed"


def test_fixed_margin_and_paired_design():
    rng = np.random.default_rng(13)
    seed_effect = rng.normal(0, 1, 20)
    a = seed_effect + rng.normal(0, 0.01, 20)
    b = seed_effect + rng.normal(0.005, 0.01, 20)
    seeds = list(range(20))
    result = comparisons.compare_configurations({"A": a, "B": b[::-1]}, seeds={"A": seeds, "B": seeds[::-1]}, margin=0.05)
    (pair,) = result["pairs"]
    assert result["margin_rule"] == "fixed"
    assert pair["design"] == "paired" and pair["shared_seeds"] == 20
    # Pairing removes the seed-to-seed spread: equivalence within 0.05 shows,
    # which the independent test (SD ~1) cannot.
    assert pair["verdict_kind"] == "equivalent"
    assert pair["tost_welch"]["p"] > 0.05
    assert pair["paired"]["difference"] == pytest.approx(np.mean(a - b))
    per_seed = pair["seed_differences"]
    assert per_seed["n"] == 20 and per_seed["a_higher"] + per_seed["b_higher"] + per_seed["equal"] == 20
    assert per_seed["largest"] == pytest.approx(np.max(np.abs(a - b)))
    assert per_seed["beyond_margin"] == int(np.sum(np.abs(a - b) > 0.05))


def test_bit_identical_arms_are_equivalent():
    x = np.random.default_rng(14).normal(0, 1, 6)
    seeds = list(range(6))
    (pair,) = comparisons.compare_configurations({"A": x, "B": x.copy()}, seeds={"A": seeds, "B": seeds})["pairs"]
    assert pair["verdict_kind"] == "identical"
    assert pair["verdict"] == "equivalent: identical results for each of the 6 seeds"
    assert pair["identical_seeds"] == {"shared": 6, "equal": 6}
    # The tests themselves agree: TOST passes on the paired differences.
    assert pair["p_holm"]["tost"] < 0.05


def test_identical_needs_every_seed_identical():
    x = np.random.default_rng(14).normal(0, 1, 6)
    y = x.copy()
    y[3] += 1e-9
    seeds = list(range(6))
    (pair,) = comparisons.compare_configurations({"A": x, "B": y}, seeds={"A": seeds, "B": seeds})["pairs"]
    assert pair["verdict_kind"] != "identical"
    assert pair["identical_seeds"] == {"shared": 6, "equal": 5}
    # Two seeds, unpaired-size, identical: still identical (no inference needed).
    (pair,) = comparisons.compare_configurations({"A": x[:2], "B": x[:2].copy()}, seeds={"A": [0, 1], "B": [0, 1]})["pairs"]
    assert pair["verdict_kind"] == "identical"


def test_spread_change_is_noted():
    rng = np.random.default_rng(15)
    groups = {"A": rng.normal(0, 1, 40), "B": rng.normal(0, 5, 40)}
    (pair,) = comparisons.compare_configurations(groups)["pairs"]
    assert any("spread differs" in note for note in pair["notes"])



def test_degenerate_spread_is_described_not_tested():
    # Issue 39: two nearly identical arms of two seeds gave "the spread differs (Levene Holm p = 1.92e-17,
    # SD ratio 1)". With two values per arm the deviations from the median are equal by construction: W
    # divides round-off by round-off. The report says what the data are instead of a p-value.
    a = np.array([0.012, 0.031])
    (pair,) = comparisons.compare_configurations({"A": a, "B": a + [1e-12, -1e-12]},
                                                 seeds={"A": [0, 1], "B": [0, 1]})["pairs"]
    assert math.isnan(pair["levene"]["p"]) and "equal distances from its median" in pair["levene"]["degenerate"]
    assert not any("spread differs" in note for note in pair["notes"])
    assert any(note.startswith("spread not tested: ") for note in pair["notes"])
    # Neither arm varies: nothing to tell apart, and said so.
    (pair,) = comparisons.compare_configurations({"A": [0.1] * 3, "B": [0.2] * 3})["pairs"]
    assert pair["levene"]["p"] == 1.0 and "neither arm has a spread" in pair["levene"]["degenerate"]
    # One seed: the verdict already says 2 are needed; no second sentence about the spread.
    (pair,) = comparisons.compare_configurations({"A": [0.1], "B": [0.2, 0.3]})["pairs"]
    assert "at least 2 seeds" in pair["verdict"] and not any("spread" in note for note in pair["notes"])
    # Real spread keeps the test.
    rng = np.random.default_rng(15)
    assert stats.levene_test(rng.normal(0, 1, 10), rng.normal(0, 2, 10))["degenerate"] is None


def test_shared_seeds_counts_the_seeds_both_arms_ran():
    # report.json once said shared_seeds 0 beside identical_seeds.shared 2: the first counted only the
    # seeds a paired test used. Now shared_seeds is the seeds both arms ran, paired_seeds those paired.
    (pair,) = comparisons.compare_configurations({"A": [0.1, 0.2], "B": [0.1, 0.25, 0.3]},
                                                 seeds={"A": [0, 1], "B": [0, 1, 2]})["pairs"]
    assert pair["design"] == "independent"
    assert (pair["shared_seeds"], pair["paired_seeds"], pair["identical_seeds"]["shared"]) == (2, 0, 2)


# ------------------------------------------------------------- determinism


def test_determinism_audit():
    same = [{"seed": s, "weights_checksum": f"w{s}", "curve_checksum": f"c{s}"} for s in (0, 0, 1, 1, 2)]
    audit = determinism_audit.determinism_audit(same, claims_determinism=True)
    assert audit["status"] == "deterministic"
    assert (audit["repeats"], audit["identical"], audit["share"]) == (2, 2, 1.0)

    broken = same + [{"seed": 2, "weights_checksum": "other", "curve_checksum": "c2"}]
    audit = determinism_audit.determinism_audit(broken, claims_determinism=True)
    assert audit["status"] == "defect"
    assert audit["share"] == pytest.approx(2 / 3)
    assert audit["differing_seeds"] == [2]
    assert determinism_audit.determinism_audit(broken, claims_determinism=False)["status"] == "not deterministic"

    alone = determinism_audit.determinism_audit([{"seed": 0, "weights_checksum": "w", "curve_checksum": "c"}], True)
    assert alone["status"] == "not audited"
    curve_only = [{"seed": 0, "weights_checksum": None, "curve_checksum": "c"}] * 2
    assert determinism_audit.determinism_audit(curve_only, True)["status"] == "deterministic"


def test_determinism_audit_measures_the_metric_difference_of_repeats():
    def run(seed, metric, checksum="w"):
        return {"seed": seed, "weights_checksum": f"{checksum}{seed}", "curve_checksum": f"c{seed}", "metric": metric}

    runs = [run(0, 0.5), run(0, 0.5 + 3e-6, "x"), run(0, 0.5 - 1e-6, "y"),  # against the first run, not each other
            run(1, 0.2), run(1, 0.2),
            run(2, 0.9)]  # no repeat
    audit = determinism_audit.determinism_audit(runs, claims_determinism=False)
    assert audit["status"] == "not deterministic" and (audit["identical"], audit["audited"]) == (1, 3)
    assert audit["max_metric_difference"] == pytest.approx(3e-6)
    assert audit["metric_repeats"] == 3
    # A repeat without a metric (None, absent or not finite) is left out of it, not the audit.
    runs += [run(2, None, "z"), {"seed": 1, "weights_checksum": "q", "curve_checksum": "c1"}, run(0, math.nan)]
    audit = determinism_audit.determinism_audit(runs, claims_determinism=False)
    assert audit["repeats"] == 6 and audit["metric_repeats"] == 3
    assert audit["max_metric_difference"] == pytest.approx(3e-6)
    # Identical repeats: 0; no repeats, or no metrics: None.
    assert determinism_audit.determinism_audit([run(0, 0.1), run(0, 0.1)], True)["max_metric_difference"] == 0.0
    alone = determinism_audit.determinism_audit([run(0, 0.1), run(1, 0.2)], True)
    assert (alone["max_metric_difference"], alone["metric_repeats"]) == (None, 0)
    unknown = determinism_audit.determinism_audit([run(0, None), run(0, 0.3)], True)
    assert (unknown["max_metric_difference"], unknown["metric_repeats"]) == (None, 0)


# ------------------------------------------------------------------ curves


def _brute_force_maxt(a, b):
    pooled = np.vstack([a, b])
    na = len(a)
    observed = np.abs(curve_tests._t_independent(a, b))
    import itertools

    maxima = []
    for chosen in itertools.combinations(range(len(pooled)), na):
        mask = np.zeros(len(pooled), bool)
        mask[list(chosen)] = True
        maxima.append(np.abs(curve_tests._t_independent(pooled[mask], pooled[~mask])).max())
    maxima = np.array(maxima)
    return np.array([(maxima >= o * (1 - 1e-12)).mean() for o in observed])


def test_curves_exact_maxt_matches_brute_force():
    rng = np.random.default_rng(20)
    a = rng.normal(0, 1, (5, 4))
    b = rng.normal(0, 1, (5, 4)) + np.array([0, 0, 1.5, 3.0])
    result = curve_tests.compare_curves(a, b, permutations=1000)
    assert result["exact"] and result["permutations"] == 252
    assert result["p_maxt"] == pytest.approx(_brute_force_maxt(a, b).tolist())
    welch = [sps.ttest_ind(a[:, k], b[:, k], equal_var=False).pvalue for k in range(4)]
    assert result["p"] == pytest.approx(welch)
    assert result["p_holm"] == pytest.approx(stats.holm(welch))


def test_curves_late_shift_detected_only_late():
    rng = np.random.default_rng(21)
    base = rng.normal(0, 1, (12, 1)) + np.linspace(1, 0, 8)
    a = base + rng.normal(0, 0.05, (12, 8))
    b = base + rng.normal(0, 0.05, (12, 8)) + np.r_[np.zeros(5), 0.3, 0.3, 0.3]
    for method in ("maxt", "holm"):
        paired = curve_tests.compare_curves(a, b, paired=True, checkpoints=range(10, 90, 10), method=method,
                                      rng=np.random.default_rng(0))
        assert paired["significant"] == [False] * 5 + [True] * 3
        assert paired["first_significant"] == 60
    # Without pairing the seed spread (SD 1) hides a 0.3 shift.
    independent = curve_tests.compare_curves(a, b, paired=False, rng=np.random.default_rng(0))
    assert not any(independent["significant"])


def test_curves_need_two_seeds():
    result = curve_tests.compare_curves(np.ones((1, 3)), np.ones((1, 3)))
    assert math.isnan(result["p_global"]) and result["significant"] == [False] * 3


def test_summarize_divergence():
    distances = np.array([[0.0, 0.0, 1.0, 2.0], [0.0, 0.5, 1.5, 3.0], [0.0, 0.0, 2.0, 4.0]])
    summary = divergence.summarize_divergence([0, 10, 20, 30], distances)
    assert summary["median"] == [0.0, 0.0, 1.5, 3.0]
    assert summary["first_separated"] == 20
    assert summary["final_median"] == 3.0
