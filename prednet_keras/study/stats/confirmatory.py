"""A pre-registered confirmatory analysis: hypotheses fixed in a plan, per-seed values in, verdicts out.

What docs/study/device/preregistration.md fixes ("Hypotheses", "Metrics", "The smallest effect of
interest", "Tests and the decision rule", "The noise floor and 'no larger than noise'"), for any plan
written the same way (`plan_from_dict`: the hypotheses are the plan's, so an amendment that changes a
reference arm changes the plan file, not this code):

- per hypothesis (an arm against its reference) and metric, on the seeds complete in both: the per-seed
  log-ratio d_s = ln(arm_s / reference_s); its mean with a t interval and a bootstrap percentile interval
  (also as percentages, exp(.) - 1); the paired t-test of mean d = 0 (Wilcoxon's signed-rank test beside
  it, as a check); TOST of |mean d| < margin (margin = ln(1 + smallest effect)); the seeds beyond
  +/- margin each way;
- Holm over the family's difference p-values and, separately, over its TOST p-values;
- the verdict from the two adjusted p-values, in the plan's words;
- for the hypotheses the noise rule names: the typical per-seed multiple of the noise floor,
  G = exp(median_s(ln|d_s| - ln|u_s|)) with u_s the floor's log-ratio on the same seed, its bootstrap
  interval and the rule's outcome; every other floor described beside it.

Pure: values in, a JSON-ready dict out (no files); the same input gives the same dict, and so the
same bytes once written. Numbers that can be infinite (a multiple of a floor that did not move) are
written as the strings "inf" / "-inf"; what cannot be computed is None.
"""

import dataclasses
import math
import re

import numpy as np

from prednet_keras.study.stats.power import seeds_needed_equivalence
from prednet_keras.study.stats import holm, paired_test, safe_ratio, tost_paired

__all__ = [
    "FORMAT",
    "ConfirmatoryPlan",
    "Floor",
    "Hypothesis",
    "PlanError",
    "analyse",
    "arm_key",
    "median_log_ratio",
    "noise_multiple",
    "plan_from_dict",
    "verdict",
]

FORMAT = "prednet-study-confirmatory"
INTERVAL = 0.95
# A run key's tail: the first, second, ... run of a seed, or its one-ulp run (spec.PlannedRun.name).
_RUN_TAIL = re.compile(r"^(r[1-9][0-9]*|ulp)$")


class PlanError(ValueError):
    """A plan that does not say what the analysis needs, or values that do not fit it."""


def arm_key(arm):
    """The key of an arm's runs: "configuration/r1" for a bare configuration name (its first run of each
    seed, the one every contrast uses), "configuration/r2" or "configuration/ulp" as given."""
    arm = str(arm)
    configuration, slash, tail = arm.rpartition("/")
    if not slash:
        return f"{arm}/r1"
    if not configuration or not _RUN_TAIL.match(tail):
        raise PlanError(f"arm {arm!r}: name a configuration, or configuration/rN or configuration/ulp.")
    return arm


# ------------------------------------------------------------------------------------------- the plan


@dataclasses.dataclass(frozen=True)
class Hypothesis:
    """One confirmatory contrast per metric: `arm` against `reference`.

    Attributes:
        name: how the report names it ("H1").
        arm, reference: arm keys (`arm_key`).
        expectation: what was expected in advance, in words.
        note: anything the report must say beside it (e.g. whose noise floor it borrows).
        not_testable: None, or why the hypothesis cannot be tested as planned (e.g. its reference failed
            its determinism check). Its contrasts are still computed and kept in the Holm family as
            planned (the other hypotheses face the planned correction, never a laxer one), but their
            verdict is "not testable as planned: <why>" and the computed one is kept as exploratory.
    """

    name: str
    arm: str
    reference: str
    expectation: str
    note: str = ""
    not_testable: str | None = None


@dataclasses.dataclass(frozen=True)
class Floor:
    """A noise floor: the per-seed log-ratio of two runs that differ only by noise (one ulp of one
    starting weight, or a nondeterministic repeat)."""

    name: str
    arm: str
    reference: str
    note: str = ""


