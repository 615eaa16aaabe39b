"""`prednet-study confirm`: a study's runs and a plan file -> the pre-registered confirmatory analysis.

    write_confirmatory(["docs/study/device"], "docs/study/device/confirmatory-plan.toml", "confirmatory/")

Reads the plan (TOML, `load_plan`; the format is docs/study/device/confirmatory-plan.toml), the per-run
metric values of the arms it names from run folders or a packed study's archive (`read_values`: each
run's `Run.metric`, its arm `configuration/rN` or `configuration/ulp`), runs confirmatory.analyse on them
and writes OUT/confirmatory.json (every number), OUT/confirmatory.md (the tables) and
OUT/confirmatory.png (the per-seed log-ratios the tests use).

Where a source is a study folder with a pairs/ folder (`prednet-study pairs`, report.seed_pairs), the
pre-registration's secondary measures of each contrast and floor are reported beside, not tested
(`read_pair_measures`, stats.pair_measures): held-out prediction disagreement, weight distance over
training (OUT/confirmatory-weights.png) and the first update whose loss differs; confirmatory.json holds
them under "pair_measures" (null without pairs, and confirmatory.md says so in one line).

A run that did not complete is left out and listed (a seed without its run in an arm leaves the contrasts
of that arm); an arm the plan names and the records lack, a run without a finite value of a planned metric
(NaN or inf: a failed run, never a value) or two runs of one arm and seed are refused; with the plan's
`require_provenance`, so is a run that does not record a clean code commit and its starting point's checksum.
The code commits the used runs ran are counted in the output.
"""

import contextlib
import tomllib
from pathlib import Path

from prednet_keras.files.diskwrite import atomic_write, atomic_write_json
from prednet_keras.files.small_text import SmallTextError, read_small_text
from prednet_keras.study import archive
from prednet_keras.study.stats.confirmatory import PlanError, analyse, plan_from_dict
from prednet_keras.study.stats.pair_measures import summarise_pairs
from prednet_keras.study.report import code_used, output_folder, seed_pairs
from prednet_keras.study.report.wording import interval, number, p_value
from prednet_keras.study.report.run_records import find_run_folders, load_run

__all__ = ["CONFIRMATORY_JSON", "CONFIRMATORY_MD", "CONFIRMATORY_PNG", "CONFIRMATORY_WEIGHTS_PNG", "load_plan",
           "pair_measures_lines", "read_pair_measures", "read_values", "render_markdown", "summary_lines",
           "write_confirmatory"]

CONFIRMATORY_JSON = "confirmatory.json"
CONFIRMATORY_MD = "confirmatory.md"
CONFIRMATORY_PNG = "confirmatory.png"
CONFIRMATORY_WEIGHTS_PNG = "confirmatory-weights.png"


# A plan is a few KB of TOML, like a spec.
MAX_PLAN_BYTES = 1 << 20


def load_plan(path):
    """The ConfirmatoryPlan of a plan file (TOML).

    Raises:
        PlanError: the file is not a small UTF-8 TOML file or does not say what the analysis needs; the message
            names the file.
    """
    try:
        data = tomllib.loads(read_small_text(path, "plan", MAX_PLAN_BYTES))
        return plan_from_dict(data)
    except SmallTextError as error:
        raise PlanError(str(error)) from None
    except tomllib.TOMLDecodeError as error:
        raise PlanError(f"{path}: not a TOML file ({error}).") from None
    except PlanError as error:
        raise PlanError(f"{path}: {error}") from None


def _run_folders(source, stack):
    """[(run folder, how the record names it)] of a folder of runs, a packed study's folder (its runs.tar.xz
    when no run folder is unpacked there) or an archive, opened on `stack`."""
    source = Path(source)
    if source.is_dir():
        found = find_run_folders(source)
        if found or not (source / archive.ARCHIVE).is_file():
            return [(path, str(path)) for path in found]
        source = source / archive.ARCHIVE
    if not archive.is_archive(source):
        raise ValueError(f"{source}: neither a folder of runs nor a tar archive of them (.tar, .tar.gz, .tar.xz).")
    root = stack.enter_context(archive.opened(source))
    return [(path, f"{source}:{path.relative_to(root).as_posix()}") for path in find_run_folders(root)]


