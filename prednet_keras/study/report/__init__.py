"""`prednet-study report`: run folders from one or many machines -> one report.

    report = make_report(["results-cpu-box", "results-gpu-box"], "report/")

Runs are found under every folder given (at any depth; a run folder is a
folder with manifest.json) or in every tar archive given (a packed study's
runs.tar.xz, archive.py), merged, and grouped twice:

- by protocol: what was trained and how (model, schedule, data checksums, and
  the study's `protocol` record). Runs of different protocols are never
  compared; each protocol gets its own section.
- by configuration: the runtime asked for (backend, device kind, threads,
  interop threads, deterministic, cuDNN, TF32, oneDNN, XLA), any extra arm
  factors the study declares (manifest study.settings), and the machine it
  ran on (CPU model, GPU model for GPU runs, backend/Keras/CUDA/cuDNN
  versions). So the same settings on a CPU box and a GPU box are two
  configurations, and two identical boxes are one.

What is read from each run folder (see docs/study-statistics.md, "What the
report reads"): manifest.json (status, runtime.requested/effective,
fingerprint, seeds, initial_weights.checksum, model, schedule, data, result,
metric, metrics, protocol, study, code) and history.csv; optionally the final checkpoint
(for a weights checksum the manifest lacks) and trajectory.npz (divergence).

Writes report.md, report.json, loss_curves.png, final_metric.png and, when runs
store trajectories, divergence.png (prefixed P1-, P2-, ... with several protocols).
"""

import contextlib
import dataclasses
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from prednet_keras.files.diskwrite import atomic_write, atomic_write_json
from prednet_keras.session import folder as run_folders
from prednet_keras.study import archive
from prednet_keras.study.stats.comparisons import compare_configurations
from prednet_keras.study.report.configurations import (
    group_configurations,
    protocol_differences,
    run_sort_key,
)
from prednet_keras.study.stats.determinism_audit import determinism_audit
from prednet_keras.study.factors import STUDY_FACTORS
from prednet_keras.study.report.curves import curve_section, divergence_section
from prednet_keras.study.report.markdown import render_markdown
from prednet_keras.study.report.wording import answer
from prednet_keras.study.report.run_records import curve_checksum, find_run_folders, load_run
from prednet_keras.study.stats import ALPHA, MARGIN_SD, PERMUTATIONS, POWER, describe

# answer, curve_checksum, find_run_folders, load_run and render_markdown live in the modules named above;
# they are named here too because the commands (cli/study.py, cli/train.py) and scripts import them from here.
__all__ = [
    "ReportOptions",
    "answer",
    "build_report",
    "curve_checksum",
    "find_run_folders",
    "load_run",
    "code_used",
    "make_report",
    "output_folder",
    "render_markdown",
]

REPORT_MD = "report.md"
REPORT_JSON = "report.json"


@dataclasses.dataclass
class ReportOptions:
    """How the report computes its statistics.

    Args:
        metric: the per-run number compared: the name of the manifests'
            `metric` record, a key of `metrics` (or `result`), or
            "last_steps:N". None: `protocol.metric`, else `metric.name`, else
            the only key of `metrics`, else result.final_loss.
        alpha: level of every test (family-wise across pairs, and across
            checkpoints within a pair for curves).
        power: the power the seeds-needed estimates aim for.
        margin: a fixed equivalence margin in the metric's units; None:
            margin_sd x the pooled seed SD.
        margin_sd: see margin.
        checkpoints: checkpoints the loss curves are tested at (equal bins of
            the per-step losses, each the mean over its bin).
        curve_test: "maxt" (max-t permutation) or "holm".
        permutations: permutations for the max-t curve test.
        seed: seed of the permutations (a report repeats exactly).
        plots: write the PNG plots.
    """

    metric: str = None
    alpha: float = ALPHA
    power: float = POWER
    margin: float = None
    margin_sd: float = MARGIN_SD
    checkpoints: int = 10
    curve_test: str = "maxt"
    permutations: int = PERMUTATIONS
    seed: int = 0
    plots: bool = True

    def validate(self):
        """Raises ValueError naming the first bad option."""
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {self.alpha}.")
        if not 0 < self.power < 1:
            raise ValueError(f"power must be in (0, 1), got {self.power}.")
        if self.margin is not None and not self.margin > 0:
            raise ValueError(f"The margin must be > 0, got {self.margin}.")
        if not self.margin_sd > 0:
            raise ValueError(f"margin_sd must be > 0, got {self.margin_sd}.")
        if self.curve_test not in ("maxt", "holm"):
            raise ValueError(f"curve_test must be 'maxt' or 'holm', got {self.curve_test!r}.")
        if self.checkpoints < 1 or self.permutations < 1:
            raise ValueError("checkpoints and permutations must be >= 1.")
        if self.metric is not None and not self.metric.strip():
            raise ValueError("The metric name is empty.")