@dataclasses.dataclass(frozen=True)
class ConfirmatoryPlan:
    """What a pre-registration fixes for the analysis.

    Attributes:
        hypotheses: the Hypotheses, tested together (one Holm family with the metrics).
        metrics: the primary metric first, then the co-primary ones.
        smallest_effect: the smallest relative effect of interest (0.05: 5%); margin = ln(1 + it).
        alpha: the family-wise level.
        power: the power the seeds-needed estimate of an inconclusive contrast aims for.
        bootstrap_resamples, bootstrap_seed: every bootstrap interval resamples seeds this often, from
            a fresh numpy.random.default_rng(bootstrap_seed) (each interval reproducible on its own).
        floors: the noise floors described beside the contrasts.
        noise_floor: the floor the noise rule uses (a Floor's name), or None for no rule.
        noise_multiple: the rule's multiple ("no larger than the noise": G's upper bound below it).
        noise_hypotheses: the hypotheses the rule applies to.
        deviations: the deviations from the plan the report must list, in words.
        title: the report's title.
        require_provenance: refuse runs that do not record the code they ran (a git commit, no uncommitted
            change in the package) and the checksum of their starting point, instead of analysing them.
        code_checksums: ((package_sha256, commit), ...): code known by its checksum alone. A run whose record
            names no clean commit but whose package_sha256 is listed ran that commit's package (anyone can
            check: code_provenance.package_sha256 of the commit's prednet_keras folder); each entry is a
            deviation the plan's `deviations` must explain.
    """

    hypotheses: tuple
    metrics: tuple
    smallest_effect: float
    alpha: float
    power: float = 0.8
    bootstrap_resamples: int = 10_000
    bootstrap_seed: int = 0
    floors: tuple = ()
    noise_floor: str | None = None
    noise_multiple: float = 3.0
    noise_hypotheses: tuple = ()
    deviations: tuple = ()
    title: str = "Confirmatory analysis"
    require_provenance: bool = False
    code_checksums: tuple = ()

    @property
    def margin(self):
        """The equivalence margin on the log-ratio scale: ln(1 + smallest_effect)."""
        return math.log1p(self.smallest_effect)

    @property
    def family_size(self):
        return len(self.hypotheses) * len(self.metrics)

    def to_dict(self):
        """The plan as JSON reads it back (lists, not tuples), with its margin."""
        out = {key: list(value) if isinstance(value, tuple) else value
               for key, value in dataclasses.asdict(self).items()}
        out["margin"] = self.margin
        # Only where a plan has them: the records of plans without them stay as they were written.
        if self.code_checksums:
            out["code_checksums"] = dict(self.code_checksums)
        else:
            del out["code_checksums"]
        return out


_PLAN_KEYS = {"title", "smallest_effect", "alpha", "power", "bootstrap_resamples", "bootstrap_seed", "metrics",
              "hypotheses", "floors", "noise_rule", "deviations", "require_provenance",
              "code_checksums"}
_HYPOTHESIS_KEYS = ("name", "arm", "reference", "expectation")
_FLOOR_KEYS = ("name", "arm", "reference")
_NOISE_RULE_KEYS = ("floor", "multiple", "hypotheses")


def _table(data, where, required, optional=()):
    if not isinstance(data, dict):
        raise PlanError(f"{where}: a table is expected, not {type(data).__name__}.")
    missing = [key for key in required if key not in data]
    if missing:
        raise PlanError(f"{where}: missing key(s) {', '.join(missing)}.")
    unknown = sorted(set(data) - set(required) - set(optional))
    if unknown:
        raise PlanError(f"{where}: unknown key(s) {', '.join(unknown)} (known: "
                        f"{', '.join(sorted(set(required) | set(optional)))}).")
    return data


def _text(value, where):
    if not isinstance(value, str) or not value.strip():
        raise PlanError(f"{where}: a non-empty string is expected, not {value!r}.")
    return value