def _arm_of(run):
    """The arm key of a study's run (spec.PlannedRun's naming), or None for a run of no study."""
    if not run.name_hint:
        return None
    return f"{run.name_hint}/ulp" if run.perturbation == "ulp" else f"{run.name_hint}/r{run.replicate or 1}"


def read_values(sources, plan):
    """The plan's metrics, per arm and seed, from the runs under `sources`.

    Args:
        sources: folders of runs, packed study folders or archives.
        plan: the ConfirmatoryPlan (its arms and metrics are read; other runs are only counted).

    Returns:
        (values {metric: {arm key: {seed: value}}}, runs {"found", "used", "left_out": [{path, reason}], "code":
        the code the used runs ran, as report.code_used counts it}).

    Raises:
        ValueError: no runs at all, an arm the plan names without runs, a run of a planned arm without a
            finite value of a planned metric, two runs of one arm and seed.
    """
    wanted = {a for item in plan.hypotheses + plan.floors for a in (item.arm, item.reference)}
    values = {metric: {arm: {} for arm in sorted(wanted)} for metric in plan.metrics}
    where_of, arms_found, left_out, found, used = {}, set(), [], 0, []
    with contextlib.ExitStack() as stack:
        for source in sources:
            for path, where in _run_folders(source, stack):
                found += 1
                run = load_run(path, source, where)
                arm = _arm_of(run)
                if run.status != "complete" or arm is None or run.seed is None:
                    reason = (f"status {run.status!r}" if run.status != "complete" else
                              "no study configuration in its manifest" if arm is None else "no seed in its manifest")
                    left_out.append({"path": where, "reason": reason})
                    continue
                arms_found.add(arm)
                if arm not in wanted:
                    continue
                if (arm, run.seed) in where_of:
                    raise ValueError(f"two runs of arm {arm}, seed {run.seed}: {where_of[arm, run.seed]} and {where}.")
                where_of[arm, run.seed] = where
                if plan.require_provenance:
                    _check_provenance(run, where, dict(plan.code_checksums))
                used.append(run)
                for metric in plan.metrics:
                    value = run.metric(metric)
                    if value is None:
                        raise ValueError(f"{where}: no finite value of metric {metric!r} (missing, NaN or inf; a "
                                         "failed run is never a value).")
                    values[metric][arm][run.seed] = value
    if not found:
        raise ValueError(f"no run folders in {', '.join(map(str, sources))}.")
    missing = sorted(wanted - arms_found)
    if missing:
        raise ValueError(f"the plan names arm(s) {', '.join(missing)}, which the records do not have (they have "
                         f"{', '.join(sorted(arms_found)) or 'no complete run of a study'}).")
    return values, {"found": found, "used": len(where_of), "left_out": left_out, "code": code_used(used)}


def _run_key(arm, seed):
    """The key of an arm's run of `seed` (spec.PlannedRun.key): "jax-cpu/r1", 110 -> "jax-cpu/seed-0110-r1"."""
    configuration, _, tail = arm.rpartition("/")
    return f"{configuration}/seed-{seed:04d}-{tail}"


def read_pair_measures(sources, plan):
    """The secondary measures of each contrast and floor of the plan, from the pairs/ folders of `sources`.

    Args:
        sources: the sources of the analysis; those that are folders holding a pairs/ folder are read.
        plan: the ConfirmatoryPlan.

    Returns:
        None where no source has a pairs/ folder; else {"folders", "seeds" (with a pairs file), "floor" (the
        noise rule's floor, which the report sets each contrast beside), "contrasts": [{"name", "kind"
        ("hypothesis" or "floor"), "arm", "reference", **stats.pair_measures.summarise_pairs}]}.

    Raises:
        PairsError: an unreadable pairs file, a pair with numbers that are not finite, a seed in two folders;
            the message names the file or folder.
    """
    folders = [Path(s) / seed_pairs.FOLDER for s in sources if (Path(s) / seed_pairs.FOLDER).is_dir()]
    if not folders:
        return None
    records, where = {}, {}
    for folder in folders:
        for seed, record in seed_pairs.read_pairs_folder(folder).items():
            if seed in records:
                raise seed_pairs.PairsError(f"{folder}: seed {seed}'s pairs are in {where[seed]} too.")
            records[seed], where[seed] = record, folder
    by_runs = {seed: {frozenset((p["a"], p["b"])): p for p in record["pairs"]} for seed, record in records.items()}
    contrasts = []
    for kind, item in [("hypothesis", h) for h in plan.hypotheses] + [("floor", f) for f in plan.floors]:
        pairs = {seed: found for seed, pairs in by_runs.items()
                 if (found := pairs.get(frozenset((_run_key(item.arm, seed), _run_key(item.reference, seed)))))}
        try:
            summary = summarise_pairs(pairs)
        except ValueError as error:
            raise seed_pairs.PairsError(f"{', '.join(map(str, folders))}: {item.name}: {error}") from None
        contrasts.append({"name": item.name, "kind": kind, "arm": item.arm, "reference": item.reference, **summary})
    return {"folders": [str(f) for f in folders], "seeds": len(records), "floor": plan.noise_floor,
            "contrasts": contrasts}