def _default_metric(runs):
    names = {(r.record.protocol or {}).get("metric") for r in runs}
    if len(names) == 1 and isinstance(next(iter(names)), str):
        return names.pop(), "protocol.metric in the manifests"
    names = {r.record.metric.get("name") if isinstance(r.record.metric, dict) else None for r in runs}
    if len(names) == 1 and isinstance(next(iter(names)), str):
        return names.pop(), "metric.name in the manifests"
    keys = set()
    for run in runs:
        metrics = run.record.get("metrics") or {}
        keys.add(tuple(sorted(k for k in metrics if run.metric(k) is not None)))
    if len(keys) == 1:
        only = keys.pop()
        if len(only) == 1:
            return only[0], "the only entry of the manifests' metrics"
    return "final_loss", "result.final_loss (the last epoch's mean training loss; choose another with --metric)"


def build_report(dirs, options=None, factors=STUDY_FACTORS):
    """Reads the run folders under `dirs` and computes the whole report.

    Args:
        dirs: folders (from one or several machines) holding run folders, or
            tar archives of them (a packed study's runs.tar.xz), read in a
            temporary folder that is removed before this returns.
        options: ReportOptions (defaults if None).
        factors: the study factors (factors.STUDY_FACTORS): which make a configuration, compared within a
            protocol, and which the protocol.

    Returns:
        (report, context): report is the JSON-ready dict written to
        report.json; context holds what the plots need (not JSON).
    """
    options = options or ReportOptions()
    options.validate()
    with contextlib.ExitStack() as stack:
        return _build_report(dirs, options, stack, factors)


def _input_folders(source, stack, warnings):
    """[(run folder, where it is shown)] of one input: a folder, or an archive opened on `stack`."""
    source = Path(source)
    if source.is_dir():
        found = [(path, str(path)) for path in find_run_folders(source)]
        if not found:
            packed = source / archive.ARCHIVE
            hint = (f" (it holds {archive.ARCHIVE}: pass {packed}, or unpack it with prednet-study unpack "
                    f"{source})") if packed.is_file() else ""
            warnings.append(f"{source}: no run folders found{hint}.")
        return found
    if archive.is_archive(source):
        root = stack.enter_context(archive.opened(source))
        found = [(path, f"{source}:{path.relative_to(root).as_posix()}") for path in find_run_folders(root)]
        if not found:
            warnings.append(f"{source}: no run folders in the archive.")
        return found
    if source.exists():
        raise ValueError(f"{source}: neither a folder of runs nor a tar archive of them (.tar, .tar.gz, .tar.xz).")
    raise FileNotFoundError(f"No such folder or archive: {source}")


def _build_report(dirs, options, stack, factors):
    warnings = []
    excluded = []
    loaded = []
    seen = {}
    folders = []
    for directory in dirs:
        folders.extend((path, str(directory), where) for path, where in _input_folders(directory, stack, warnings))
    if not folders:
        # Not a report: nothing was found to leave out or to compare (a wrong path, a packed study).
        raise ValueError(f"{' '.join(warnings)} Nothing to report.")
    for path, source, where in folders:
        try:
            digest = hashlib.sha256((path / run_folders.MANIFEST).read_bytes()).hexdigest()
        except OSError as error:
            excluded.append({"path": where, "reason": f"unreadable manifest ({error})"})
            continue
        if digest in seen:
            # A run copied into two result folders is one run, not two seeds.
            excluded.append({"path": where, "reason": f"duplicate of {seen[digest]}"})
            continue
        seen[digest] = where
        try:
            run = load_run(path, source, where, factors)
        except (run_folders.RunFolderError, ValueError, KeyError) as error:
            excluded.append({"path": where, "reason": f"unreadable ({error})"})
            continue
        loaded.append(run)
    usable, perturbed = [], []
    for run in loaded:
        if run.status != "complete":
            excluded.append({"path": run.where, "reason": f"status {run.status!r}" +
                             (f": {run.record.get('error')}" if run.record.get("error") else "")})
        elif run.seed is None:
            excluded.append({"path": run.where, "reason": "no seed in the manifest"})
        elif run.perturbation:
            perturbed.append(run)
        else:
            usable.append(run)

    if not usable:
        warnings.append("No usable runs: nothing to compare (see the runs left out).")
    protocols = {}
    for run in usable:
        protocols.setdefault(run.protocol_key, []).append(run)
    protocol_list = sorted(protocols.items(), key=lambda item: (-len(item[1]), item[0]))
    if len(protocol_list) > 1:
        differing = protocol_differences([json.loads(key) for key, _ in protocol_list])
        warnings.append(
            f"{len(protocol_list)} different protocols (runs that trained something different); each is "
            f"reported on its own, never compared with another. They differ in: {', '.join(differing)}."
        )

    configs_all = group_configurations(usable)
    config_of = {}
    for config in configs_all:
        for run in config["runs"]:
            config_of[run.path] = config

    report = {
        "format": "prednet-study-report",
        "format_version": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "inputs": [str(d) for d in dirs],
        "options": dataclasses.asdict(options),
        "runs_found": len(folders),
        "runs_used": len(usable),
        "perturbed_runs": len(perturbed),
        "excluded": excluded,
        "warnings": warnings,
        "protocols": [],
    }
    context = {"protocols": []}
    for number, (key, _members) in enumerate(protocol_list, 1):
        pid = f"P{number}"
        configs = []
        for config in configs_all:
            inside = [r for r in config["runs"] if r.protocol_key == key]
            if inside:
                configs.append({**config, "runs": sorted(inside, key=run_sort_key)})
        section, ctx = _protocol_section(pid, json.loads(key), configs,
                                         [r for r in perturbed if r.protocol_key == key], options, warnings)
        report["protocols"].append(section)
        context["protocols"].append(ctx)
    orphans = [r for r in perturbed if r.protocol_key not in protocols]
    for run in orphans:
        warnings.append(f"{run.where}: a perturbed run without unperturbed runs of its protocol; not used.")
    report["code"] = code_used(usable + perturbed)
    report["runs"] = [_run_record(r, config_of.get(r.path)) for r in usable]
    return report, context