def _number(value, where, low, high, integer=False):
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not (low < value < high):
        raise PlanError(f"{where}: {'an integer' if integer else 'a number'} in ({low:g}, {high:g}) is expected, "
                        f"not {value!r}.")
    return value


def _names(items, where):
    names = [item.name for item in items]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise PlanError(f"{where}: the name(s) {', '.join(repeated)} appear more than once.")
    return names


def _pair(item, where):
    arm = arm_key(_text(item["arm"], f"{where}.arm"))
    reference = arm_key(_text(item["reference"], f"{where}.reference"))
    if arm == reference:
        raise PlanError(f"{where}: the arm and its reference are the same runs ({arm}).")
    return arm, reference


def plan_from_dict(data):
    """A ConfirmatoryPlan from a plan file's table (TOML parsed; the format is in
    docs/study/device/confirmatory-plan.toml).

    Raises:
        PlanError: a missing or unknown key, or a value out of range, named.
    """
    data = _table(data, "plan", ("hypotheses", "metrics", "smallest_effect", "alpha"),
                  sorted(_PLAN_KEYS - {"hypotheses", "metrics", "smallest_effect", "alpha"}))
    metrics = _table(data["metrics"], "metrics", ("primary",), ("co_primary",))
    co_primary = metrics.get("co_primary", [])
    if not isinstance(co_primary, list):
        raise PlanError(f"metrics.co_primary: a list of metric names is expected, not {co_primary!r}.")
    names = [_text(metrics["primary"], "metrics.primary")] + [_text(m, "metrics.co_primary") for m in co_primary]
    if len(set(names)) != len(names):
        raise PlanError(f"metrics: a metric is named twice ({', '.join(names)}).")
    if not isinstance(data["hypotheses"], list) or not data["hypotheses"]:
        raise PlanError("hypotheses: a non-empty list of [[hypotheses]] tables is expected.")
    hypotheses = []
    for number, item in enumerate(data["hypotheses"], 1):
        where = f"hypotheses[{number}]"
        item = _table(item, where, _HYPOTHESIS_KEYS, ("note", "not_testable"))
        arm, reference = _pair(item, where)
        not_testable = item.get("not_testable")
        hypotheses.append(Hypothesis(_text(item["name"], f"{where}.name"), arm, reference,
                                     _text(item["expectation"], f"{where}.expectation"), str(item.get("note", "")),
                                     None if not_testable is None else _text(not_testable, f"{where}.not_testable")))
    hypothesis_names = _names(hypotheses, "hypotheses")
    floors = []
    for number, item in enumerate(data.get("floors", []), 1):
        where = f"floors[{number}]"
        item = _table(item, where, _FLOOR_KEYS, ("note",))
        floors.append(Floor(_text(item["name"], f"{where}.name"), *_pair(item, where), str(item.get("note", ""))))
    floor_names = _names(floors, "floors")
    rule = {}
    if "noise_rule" in data:
        rule = _table(data["noise_rule"], "noise_rule", _NOISE_RULE_KEYS)
        if rule["floor"] not in floor_names:
            raise PlanError(f"noise_rule.floor: {rule['floor']!r} is not one of the [[floors]] "
                            f"({', '.join(floor_names) or 'none declared'}).")
        if not isinstance(rule["hypotheses"], list) or not set(rule["hypotheses"]) <= set(hypothesis_names):
            raise PlanError(f"noise_rule.hypotheses: a list of hypothesis names ({', '.join(hypothesis_names)}) is "
                            f"expected, not {rule['hypotheses']!r}.")
        _number(rule["multiple"], "noise_rule.multiple", 1, math.inf)
    deviations = data.get("deviations", [])
    if not isinstance(deviations, list):
        raise PlanError("deviations: a list of strings is expected.")
    require_provenance = data.get("require_provenance", False)
    if not isinstance(require_provenance, bool):
        raise PlanError(f"require_provenance: true or false is expected, not {require_provenance!r}.")
    code_checksums = _code_checksums(data.get("code_checksums", {}))
    return ConfirmatoryPlan(
        hypotheses=tuple(hypotheses), metrics=tuple(names),
        smallest_effect=float(_number(data["smallest_effect"], "smallest_effect", 0, math.inf)),
        alpha=float(_number(data["alpha"], "alpha", 0, 1)),
        power=float(_number(data.get("power", 0.8), "power", 0, 1)),
        bootstrap_resamples=_number(data.get("bootstrap_resamples", 10_000), "bootstrap_resamples", 0, 10**7, True),
        bootstrap_seed=_number(data.get("bootstrap_seed", 0), "bootstrap_seed", -1, 2**63, True),
        floors=tuple(floors), noise_floor=rule.get("floor"), noise_multiple=float(rule.get("multiple", 3.0)),
        noise_hypotheses=tuple(rule.get("hypotheses", ())),
        deviations=tuple(_text(d, "deviations") for d in deviations),
        title=_text(data.get("title", "Confirmatory analysis"), "title"),
        require_provenance=require_provenance, code_checksums=code_checksums,
    )