def _check_provenance(run, where, code_checksums):
    """A ValueError for a run that does not say which commit ran clean (or whose package checksum is not one the
    plan's code_checksums names), or from which recorded starting point it began (require_provenance)."""
    code = run.record.code
    identified = code is not None and code.package_sha256 in code_checksums
    if not identified and (code is None or code.commit is None or code.dirty is not False):
        state = ("no code commit" if code is None or code.commit is None else
                 f"commit {code.commit[:12]} with uncommitted changes" if code.dirty else
                 f"commit {code.commit[:12]} of unknown state")
        raise ValueError(f"{where}: records {state}; the plan requires runs of committed, unchanged code "
                         "(require_provenance).")
    if not run.initial_checksum:
        raise ValueError(f"{where}: records no checksum of its initial weights; the plan requires it "
                         "(require_provenance).")


# -------------------------------------------------------------------------------------------- words


def _percent(value):
    return "n/a" if value is None else f"{number(value, 3)}%"


def _percent_interval(bounds):
    return f"[{_percent(bounds[0])}, {_percent(bounds[1])}]"


def _verdict_cell(contrast, plan):
    text = contrast["verdict"]
    if contrast.get("exploratory_verdict"):
        text += f" (exploratory: {contrast['exploratory_verdict']})"
    if contrast["seeds_needed"] is not None:
        text += f"; TOST would need {contrast['seeds_needed']} seeds at power {plan['power']:g}"
    elif contrast["verdict"] == "inconclusive":
        text += "; seeds needed not computable"
    return text


def summary_lines(result):
    """One line per contrast: what the command prints."""
    return [f"{c['hypothesis']} {c['metric']}: mean {_percent(c['mean_percent'])} "
            f"{_percent_interval(c['t_interval_percent'])}, {c['verdict']}"
            + "".join(f"; {n['outcome']}" for n in c.get("noise", []) if n["rule"])
            for c in result["contrasts"]]


def _hypotheses_table(plan):
    lines = ["## Hypotheses", "", "| | arm / reference | expectation stated in advance | note |",
             "| --- | --- | --- | --- |"]
    for h in plan["hypotheses"]:
        note = "; ".join(t for t in (h["note"], h["not_testable"] and f"not testable as planned: {h['not_testable']}")
                         if t)
        lines.append(f"| {h['name']} | `{h['arm']}` / `{h['reference']}` | {h['expectation']} | {note} |")
    return lines + [""]


def _contrast_table(result, metric, role):
    plan = result["plan"]
    percent = f"{100 * plan['smallest_effect']:g}%"
    lines = [f"## {metric} ({role})", "",
             f"| contrast | n | mean | t 95% interval | bootstrap 95% interval | p | Holm p | Wilcoxon p | TOST p | "
             f"TOST Holm p | verdict | seeds > +{percent} | seeds < -{percent} |",
             "|" + " --- |" * 13]
    for c in (c for c in result["contrasts"] if c["metric"] == metric):
        lines.append(
            f"| {c['hypothesis']}: `{c['arm']}` / `{c['reference']}` | {c['n']} | {_percent(c['mean_percent'])} | "
            f"{_percent_interval(c['t_interval_percent'])} | {_percent_interval(c['bootstrap_interval_percent'])} | "
            f"{p_value(c['p'])} | {p_value(c['holm_p'])} | {p_value(c['wilcoxon_p'])} | {p_value(c['tost_p'])} | "
            f"{p_value(c['tost_holm_p'])} | {_verdict_cell(c, plan)} | {c['beyond_margin']['above']} | "
            f"{c['beyond_margin']['below']} |")
    return lines + [""]