def code_used(runs):
    """The code the runs were made with (manifest `code`): one row per commit and dirty flag, most runs
    first; runs whose manifests predate the record come last, as not recorded."""
    rows = {}
    for run in runs:
        code = run.record.code
        key = (code is not None, code.commit if code else None, code.dirty if code else None)
        row = rows.setdefault(key, {"recorded": key[0], "commit": key[1], "dirty": key[2], "runs": 0,
                                    "package_sha256": []})
        row["runs"] += 1
        if code is not None and code.package_sha256 and code.package_sha256 not in row["package_sha256"]:
            row["package_sha256"].append(code.package_sha256)
    return sorted(rows.values(), key=lambda row: (not row["recorded"], -row["runs"], row["commit"] or "",
                                                  str(row["dirty"])))


def _run_record(run, config):
    return {
        "path": run.where,
        "source": run.source,
        "configuration": config["id"] if config else None,
        "seed": run.seed,
        "replicate": run.replicate,
        "status": run.status,
        "initial_weights_checksum": run.initial_checksum,
        "weights_checksum": run.weights_checksum,
        "weights_checksum_from": run.weights_checksum_source,
        "curve_checksum": run.curve_checksum,
        "hostname": run.hostname,
    }


def _protocol_section(pid, protocol, configs, perturbed, options, warnings):
    runs = [r for c in configs for r in c["runs"]]
    metric = options.metric
    metric_source = "--metric"
    if metric is None:
        metric, metric_source = _default_metric(runs)

    # One value per seed: replicates of a seed share its starting point, so
    # they are averaged rather than counted as extra seeds.
    values, seeds_of, config_rows, audits = {}, {}, [], {}
    for config in configs:
        by_seed, run_values = {}, []
        for run in config["runs"]:
            value = run.metric(metric)
            run_values.append(value)
            if value is None:
                warnings.append(f"{pid} {config['id']}: {run.where} has no value for metric {metric!r}; left out.")
                continue
            by_seed.setdefault(run.seed, []).append(value)
        ordered = sorted(by_seed, key=lambda s: (str(type(s)), s))
        values[config["id"]] = np.array([np.mean(by_seed[s]) for s in ordered])
        seeds_of[config["id"]] = ordered
        audit = determinism_audit(
            [{"seed": r.seed, "weights_checksum": r.weights_checksum, "curve_checksum": r.curve_checksum,
              "metric": value} for r, value in zip(config["runs"], run_values)],
            config["settings"].get("deterministic"),
        )
        audits[config["id"]] = audit
        if audit["status"] == "defect":
            warnings.append(
                f"{pid} {config['id']} ({config['label']}) claims determinism but only "
                f"{audit['identical']} of {audit['audited']} repeats are bit-identical (seeds "
                f"{', '.join(map(str, audit['differing_seeds']))}): a defect to report, not data."
            )
        config_rows.append({
            "id": config["id"],
            "label": config["label"],
            "name": config["name"],
            "names": config["names"],
            "settings": config["settings"],
            "effective": config["effective"],
            "machine": config["machine"],
            "hosts": sorted({r.hostname or "?" for r in config["runs"]}),
            "sources": sorted({r.source for r in config["runs"]}),
            "runs": len(config["runs"]),
            "seeds": ordered,
            "values": values[config["id"]].tolist(),
            "summary": describe(values[config["id"]], options.alpha),
            "determinism": audit,
        })

    starting_points = _starting_points(configs)
    for problem in starting_points["problems"]:
        warnings.append(f"{pid}: {problem}")

    ids = [c["id"] for c in configs]
    comparison = compare_configurations(
        {cid: values[cid] for cid in ids}, seeds=seeds_of, margin=options.margin, margin_sd=options.margin_sd,
        alpha=options.alpha, power=options.power,
    )
    # A paired design needs the same starting point per seed; when a seed's
    # arms started apart, the pairing is kept (same seed, same data order) but flagged.
    for pair in comparison["pairs"]:
        if pair["design"] == "paired" and starting_points["differ"]:
            pair["notes"].append("some seeds started from different initial weights (see starting points)")

    curves, curve_ctx = curve_section(configs, comparison["pairs"], options)
    divergence = divergence_section(configs, perturbed, [(p["a"], p["b"]) for p in comparison["pairs"]])
    section = {
        "id": pid,
        "protocol": protocol,
        "metric": {"name": metric, "from": metric_source},
        "configurations": config_rows,
        "starting_points": starting_points,
        "comparisons": comparison,
        "curves": curves,
        "divergence": divergence,
    }
    ctx = {"id": pid, "configs": configs, "values": values, "curves": curve_ctx, "divergence": divergence,
           "metric": metric}
    return section, ctx