def _code_checksums(table):
    """The plan's [code_checksums] (package_sha256 = "commit"), as sorted pairs."""
    if not isinstance(table, dict):
        raise PlanError(f"code_checksums: a table of package_sha256 = \"commit\" is expected, not {table!r}.")
    for checksum, commit in table.items():
        if not re.fullmatch(r"[0-9a-f]{64}", checksum):
            raise PlanError(f"code_checksums: {checksum!r} is not a package_sha256 (64 lower-case hex digits).")
        if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{40}", commit):
            raise PlanError(f"code_checksums.{checksum[:12]}: {commit!r} is not a commit (40 lower-case hex digits).")
    return tuple(sorted(table.items()))


# ------------------------------------------------------------------------------------ the numbers


def _json_number(value):
    """A float for the JSON record: None when not computable, "inf" / "-inf" when infinite."""
    if value is None:
        return None
    value = float(value)
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _percent(log_ratio):
    """A log-ratio as a relative change in percent, 100 (exp(d) - 1)."""
    return None if log_ratio is None else 100.0 * math.expm1(log_ratio)


def _order_statistic_interval(samples, level=INTERVAL):
    """The bootstrap percentile interval without interpolation: the order statistics at or just outside
    the (1 - level) / 2 and (1 + level) / 2 quantiles (numpy's "lower" and "higher" methods).
    Interpolating between resamples would turn an infinite median (a floor that did not move) into NaN;
    with 10,000 resamples the interval is wider than the interpolated one by at most one resample's step."""
    ordered = np.sort(np.asarray(samples, dtype=float))
    last = ordered.size - 1
    return [float(ordered[math.floor((1 - level) / 2 * last)]), float(ordered[math.ceil((1 + level) / 2 * last)])]


def _resampled_seeds(n, plan):
    """Indices of the seeds in each bootstrap resample, from a fresh generator: every interval of the
    analysis is reproducible on its own, whatever else was computed before it."""
    return np.random.default_rng(plan.bootstrap_seed).integers(0, n, size=(plan.bootstrap_resamples, n))


def _log_ratios(values, metric, arm, reference):
    """(seeds complete in both arms, d_s = ln(arm_s / reference_s), the seeds only one arm has)."""
    by_arm = values[metric]
    arm_values, reference_values = by_arm[arm], by_arm[reference]
    seeds = sorted(set(arm_values) & set(reference_values))
    ratios = np.array([arm_values[s] / reference_values[s] for s in seeds], dtype=float)
    left_out = {"arm_only": sorted(set(arm_values) - set(seeds)),
                "reference_only": sorted(set(reference_values) - set(seeds))}
    return seeds, np.log(ratios), left_out


def _beyond(log_ratios, margin):
    return {"above": int(np.sum(log_ratios > margin)), "below": int(np.sum(log_ratios < -margin))}


def verdict(difference_significant, equivalence_significant, smallest_effect):
    """The plan's words for a contrast, from its Holm-adjusted difference and TOST tests."""
    percent = f"{100 * smallest_effect:g}%"
    if difference_significant and equivalence_significant:
        return f"an effect smaller than {percent}"
    if difference_significant:
        return "effect"
    if equivalence_significant:
        return f"no effect larger than {percent}"
    return "inconclusive"