def _noise_tables(result):
    plan = result["plan"]
    percent = f"{100 * plan['smallest_effect']:g}%"
    lines = ["## Noise floors", "",
             "Each floor's per-seed log-ratio u_s, on its own:", "",
             f"| metric | floor | arm / reference | n | RMS | median abs | seeds > +{percent} | seeds < -{percent} |",
             "|" + " --- |" * 8]
    for f in result["floors"]:
        lines.append(f"| {f['metric']} | {f['floor']} | `{f['arm']}` / `{f['reference']}` | {f['n']} | "
                     f"{number(f['rms'])} | {number(f['median_abs'])} | {f['beyond_margin']['above']} | "
                     f"{f['beyond_margin']['below']} |")
    rows = [(c, n) for c in result["contrasts"] for n in c.get("noise", [])]
    if rows:
        lines += ["", f"The contrasts against them: G = exp(median_s(ln|d_s| - ln|u_s|)) on the seeds both have, "
                  f"with its bootstrap 95% interval (seeds resampled jointly); the rule ({plan['noise_floor']} floor "
                  f"only): upper bound below {plan['noise_multiple']:g}: no larger than the noise; lower bound "
                  "above 1: larger than the noise. RMS(d) / RMS(u) is a description.", "",
                  "| metric | contrast | floor | n | G | 95% interval | RMS(d) / RMS(u) | outcome |",
                  "|" + " --- |" * 8]
        for c, n in rows:
            lines.append(f"| {c['metric']} | {c['hypothesis']} | {n['floor']} | {n['n']} | {number(n['multiple'])} | "
                         f"{interval(n['interval'])} | {number(n['rms_ratio'])} | "
                         f"{n['outcome'] if n['rule'] else 'described, not the rule'} |")
    return lines + [""]


def _left_out_lines(result, runs):
    lines = []
    for item in result["contrasts"] + result["floors"]:
        name = item.get("hypothesis") or item["floor"]
        for side in ("arm_only", "reference_only"):
            if item["left_out"][side]:
                lines.append(f"- {name}, {item['metric']}: seed(s) {', '.join(map(str, item['left_out'][side]))} "
                             f"only in `{item['arm'] if side == 'arm_only' else item['reference']}`.")
    lines += [f"- `{run['path']}`: {run['reason']}" for run in runs["left_out"]]
    return ["## Seeds and runs left out", ""] + (lines or ["None."]) + [""]


def render_markdown(result):
    """confirmatory.md from the record written to confirmatory.json."""
    plan = result["plan"]
    runs = result["runs"]
    lines = [f"# {plan['title']}", "",
             f"Made from {', '.join(f'`{s}`' for s in result['inputs'])} with the plan `{result['plan_file']}`: "
             f"{runs['used']} runs of the plan's arms used ({runs['found']} found, {len(runs['left_out'])} left "
             "out).", "",
             f"Per seed s, d_s = ln(arm_s / reference_s), shown as a change in percent (exp(d) - 1). Smallest effect "
             f"of interest {100 * plan['smallest_effect']:g}% (|d| < {plan['margin']:.4f}). Paired t-test of mean "
             f"d = 0 (Wilcoxon's signed-rank test beside it, a check); TOST at +/- the margin; Holm over the "
             f"{result['family']['contrasts']} contrasts, separately for the difference and the TOST p-values, "
             f"family-wise alpha {plan['alpha']:g}. Intervals 95%: t, and bootstrap percentile "
             f"({plan['bootstrap_resamples']:,} resamples of seeds, numpy default_rng({plan['bootstrap_seed']})). "
             f"Seeds needed (inconclusive): TOST at power {plan['power']:g}, a true difference of 0, the observed SD, "
             f"level alpha / {result['family']['contrasts']} = {result['family']['strictest_level']:.4g} (Holm's "
             "strictest step)."]
    if result.get("plot"):
        lines += ["", f"![Per-seed log-ratios]({result['plot']})"]
    lines += [""] + _hypotheses_table(plan)
    for number_, metric in enumerate(plan["metrics"]):
        lines += _contrast_table(result, metric, "primary" if number_ == 0 else "co-primary")
    if result["floors"]:
        lines += _noise_tables(result)
    lines += pair_measures_lines(result.get("pair_measures"), result.get("weights_plot"))
    lines += ["## Code", "", "The code the used runs were trained with (each run's manifest, `code`)"
              + (", required to be committed and unchanged by the plan." if plan.get("require_provenance") else ".")
              + "", "", "| commit | uncommitted changes | runs |", "| --- | --- | --- |"]
    lines += [f"| {c['commit'] or 'not recorded'}{_identified(c, plan.get('code_checksums', {}))} | "
              f"{'not known' if c['dirty'] is None else 'yes' if c['dirty'] else 'no'} | {c['runs']} |"
              for c in runs.get("code", [])] + [""]
    lines += ["## Deviations from the plan", ""] + ([f"- {d}" for d in result["deviations"]] or ["None declared."])
    lines += [""] + _left_out_lines(result, runs)
    return "\n".join(lines)


