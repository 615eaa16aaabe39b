"""report.md from a report dict: the answer, the verdicts and every table."""

import json

from prednet_keras.study.report.wording import (
    answer,
    determinism_cell,
    interval,
    number,
    p_value,
    verdict_line,
)

__all__ = ["render_markdown"]


def render_markdown(report):
    """report.md from a report dict.

    Args:
        report: as returned by build_report (plus "plots" per protocol).
    """
    lines = ["# Study report", ""]
    several = len(report["protocols"]) > 1
    if several:
        lines += ["**Answer**, per protocol:", ""]
        lines += [f"- {section['id']}: {answer(section)}" for section in report["protocols"]]
    elif report["protocols"]:
        lines.append(f"**Answer:** {answer(report['protocols'][0])}")
    else:
        lines.append("**Answer:** no usable runs, nothing to compare.")
    lines.append("")
    lines.append(f"Made {report['created']} from {', '.join(f'`{d}`' for d in report['inputs'])}: "
                 f"{report['runs_found']} run folders found, {report['runs_used']} used"
                 + (f", {report['perturbed_runs']} perturbed (divergence baseline only)" if report["perturbed_runs"] else "")
                 + (f", {len(report['excluded'])} left out" if report["excluded"] else "") + ".")
    opts = report["options"]
    lines.append("")
    lines.append(f"Level alpha = {opts['alpha']} (family-wise over the pairs, Holm); power target {opts['power']}; "
                 f"curves tested at {opts['checkpoints']} checkpoints "
                 f"({'max-t permutation' if opts['curve_test'] == 'maxt' else 'Holm'}); random seed {opts['seed']}. "
                 "Methods: docs/study-statistics.md.")
    lines.append("")
    if report["warnings"]:
        lines += ["## Warnings", ""] + [f"- {w}" for w in report["warnings"]] + [""]
    for section in report["protocols"]:
        lines += protocol_markdown(section, several)
    if report["excluded"]:
        lines += ["## Runs left out", "", "| run | reason |", "| --- | --- |"]
        lines += [f"| `{e['path']}` | {e['reason']} |" for e in report["excluded"]]
        lines.append("")
    lines += code_markdown(report.get("code") or [])
    lines += ["## Runs", "", "| run | configuration | seed | replicate | weights checksum | curve checksum |",
              "| --- | --- | --- | --- | --- | --- |"]
    for run in report["runs"]:
        lines.append(f"| `{run['path']}` | {run['configuration']} | {run['seed']} | {number(run['replicate'])} | "
                     f"{(run['weights_checksum'] or 'n/a')[:12]} | {(run['curve_checksum'] or 'n/a')[:12]} |")
    lines.append("")
    return "\n".join(lines)


def code_markdown(rows):
    """The code the runs were made with: commit, whether the package's files differed from it, how many runs."""
    lines = ["## Code", "",
             "The code the runs were made with (manifest.json `code`): the git commit of the checkout, and "
             "whether the package's files differed from it (then the sha256 of its .py files tells which "
             "code ran).", "",
             "| commit | package files changed | package sha256 | runs |", "| --- | --- | --- | --- |"]
    for row in rows:
        if not row["recorded"]:
            commit = "not recorded (made before manifests recorded their code)"
        else:
            commit = f"`{row['commit']}`" if row["commit"] else "unknown (see the runs' code.source)"
        changed = {True: "yes", False: "no"}.get(row["dirty"], "not known" if row["recorded"] else "n/a")
        checksums = ", ".join(c[:12] for c in row["package_sha256"]) or "n/a"
        lines.append(f"| {commit} | {changed} | {checksums} | {row['runs']} |")
    lines.append("")
    return lines