def _contrast(plan, values, metric, hypothesis):
    """Every number of one hypothesis on one metric, before the adjustment across the family."""
    seeds, d, left_out = _log_ratios(values, metric, hypothesis.arm, hypothesis.reference)
    n = d.size
    zeros = np.zeros_like(d)
    # d against 0: stats' paired tests then see d itself, not ln(arm) - ln(reference) rounded anew.
    paired = paired_test(d, zeros, alpha=1 - INTERVAL)
    tost = tost_paired(d, zeros, plan.margin, alpha=plan.alpha)
    mean = paired["difference"] if n else None
    bootstrap = [None, None]
    if n >= 2:
        bootstrap = _order_statistic_interval(d[_resampled_seeds(n, plan)].mean(axis=1))
    t_interval = [_json_number(v) for v in paired["ci"]]
    # Every difference zero: no signed rank to test (SciPy's Wilcoxon is undefined there).
    wilcoxon = None if n < 2 or not np.any(d) else _json_number(paired["wilcoxon_p"])
    return {
        "hypothesis": hypothesis.name, "metric": metric, "arm": hypothesis.arm, "reference": hypothesis.reference,
        "n": int(n), "seeds": [int(s) for s in seeds], "log_ratios": [float(v) for v in d], "left_out": left_out,
        "mean": _json_number(mean), "sd": _json_number(paired["sd"]),
        "t_interval": t_interval, "bootstrap_interval": bootstrap,
        "mean_percent": _json_number(_percent(_json_number(mean))),
        "t_interval_percent": [_percent(v) for v in t_interval],
        "bootstrap_interval_percent": [_percent(v) for v in bootstrap],
        "direction": None if not n or mean == 0 else ("arm higher" if mean > 0 else "arm lower"),
        "t": _json_number(paired["t"]), "df": _json_number(paired["df"]), "p": _json_number(paired["p"]),
        "wilcoxon_p": wilcoxon,
        "tost_p": _json_number(tost["p"]), "tost_p_lower": _json_number(tost["p_lower"]),
        "tost_p_upper": _json_number(tost["p_upper"]),
        "beyond_margin": _beyond(d, plan.margin),
    }


# --------------------------------------------------------------------------------- the noise floors