def _spread_cell(summary, digits=3):
    if not summary or "median" not in summary:
        return "n/a"
    return f"{number(summary['median'], digits)} [{number(summary['min'], digits)}, {number(summary['max'], digits)}]"


def _times_floor(value, floor_value):
    """A contrast's median as a multiple of the floor's: a description, "n/a" where the floor's is 0 or absent."""
    if value is None or not floor_value:
        return "n/a"
    return f"{number(value / floor_value, 3)}x"


def pair_measures_lines(measures, weights_plot=None):
    """The markdown lines of the secondary measures (`read_pair_measures`'s record, or None: one line saying
    there are none), with the weights' plot `weights_plot` where one was drawn."""
    if measures is None:
        return ["Secondary measures (prediction disagreement, weights over training, first differing update): not "
                "reported, no source has a pairs/ folder (`prednet-study pairs` writes it).", ""]
    contrasts = measures["contrasts"]
    floor = next((c for c in contrasts if c["kind"] == "floor" and c["name"] == measures["floor"]), None)
    floor_name = floor["name"] if floor else None
    floor_prediction = floor and floor["prediction_disagreement"].get("median")
    floor_l2 = floor and floor["weights"]["n"] and floor["weights"]["last"]["normalised_l2"]["median"]

    def label(c):
        return f"{c['name']}: `{c['arm']}` / `{c['reference']}`" if c["kind"] == "hypothesis" else \
            f"floor {c['name']}: `{c['arm']}` / `{c['reference']}`"

    last_steps = sorted({c["weights"]["last"]["step"] for c in contrasts if c["weights"]["n"]})
    lines = ["## Secondary measures: pairs of runs (secondary: reported, not tested)", "",
             f"From the pairs files of {', '.join(f'`{f}`' for f in measures['folders'])} ({measures['seeds']} "
             "seeds; `prednet-study pairs` computed them where the runs were trained): for each contrast, its two "
             "runs of each seed that has both. Prediction disagreement: the RMS of the difference of the two runs' "
             "held-out predictions over the RMS of one run's predictions (the run whose key sorts later, the "
             "pairs file's b). Weights: the normalised L2 distance |a - b| / |b| and the cosine distance "
             "1 - cos(a, b) of the two runs' sampled weights at the last snapshot "
             f"(update {', '.join(map(str, last_steps)) or 'n/a'}). First differing update: the first update "
             "whose logged losses differ; never: seeds where none does. Median [min, max] over seeds; n: the "
             "seeds with a pair (arms added to the study later have none in its first seeds)"
             + (f"; x {floor_name}: the contrast's median over the {floor_name} floor's, a description." if floor
                else "."), ""]
    ratio = f" x {floor_name} |" if floor else ""
    lines += ["| contrast | n | prediction disagreement |" + ratio + " first differing update | never differ |",
              "|" + " --- |" * (5 + bool(floor))]
    for c in contrasts:
        prediction, first = c["prediction_disagreement"], c["first_differing_update"]
        # A pair may lack the predictions (runs that kept none): their own count, where it is smaller.
        fewer = f" (n={prediction['n']})" if prediction["n"] != c["n"] else ""
        row = f"| {label(c)} | {c['n']} | {_spread_cell(prediction)}{fewer} |"
        if floor:
            row += f" {_times_floor(prediction.get('median'), floor_prediction)} |"
        lines.append(row + f" {_spread_cell(first, 4)} | {first['never']} of {first['n']} |")
    lines += ["", "| contrast | n | normalised L2, last snapshot |" + ratio
              + " cosine distance, last snapshot | sampled weights equal at every snapshot |",
              "|" + " --- |" * (5 + bool(floor))]
    for c in contrasts:
        weights = c["weights"]
        if not weights["n"]:
            lines.append(f"| {label(c)} | 0 | n/a |" + (" n/a |" if floor else "") + " n/a | n/a |")
            continue
        last = weights["last"]
        row = f"| {label(c)} | {weights['n']} | {_spread_cell(last['normalised_l2'])} |"
        if floor:
            row += f" {_times_floor(last['normalised_l2']['median'], floor_l2)} |"
        lines.append(row + f" {_spread_cell(last['cosine_distance'])} | {weights['identical']} of {weights['n']} |")
    if weights_plot:
        lines += ["", f"![Median normalised L2 distance of the weights over training]({weights_plot})"]
    return lines + [""]