def protocol_markdown(section, several):
    level = "###" if several else "##"
    lines = []
    if several:
        protocol = section["protocol"]
        model = (protocol.get("model") or {}).get("name") or (protocol.get("options") or {}).get("model")
        name = (protocol.get("protocol") or {}).get("name")
        lines += [f"## Protocol {section['id']}" + "".join(f": {v}" for v in (name or model,) if v), ""]
    metric = section["metric"]
    comparison = section["comparisons"]
    lines += [f"{level} Verdicts", ""]
    lines.append(f"Metric: `{metric['name']}` (from {metric['from']}), one value per seed (replicates averaged). "
                 f"Equivalence margin: +/- {number(comparison['margin'])} ({comparison['margin_rule']}; pooled seed SD "
                 f"{number(comparison['pooled_sd'])}).")
    lines.append("")
    if not comparison["pairs"]:
        lines += ["Only one configuration: nothing to compare.", ""]
    lines += [verdict_line(pair, comparison) for pair in comparison["pairs"]]
    lines.append("")
    lines += [f"{level} Configurations", "",
              "| configuration | what it is | hosts | seeds | runs | mean | SD | 95% CI | determinism |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in section["configurations"]:
        s = c["summary"]
        others = [n for n in c.get("names") or [] if n != c["id"]]
        label = c["label"] + (f" (also named {', '.join(others)})" if others else "")
        lines.append(f"| {c['id']} | {label} | {', '.join(c['hosts'])} | {s['n']} | {c['runs']} | "
                     f"{number(s['mean'])} | {number(s['sd'])} | {interval(s['ci'])} | {determinism_cell(c['determinism'])} |")
    lines.append("")
    lines.append("CI: t-based, (1 - alpha). Determinism: share of repeats (re-runs of a seed) whose final weights "
                 "and loss curve are bit-identical to the seed's first run; a configuration that asks for "
                 "deterministic kernels and is below 100% is a defect. Where repeats differ, 'metric differs "
                 "by up to' is the largest absolute difference of the metric between a repeat and its seed's "
                 "first run: the size of the run-to-run variation, to set against the seed SD and the margin.")
    lines.append("")
    sp = section["starting_points"]
    start = ("every seed started from the same initial weights in every configuration" if sp["same_start"]
             else "NOT the same for every seed; see warnings")
    lines.append(f"Starting points: {start} ({sp['seeds']} seeds).")
    lines.append("")
    plots = section.get("plots") or {}
    if "final_metric" in plots:
        lines += [f"![final metric per configuration]({plots['final_metric']})", ""]

    paired = [p for p in comparison["pairs"] if p["design"] == "paired"]
    unpaired = [p for p in comparison["pairs"] if p["design"] != "paired"]
    width = int(100 * (1 - comparison["alpha"]))
    if paired:
        lines += [f"{level} Paired tests (the primary analysis: the arms share seeds)", "",
                  "Each seed ran in both configurations from the same initial weights and data order, so the "
                  "per-seed differences carry the comparison and the seed-to-seed spread cancels.", "",
                  f"| pair (A vs B) | seeds | mean difference A - B | {width}% CI | SD of the differences | higher in A / B / equal | "
                  "beyond the margin | largest | paired t p (Holm) | Wilcoxon p (Holm) | TOST p (Holm) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for pair in paired:
            h, t, d = pair["p_holm"], pair["paired"], pair["seed_differences"]
            beyond = "n/a" if d["beyond_margin"] is None else f"{d['beyond_margin']} of {d['n']}"
            lines.append(
                f"| {pair['a']} vs {pair['b']} | {t['n']} | {number(t['difference'])} | {interval(t['ci'])} | "
                f"{number(t['sd'])} | {d['a_higher']} / {d['b_higher']} / {d['equal']} | {beyond} | "
                f"{number(d['largest'], 2)} | {p_value(t['p'])} ({p_value(h['paired'])}) | "
                f"{p_value(t['wilcoxon_p'])} ({p_value(h['wilcoxon'])}) | "
                f"{p_value(pair['tost']['p']) if pair['tost'] else 'n/a'} ({p_value(h['tost'])}) |")
        lines.append("")
    if unpaired:
        lines += [f"{level} Unpaired tests (the primary analysis where the arms share too few seeds)", "",
                  f"| pair (A vs B) | n | difference A - B | {width}% CI | Welch p (Holm) | Mann-Whitney p (Holm) | TOST p (Holm) |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for pair in unpaired:
            h, w = pair["p_holm"], pair["welch"]
            lines.append(
                f"| {pair['a']} vs {pair['b']} | {pair['n_a']}/{pair['n_b']} | {number(w['difference'])} | "
                f"{interval(w['ci'])} | {p_value(w['p'])} ({p_value(h['welch'])}) | "
                f"{p_value(pair['mann_whitney']['p'])} ({p_value(h['mann_whitney'])}) | "
                f"{p_value(pair['tost']['p']) if pair['tost'] else 'n/a'} ({p_value(h['tost'])}) |")
        lines.append("")
    if comparison["pairs"]:
        lines += [f"{level} Spread and effect size", "",
                  ("Welch's and Mann-Whitney's tests of the paired pairs ignore the pairing (shown for reference; "
                   "the seed-to-seed spread swamps them). " if paired else "")
                  + "Levene: whether the spread over seeds differs. g: the mean difference in units of the pooled "
                  "seed SD (Hedges' g), on the seeds the verdict uses.", "",
                  "| pair (A vs B) | Welch p (Holm) | Mann-Whitney p (Holm) | Levene p (Holm) | SD ratio A / B | g |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for pair in comparison["pairs"]:
            h = pair["p_holm"]
            lines.append(f"| {pair['a']} vs {pair['b']} | {p_value(pair['welch']['p'])} ({p_value(h['welch'])}) | "
                         f"{p_value(pair['mann_whitney']['p'])} ({p_value(h['mann_whitney'])}) | "
                         f"{p_value(pair['levene']['p'])} ({p_value(h['levene'])}) | {number(pair['levene']['sd_ratio'], 3)} | "
                         f"{number(pair['hedges_g']['g'], 3)} |")
        lines.append("")
        lines += [f"{level} Power", "",
                  "| pair | SD used | power now (detect / equivalence) | seeds to detect the margin | "
                  "seeds to show equivalence | seeds needed |", "| --- | --- | --- | --- | --- | --- |"]
        for pair in comparison["pairs"]:
            pw = pair["power"]
            lines.append(f"| {pair['a']} vs {pair['b']} | {number(pw['sd'])} ({pw['sd_kind']}) | "
                         f"{number(pw['power_now_detect'], 2)} / {number(pw['power_now_equivalence'], 2)} | "
                         f"{number(pw['seeds_to_detect_margin'])} | {number(pw['seeds_to_show_equivalence'])} | "
                         f"{number(pw['seeds_needed'])} |")
        lines.append("")
        lines.append(f"Seeds per configuration for power {comparison['power']} at alpha {comparison['alpha']} "
                     "(no adjustment for the number of pairs): to detect a shift of the margin (two-sided t), and "
                     "to show equivalence (TOST) when there is no shift; 'seeds needed' is the larger.")
        lines.append("")

    curves = section.get("curves")
    if curves:
        lines += _heading(level, "Loss curves", plots, "loss_curves", "loss curves")
        lines.append(f"Per-step training loss averaged in {len(curves['checkpoints'])} bins ending at steps "
                     f"{', '.join(map(str, curves['checkpoints']))}; each bin tested per pair, "
                     f"{'max-t permutation' if curves['method'] == 'maxt' else 'Holm'} across the bins, Holm across pairs.")
        lines.append("")
        lines += [f"{note}" for note in curves.get("notes", [])] + ([""] if curves.get("notes") else [])
        if curves["tests"]:
            lines += ["| pair | design | curves differ | Holm p (pairs) | first differing checkpoint | differing checkpoints |",
                      "| --- | --- | --- | --- | --- | --- |"]
            for test in curves["tests"]:
                where = [str(c) for c, s in zip(test["checkpoints"], test["significant"]) if s]
                lines.append(f"| {test['a']} vs {test['b']} | {test['design']} | {'yes' if test['differs'] else 'no'} | "
                             f"{p_value(test['p_global_holm'])} | {number(test['first_significant'])} | "
                             f"{', '.join(where) or 'none'} |")
            lines.append("")
    divergence = section.get("divergence")
    if divergence:
        lines += _heading(level, "Divergence", plots, "divergence", "divergence")
        lines += ["RMS distance between trajectories (weights or probe predictions, as the runs stored them) of "
                  "runs with the same seed.", "", "| what | seeds | first step apart | final median distance |",
                  "| --- | --- | --- | --- |"]
        for item in divergence["between"]:
            lines.append(f"| {item['a']} vs {item['b']} | {item['n']} | {number(item['first_separated'])} | {number(item['final_median'])} |")
        for item in divergence["baseline"]:
            lines.append(f"| {item['configuration']} vs itself nudged ({item['perturbation']}) | {item['n']} | "
                         f"{number(item['first_separated'])} | {number(item['final_median'])} |")
        for item in divergence["replicates"]:
            lines.append(f"| {item['configuration']} replicates | {item['n']} | {number(item['first_separated'])} | "
                         f"{number(item['final_median'])} |")
        lines.append("")
    lines += [f"{level} Configuration details", ""]
    for c in section["configurations"]:
        lines.append(f"- **{c['id']}** {c['label']}: requested {json.dumps(c['settings'])}; effective "
                     f"{json.dumps(c['effective'])}; machine {json.dumps(c['machine'])}; from {', '.join(c['sources'])}.")
    lines.append("")
    return lines


def _heading(level, title, plots, plot, alt):
    """A section's heading, then its plot when one was drawn."""
    lines = [f"{level} {title}", ""]
    if plot in plots:
        lines += [f"![{alt}]({plots[plot]})", ""]
    return lines