def median_log_ratio(log_ratios):
    """The median of each row of per-seed log ratios ln|d_s| - ln|u_s| (a 1-D array is one row).

    The log ratios may be -inf (the arm equals its reference on that seed) or +inf (the floor did not
    move while the arm did); both sort where they belong. With an even count the median is the midpoint
    of the two middle values, and the midpoint of -inf and +inf, undefined as a sum, is taken as 0 (a
    ratio of 1): the midpoint of any symmetric compactification of the line (arctan, say), and what
    keeps a bootstrap resample from turning into NaN.
    """
    rows = np.sort(np.atleast_2d(np.asarray(log_ratios, dtype=float)), axis=1)
    count = rows.shape[1]
    if count % 2:
        middle = rows[:, count // 2]
    else:
        low, high = rows[:, count // 2 - 1], rows[:, count // 2]
        with np.errstate(invalid="ignore"):
            middle = np.where(np.isneginf(low) & np.isposinf(high), 0.0, (low + high) / 2)
    return middle if np.ndim(log_ratios) > 1 else float(middle[0])


def _seed_log_ratios(d, u):
    """ln|d_s| - ln|u_s| per seed. A seed whose arm equals its reference (d_s = 0) is the smallest ratio,
    -inf, whatever its floor did (the preregistration: it "counts as the smallest ratio"), a floor that
    moved neither included. A seed whose floor did not move (u_s = 0) while the arm did is +inf: the arm
    moved infinitely more than the noise on that seed, and it sorts as the largest ratio."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.log(np.abs(d)) - np.log(np.abs(u))
    return np.where(d == 0, -np.inf, ratios)


def _exp(log_value):
    """exp of a log-ratio that may be infinite or beyond a float's range (|d| and |u| span 1e-308 to 1e308)."""
    with np.errstate(over="ignore"):
        return float(np.exp(log_value))


def noise_multiple(d, u, plan, rule=None):
    """How much larger than a noise floor the per-seed differences are, on the same seeds.

    Args:
        d: the contrast's per-seed log-ratios.
        u: the floor's per-seed log-ratios, aligned by seed.
        plan: the ConfirmatoryPlan (bootstrap resamples and seed, the rule's multiple).
        rule: None (the numbers describe), or the floor's name as the rule's outcome names it ("one-ulp").

    Returns:
        dict: n, multiple (G = exp(median_s(ln|d_s| - ln|u_s|))), interval (bootstrap percentile, the seeds
        resampled jointly), rms_ratio (RMS(d) / RMS(u), a description), and with `rule` the outcomes that
        hold (an upper bound below the plan's multiple: no larger than the noise; a lower bound above 1:
        larger than the noise; both may hold) and the outcome in words.
    """
    d, u = np.asarray(d, dtype=float), np.asarray(u, dtype=float)
    n = d.size
    out = {"n": int(n), "multiple": None, "interval": [None, None], "rms_ratio": None}
    bounds = (math.nan, math.nan)
    if n:
        log_ratios = _seed_log_ratios(d, u)
        bounds = [_exp(v) for v in _order_statistic_interval(median_log_ratio(log_ratios[_resampled_seeds(n, plan)]))]
        out["multiple"] = _json_number(_exp(median_log_ratio(log_ratios)))
        out["interval"] = [_json_number(v) for v in bounds]
        out["rms_ratio"] = _json_number(safe_ratio(math.sqrt(np.mean(d**2)), math.sqrt(np.mean(u**2))))
    if rule is not None:
        outcomes = []
        if bounds[1] < plan.noise_multiple:
            outcomes.append(f"no larger than the {rule} noise")
        if bounds[0] > 1:
            outcomes.append(f"larger than the {rule} noise")
        out["outcomes"] = outcomes
        out["outcome"] = "; ".join(outcomes) or f"not separable from the {rule} noise with these seeds"
    return out


def _floor_record(plan, values, metric, floor):
    seeds, u, left_out = _log_ratios(values, metric, floor.arm, floor.reference)
    return {"floor": floor.name, "metric": metric, "arm": floor.arm, "reference": floor.reference,
            "n": int(u.size), "seeds": [int(s) for s in seeds], "log_ratios": [float(v) for v in u],
            "left_out": left_out, "rms": _json_number(math.sqrt(np.mean(u**2))) if u.size else None,
            "median_abs": _json_number(np.median(np.abs(u))) if u.size else None,
            "beyond_margin": _beyond(u, plan.margin)}


def _against_floors(plan, contrast, floors):
    """The contrast set against every floor of its metric, on the seeds both have."""
    out = []
    d_by_seed = dict(zip(contrast["seeds"], contrast["log_ratios"]))
    for floor in floors:
        u_by_seed = dict(zip(floor["seeds"], floor["log_ratios"]))
        seeds = sorted(set(d_by_seed) & set(u_by_seed))
        numbers = noise_multiple([d_by_seed[s] for s in seeds], [u_by_seed[s] for s in seeds], plan,
                                 rule=floor["floor"] if floor["floor"] == plan.noise_floor else None)
        out.append({"floor": floor["floor"], "rule": floor["floor"] == plan.noise_floor, "seeds": seeds, **numbers})
    return out


# ------------------------------------------------------------------------------------------ the whole


def _checked_values(plan, values):
    """values with canonical arm keys (`arm_key`), checked: every arm the plan uses has values for every
    metric, each finite and > 0 (a log-ratio needs both)."""
    arms = sorted({a for item in plan.hypotheses + plan.floors for a in (item.arm, item.reference)})
    checked = {}
    for metric in plan.metrics:
        if metric not in values:
            raise PlanError(f"no values of metric {metric!r} (the values hold "
                            f"{', '.join(map(repr, values)) or 'none'}).")
        by_arm = {}
        for key, by_seed in values[metric].items():
            canonical = arm_key(key)
            if canonical in by_arm:
                raise PlanError(f"metric {metric!r}: arm {canonical} is given twice ({key!r} and another name).")
            by_arm[canonical] = by_seed
        for arm in arms:
            if arm not in by_arm:
                raise PlanError(f"metric {metric!r}: no values of arm {arm} (the values hold "
                                f"{', '.join(sorted(by_arm)) or 'no arm'}).")
            for seed, value in by_arm[arm].items():
                if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) \
                        or not math.isfinite(value) or value <= 0:
                    raise PlanError(f"arm {arm}, seed {seed}, metric {metric!r}: the value {value!r} is not a finite "
                                    "number > 0, which a log-ratio needs.")
        checked[metric] = by_arm
    return checked


def analyse(plan, values):
    """The confirmatory analysis of `values` as `plan` fixes it.

    Args:
        plan: a ConfirmatoryPlan.
        values: {metric: {arm key: {seed: value}}}, one value per run; arm keys as `arm_key` reads them
            ("jax-gpu" or "jax-gpu/r1": a seed's first run; "jax-gpu/ulp", "jax-gpu-nondeterministic/r2").

    Returns:
        a JSON-ready dict: format, plan, family (size, alpha, the strictest Holm level), contrasts (one per
        metric x hypothesis, the metrics in the plan's order: every number of `_contrast`, the Holm-adjusted
        p-values, the verdict, seeds_needed for an inconclusive one and the floors it is set against),
        floors (one per metric x floor) and deviations.

        seeds_needed is the seeds TOST would need at the plan's power, at a true difference of 0, given the
        observed SD of d, at level alpha / family size: the strictest step of Holm's procedure, where the
        preregistration computed its seed count (alpha / 8 for 4 hypotheses x 2 metrics).

    Raises:
        PlanError: values missing for an arm or metric the plan uses, or not finite and > 0.
    """
    values = _checked_values(plan, values)
    contrasts = [_contrast(plan, values, metric, h) for metric in plan.metrics for h in plan.hypotheses]
    # A contrast without a p-value (fewer than 2 seeds) stays in the family as p = 1: the family is the
    # planned one, whatever the records hold.
    holm_p = holm([1.0 if c["p"] is None else c["p"] for c in contrasts])
    tost_holm_p = holm([1.0 if c["tost_p"] is None else c["tost_p"] for c in contrasts])
    strictest = plan.alpha / plan.family_size
    floors = [_floor_record(plan, values, metric, floor) for metric in plan.metrics for floor in plan.floors]
    by_name = {h.name: h for h in plan.hypotheses}
    for contrast, p_difference, p_equivalence in zip(contrasts, holm_p, tost_holm_p):
        hypothesis = by_name[contrast["hypothesis"]]
        words = verdict(p_difference < plan.alpha, p_equivalence < plan.alpha, plan.smallest_effect)
        contrast.update(holm_p=p_difference, tost_holm_p=p_equivalence, verdict=words, seeds_needed=None)
        if words == "inconclusive" and contrast["sd"] is not None:
            contrast["seeds_needed"] = seeds_needed_equivalence(contrast["sd"], plan.margin, alpha=strictest,
                                                                power=plan.power, paired=True)
        if hypothesis.not_testable:
            contrast.update(exploratory_verdict=words, verdict=f"not testable as planned: {hypothesis.not_testable}")
        if hypothesis.name in plan.noise_hypotheses:
            beside = [f for f in floors if f["metric"] == contrast["metric"]]
            contrast["noise"] = _against_floors(plan, contrast, beside)
    return {
        "format": FORMAT, "format_version": 1, "plan": plan.to_dict(),
        "family": {"contrasts": plan.family_size, "alpha": plan.alpha, "strictest_level": strictest},
        "contrasts": contrasts, "floors": floors, "deviations": list(plan.deviations),
    }