def _identified(code_row, code_checksums):
    """What the plan's code_checksums say of a row of code, where they name its package checksum."""
    known = [code_checksums[c] for c in code_row.get("package_sha256", []) if c in code_checksums]
    return f" (its package checksum is that of {', '.join(known)}: the plan's code_checksums)" if known else ""


# ------------------------------------------------------------------------------------------ writing


def _plot_panels(result):
    plan = result["plan"]
    panels = []
    for metric in plan["metrics"]:
        contrasts = [c for c in result["contrasts"] if c["metric"] == metric]
        floors = [f for f in result["floors"] if f["metric"] == metric]
        columns = [{"label": c["hypothesis"], "values": c["log_ratios"], "floor": False} for c in contrasts]
        columns += [{"label": f"floor: {f['floor']}", "values": f["log_ratios"], "floor": True} for f in floors]
        rule = next((f for f in floors if f["floor"] == plan["noise_floor"]), None)
        band = None
        if rule is not None and rule["median_abs"] is not None:
            band = plan["noise_multiple"] * rule["median_abs"]
        panels.append({"metric": metric, "columns": columns, "noise_band": band,
                       "noise_label": rule and f"{plan['noise_multiple']:g} x median |u|, {rule['floor']} floor"})
    return panels


def write_confirmatory(sources, plan_path, output, plot=True, overwrite=False):
    """The confirmatory analysis of the runs under `sources` by the plan file `plan_path`, written to `output`.

    Args:
        sources: folders of runs, packed study folders or archives.
        plan_path: the plan file (TOML).
        output: the folder for confirmatory.json, confirmatory.md, confirmatory.png and, with pairs,
            confirmatory-weights.png.
        plot: draw the PNGs.
        overwrite: replace an earlier analysis in `output`.

    Returns:
        the record written to confirmatory.json, with "files" (what was written).
    """
    output = output_folder(output, (CONFIRMATORY_JSON, CONFIRMATORY_MD), overwrite)
    plan = load_plan(plan_path)
    values, runs = read_values(sources, plan)
    result = {**analyse(plan, values), "inputs": [str(s) for s in sources], "plan_file": str(plan_path),
              "runs": runs, "pair_measures": read_pair_measures(sources, plan)}
    output.mkdir(parents=True, exist_ok=True)
    files = [CONFIRMATORY_JSON, CONFIRMATORY_MD]
    if plot:
        from prednet_keras.study.report.plots import plot_log_ratios

        plot_log_ratios(_plot_panels(result), plan.margin, output / CONFIRMATORY_PNG, title=plan.title)
        result["plot"] = CONFIRMATORY_PNG
        files.append(CONFIRMATORY_PNG)
        if result["pair_measures"] is not None:
            from prednet_keras.study.report.plots import plot_weight_distance

            curves = [{"label": (c["name"] if c["kind"] == "hypothesis" else f"floor: {c['name']}")
                       + f" (n={c['weights']['n']})",
                       "steps": c["weights"]["steps"], "median": c["weights"]["median_normalised_l2"],
                       "floor": c["kind"] == "floor"} for c in result["pair_measures"]["contrasts"] if c["weights"]["n"]]
            plot_weight_distance(curves, output / CONFIRMATORY_WEIGHTS_PNG,
                                 title="Weights over training: median over seeds of two runs' normalised L2 distance")
            result["weights_plot"] = CONFIRMATORY_WEIGHTS_PNG
            files.append(CONFIRMATORY_WEIGHTS_PNG)
    result["files"] = files
    atomic_write_json(output / CONFIRMATORY_JSON, result)
    atomic_write(output / CONFIRMATORY_MD, render_markdown(result))
    return result