def _starting_points(configs):
    """Do all arms of a seed start from the same initial weights?"""
    by_seed = {}
    for config in configs:
        for run in config["runs"]:
            by_seed.setdefault(run.seed, {}).setdefault(run.initial_checksum, set()).add(config["id"])
    problems, differ = [], []
    missing = sorted({c["id"] for c in configs for r in c["runs"] if r.initial_checksum is None})
    for seed, checksums in sorted(by_seed.items(), key=lambda item: (str(type(item[0])), item[0])):
        known = {k: v for k, v in checksums.items() if k is not None}
        if len(known) > 1:
            differ.append(seed)
            detail = "; ".join(f"{', '.join(sorted(v))}: {k[:12]}" for k, v in known.items())
            problems.append(f"seed {seed} started from different initial weights ({detail}).")
    if missing:
        problems.append(f"no initial-weights checksum in runs of {', '.join(missing)}: same start not verified.")
    return {"seeds": len(by_seed), "same_start": not differ and not missing, "differ": differ,
            "problems": problems}


# ----------------------------------------------------------------- writing


def output_folder(output, names, overwrite):
    """The Path of a command's output folder, checked before any work: a folder (or nothing yet), holding
    none of the files `names` unless `overwrite`.

    Raises:
        ValueError: `output` is a file, or holds one of `names` and `overwrite` is off.
    """
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise ValueError(f"{output} exists and is not a folder.")
    for name in names:
        if (output / name).exists() and not overwrite:
            raise ValueError(f"{output / name} exists; pass --overwrite to replace it, or choose another -o.")
    return output


def make_report(dirs, output, options=None, overwrite=False):
    """Builds the report for the run folders under `dirs` and writes it to `output`.

    Args:
        dirs: directories with run folders (one per machine, or any mix).
        output: the report folder (created if needed).
        options: ReportOptions.
        overwrite: replace an earlier report in `output`.

    Returns:
        the report dict (as in report.json), with "files" listing what was written.
    """
    options = options or ReportOptions()
    output = output_folder(output, (REPORT_MD, REPORT_JSON), overwrite)
    report, context = build_report(dirs, options)
    output.mkdir(parents=True, exist_ok=True)
    files = []
    if options.plots:
        from prednet_keras.study.report import plots

        several = len(context["protocols"]) > 1
        for section, ctx in zip(report["protocols"], context["protocols"]):
            prefix = f"{ctx['id']}-" if several else ""
            section["plots"] = plots.draw_all(ctx, output, prefix)
            files.extend(section["plots"].values())
    report["files"] = [REPORT_MD, REPORT_JSON] + files
    # Compact: report.md is the human-readable form, and indentation made the
    # published report.json files nearly twice as large.
    atomic_write_json(output / REPORT_JSON, report, compact=True)
    atomic_write(output / REPORT_MD, render_markdown(report))
    return report
