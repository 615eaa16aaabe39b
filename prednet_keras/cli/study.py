"""prednet-study: run one training across a matrix of configurations, and decide with statistics.

    prednet-study run SPEC -o DIR [--executor local|ray [--address ADDR]]
    prednet-study report DIR... -o REPORT
    prednet-study pack DIR / prednet-study unpack DIR
    prednet-study pairs SPEC -o DIR
    prednet-study confirm DIR_OR_ARCHIVE... --plan PLAN.toml -o OUT

Each subcommand only parses, calls prednet_keras.study and prints.
"""

import os
import shlex
import sys
import time

import click

from prednet_keras.cli.common import SeedRanges, fail_on_user_errors

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


@click.group(context_settings=CONTEXT)
def main():
    """Controlled study: does the hardware or software configuration change what PredNet learns?"""


class _Progress:
    """What `run` shows: a progress bar with ETA on a terminal, one line per run otherwise."""

    def __init__(self, quiet):
        self.quiet = quiet
        self.bar = None
        self.task = None
        self.started = time.perf_counter()
        self.done_at_start = 0

    def start(self, total, done):
        self.total, self.done_at_start = total, done
        click.echo(f"{total} runs planned, {done} already done, {total - done} to run.", err=True)
        if not self.quiet and sys.stderr.isatty() and total > done:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
                TimeRemainingColumn

            self.bar = Progress(TextColumn("runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.description}"),
                                console=Console(stderr=True), transient=False)
            self.bar.start()
            self.task = self.bar.add_task("", total=total, completed=done)

    def message(self, text):
        if self.bar is not None:
            self.bar.console.print(text)
        else:
            click.echo(text, err=True)

    def run_started(self, run):
        if self.bar is not None:
            self.bar.update(self.task, description=f"started {run.key}")

    def run_finished(self, outcome, done, total):
        metric = f"  metric {outcome.metric:.6g}" if outcome.metric is not None else ""
        if outcome.status == "done":
            line = f"done    {outcome.key}  {outcome.seconds:.0f} s{metric}"
        else:
            line = f"FAILED  {outcome.key}  {outcome.seconds:.0f} s: {outcome.message}"
        if self.bar is not None:
            self.bar.update(self.task, completed=done)
            self.bar.console.print(line)
        else:
            elapsed = time.perf_counter() - self.started
            finished_here = done - self.done_at_start
            eta = ""
            if finished_here and done < total:
                eta = f", ETA {_duration(elapsed / finished_here * (total - done))}"
            click.echo(f"[{done}/{total}{eta}] {line}", err=True)

    def close(self):
        if self.bar is not None:
            self.bar.stop()


def _duration(seconds):
    seconds = int(round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


@main.command(
    context_settings=CONTEXT,
    short_help="Run every configuration x seed x replicate of a spec (resumable).",
    epilog="""\b
Examples:
  prednet-study run quick -o results/quick                   # a ready spec, by name
  prednet-study run quick -o results/quick                   # again: resumes, skips finished runs
  prednet-study run paper -o cpu-box --only 'cpu-*'          # this machine's arms only
  prednet-study run my-study.toml -o results --dry-run       # a spec file; show the plan

On a Ray cluster (pip install prednet-keras[ray]; -o must be a folder every node
mounts at the same path):
  prednet-study run paper -o /shared/paper --executor ray --address HEAD:6379
  prednet-study run paper -o /shared/paper --executor ray --address auto --gpu-share 0.25
  prednet-study run paper -o results/paper --executor ray         # a private Ray on this machine
Each run is a Ray task asking for threads CPUs (1 when unset) and, for GPU arms,
--gpu-share of a GPU; Ray puts GPU arms only on nodes that declare GPUs.
""",
)
@click.argument("spec_path", metavar="SPEC")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False),
              help="Study folder: seeds/, runs/<configuration>/<run>/, study.json, report/.")
@click.option("-j", "--workers", type=click.IntRange(min=1),
              help="Runs at once (processes; several may share a GPU) [default: the spec's `workers`, else 1]; "
              "with --executor ray: runs submitted at once [default: all; Ray places them by resources].")
@click.option("--only", multiple=True, metavar="GLOB",
              help="Run only the configurations whose names match (repeatable); the rest can run elsewhere.")
@click.option("--seeds", "seeds", type=SeedRanges(),
              help="Run only these of the spec's seeds (e.g. 100-103,110): one portion of a study, every "
              "configuration of each seed together. Like --only, it writes no report.")
@click.option("--report/--no-report", default=True, show_default=True,
              help="Write DIR/report when every planned run is done.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: a pool of processes on this machine. ray: one Ray task per run, on the cluster at "
              "--address (the output folder must be shared by every node), placed by its resources.")
@click.option("--address", metavar="ADDR", envvar="RAY_ADDRESS", show_envvar=True,
              help="With --executor ray: the Ray cluster (HEAD:6379, auto, ray://HEAD:10001) [default: a private "
              "Ray on this machine only].")
@click.option("--gpu-share", type=click.FloatRange(0, 1, min_open=True), default=1.0, show_default=True,
              help="With --executor ray: the fraction of a GPU each GPU run asks for (0.25: four runs per GPU).")
@click.option("--retries", type=click.IntRange(min=0), default=2, show_default=True,
              help="With --executor ray: further attempts of a run whose worker or training process was killed.")
@click.option("--compile-cache/--no-compile-cache", default=True, show_default=True,
              help="JAX runs share one compilation cache in the study folder: a configuration's first run compiles "
              "while the others wait, then they load its programs. Recorded in study.json and each run's "
              "environment. --no-compile-cache compiles in every process (on a GPU, each then picks its own "
              "convolution algorithms). Local executor only.")
@click.option("--dry-run", is_flag=True, help="Show what would run, and stop.")
@click.option("-q", "--quiet", is_flag=True, help="One line per finished run, no progress bar.")
@click.pass_context
@fail_on_user_errors
def run(ctx, spec_path, output, workers, only, seeds, report, executor, address, gpu_share, retries, compile_cache,
        dry_run, quiet):
    """Run the study in SPEC (a TOML file, or a ready spec: quick, paper, retraction) into --output.

    Every run is a separate training process and the usual run folder. For each
    seed the initial weights are made once and shared by every configuration;
    the data order follows the seed. Running the same command again resumes:
    finished runs are kept as they are, unfinished ones start again. More seeds,
    replicates or configurations can be added to the spec later; the training
    options and existing configurations must stay as they were.

    With --executor ray each run is a Ray task on whichever node has the
    resources its configuration asks for; a run whose worker dies is retried,
    and the results land in --output, which every node must see at the same
    path. -j then caps the runs submitted at once (default: all).
    """
    from prednet_keras.study.runner import plan_status, run_study
    from prednet_keras.study.spec import load_spec, resolve_spec_path

    from click.core import ParameterSource

    if executor != "ray":
        given = [f"--{name.replace('_', '-')}" for name in ("address", "gpu_share", "retries")
                 if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]
        if given:
            raise click.UsageError(f"{', '.join(given)} go{'es' if len(given) == 1 else ''} with --executor ray.")
    elif ctx.get_parameter_source("compile_cache") == ParameterSource.COMMANDLINE:
        raise click.UsageError("--compile-cache / --no-compile-cache go with the local executor (Ray's nodes keep "
                               "no shared cache).")
    spec_path = resolve_spec_path(spec_path)
    spec = load_spec(spec_path)
    if seeds:
        spec = spec.with_seeds(seeds)
    command = ["prednet-study"] + sys.argv[1:]
    if dry_run:
        configurations = spec.select(only)
        finished, pending = plan_status(spec, output, configurations) if os.path.isdir(output) else ([], spec.planned_runs(configurations))
        # One plan for every configuration is said once; otherwise each configuration's line says its own.
        shared = len({config.plan for config in configurations}) == 1
        plan = (_plan_text(spec.seeds, configurations[0].plan) if shared else
                f"{len(spec.seeds)} seeds, each configuration's own replicates")
        click.echo(f"Study {spec.name}: model {spec.model}, {plan} x {len(configurations)} "
                   f"configuration(s) = {len(finished) + len(pending)} runs; {len(finished)} done, "
                   f"{len(pending)} to run.")
        from prednet_keras.study.executors.local_executor import backends_missing

        missing = backends_missing(configurations) if executor != "ray" else {}
        for config in configurations:
            runtime = ", ".join(f"{k}={v}" for k, v in config.runtime.items() if v is not None)
            factors = ", ".join(f"{k}={v}" for k, v in config.factors.items())
            own = "" if shared else (f"  [{_plan_text(spec.seeds, config.plan)} = "
                                     f"{config.plan.run_count(spec.seeds)} runs]")
            placed = ""
            if executor == "ray":
                from prednet_keras.study.executors.ray_executor import resource_request

                request = resource_request(config, gpu_share)
                placed = f"  [Ray: num_cpus={request['num_cpus']}, num_gpus={request['num_gpus']:g}]"
            absent = f"  [cannot run here: {missing[config.name]} is not installed]" if config.name in missing else ""
            click.echo(f"  {config.name}: {runtime}" + (f"; {factors}" if factors else "") + own + placed + absent)
        return
    progress = _Progress(quiet)
    try:
        outcome = run_study(spec, output, workers=workers, only=list(only), spec_path=spec_path, command=command,
                            progress=progress, executor=executor, address=address, gpu_share=gpu_share,
                            retries=retries, share_compilation=compile_cache)
    except KeyboardInterrupt:
        progress.close()
        click.echo(f"\nInterrupted; finished runs are kept. Resume with: {shlex.join(command)}", err=True)
        ctx.exit(130)
    progress.close()
    for name, message in outcome.get("unplaceable", {}).items():
        click.echo(f"Configuration {name} cannot be placed on the Ray cluster: {message}.", err=True)
    for name, message in outcome["skipped"].items():
        click.echo(f"Configuration {name} stopped after a failed run: {message}", err=True)
    if outcome["failed"]:
        click.echo(f"{len(outcome['failed'])} run(s) failed; their folders (runs/<configuration>/.partial-*) keep "
                   f"log.txt. Fix the cause and run the same command to retry.", err=True)
        ctx.exit(1)
    if outcome["pending"]:
        if outcome.get("unplaceable"):
            click.echo(f"{outcome['pending']} run(s) not done; run the same command again once the cluster can "
                       "place them.", err=True)
        ctx.exit(1)
    if report and not only and not seeds:
        from prednet_keras.study.report import ReportOptions, answer, make_report

        options = ReportOptions(**{k: v for k, v in spec.report.items()})
        result = make_report([os.path.join(output, "runs")], os.path.join(output, "report"), options,
                             overwrite=True)
        for section in result["protocols"]:
            click.echo(f"Answer: {answer(section)}")
        click.echo(f"{result['runs_used']} runs in the report: {os.path.join(output, 'report', 'report.md')}")
    elif report and seeds:
        click.echo(f"The seeds of this portion are done; the report is written by the run without --seeds, or "
                   f"with: prednet-study report {output} -o REPORT", err=True)
    elif report:
        click.echo(f"This machine's part is done. Merge the study folders with: prednet-study report "
                   f"{output} OTHER_FOLDER... -o REPORT", err=True)


def _plan_text(seeds, plan):
    """A configuration's plan as --dry-run says it: "3 seeds x 2 replicate(s) + 1-ulp baseline"."""
    from prednet_keras.study.spec import seed_list

    if plan.replicate_seeds is None:
        text = f"{len(seeds)} seeds x {plan.replicates} replicate(s)"
    else:
        chosen = [seed for seed in plan.replicate_seeds if seed in set(seeds)]
        text = (f"{len(seeds)} seeds ({len(chosen)} of them x {plan.replicates} replicates: {seed_list(chosen)}; "
                "the others x 1)")
    return text + (" + 1-ulp baseline" if plan.ulp_baseline else "")


@main.command(
    context_settings=CONTEXT,
    short_help="Compare configurations from run folders (one or several machines).",
    epilog="""\b
Examples:
  prednet-study report results/ -o report/
  prednet-study report cpu-box/ gpu-box/ -o report/          # two machines, one report
  prednet-study report results/ -o report/ --metric last_steps:50 --margin 0.001
  prednet-study report docs/study/retraction/runs.tar.xz -o report/   # a packed study, read in place
""",
)
@click.argument("dirs", nargs=-1, required=True, metavar="RESULTS...", type=click.Path(exists=True))
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False),
              help="Report folder: report.md, report.json and the PNG plots go there.")
@click.option("--metric", help="The per-run number compared: a key of the manifests' `metrics` or `result`, or "
              "last_steps:N (mean of the last N per-step losses) [default: the protocol's metric, else "
              "result.final_loss].")
@click.option("--margin", type=click.FloatRange(min=0, min_open=True),
              help="Fixed equivalence margin, in the metric's units [default: --margin-sd x pooled seed SD].")
@click.option("--margin-sd", type=click.FloatRange(min=0, min_open=True), default=0.5, show_default=True,
              help="Margin as a fraction of the pooled seed SD, when --margin is not given.")
@click.option("--alpha", type=click.FloatRange(0, 0.5, min_open=True, max_open=True), default=0.05,
              show_default=True, help="Level of every test (family-wise across pairs).")
@click.option("--power", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.8,
              show_default=True, help="Power the seeds-needed estimates aim for.")
@click.option("--checkpoints", type=click.IntRange(min=1), default=10, show_default=True,
              help="Checkpoints (bins of the per-step loss) the loss curves are tested at.")
@click.option("--curve-test", type=click.Choice(["maxt", "holm"]), default="maxt", show_default=True,
              help="Family-wise control across checkpoints: max-t permutation or Holm.")
@click.option("--permutations", type=click.IntRange(min=100), default=2000, show_default=True,
              help="Permutations for the max-t curve test.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the permutations.")
@click.option("--no-plots", is_flag=True, help="Skip the PNG plots.")
@click.option("--overwrite", is_flag=True, help="Replace an earlier report in the output folder.")
@fail_on_user_errors
def report(dirs, output, metric, margin, margin_sd, alpha, power, checkpoints, curve_test, permutations, seed,
           no_plots, overwrite):
    """Compare configurations from the run folders under RESULTS (folders or tar archives of them).

    Groups runs by protocol and configuration (runtime settings plus machine),
    audits determinism, tests every pair of configurations (paired t and
    Wilcoxon on shared seeds, else Welch and Mann-Whitney; TOST equivalence,
    Levene, Hedges g, Holm), tests the loss curves at checkpoints, estimates
    the seeds needed, and gives a verdict per pair and a one-sentence answer.
    An archive (a packed study's runs.tar.xz) is read in a temporary folder.
    """
    from prednet_keras.study.report import ReportOptions, answer, make_report

    options = ReportOptions(metric=metric, alpha=alpha, power=power, margin=margin, margin_sd=margin_sd,
                            checkpoints=checkpoints, curve_test=curve_test, permutations=permutations, seed=seed,
                            plots=not no_plots)
    result = make_report(list(dirs), output, options, overwrite=overwrite)
    click.echo(f"{result['runs_used']} runs used of {result['runs_found']} found"
               + (f" ({len(result['excluded'])} left out, see report.md)" if result["excluded"] else "") + ".")
    for section in result["protocols"]:
        prefix = f"{section['id']} " if len(result["protocols"]) > 1 else ""
        for config in section["configurations"]:
            summary, audit = config["summary"], config["determinism"]
            flag = "  DETERMINISM DEFECT" if audit["status"] == "defect" else ""
            click.echo(f"  {prefix}{config['id']}  n={summary['n']:<3d} mean {summary['mean']:.6g}  "
                       f"{config['label']}{flag}")
        for pair in section["comparisons"]["pairs"]:
            click.echo(f"  {prefix}{pair['a']} vs {pair['b']}: {pair['verdict']}")
    for warning in result["warnings"]:
        click.echo(f"warning: {warning}", err=True)
    for section in result["protocols"]:
        prefix = f"{section['id']}: " if len(result["protocols"]) > 1 else ""
        click.echo(f"Answer: {prefix}{answer(section)}")
    click.echo(f"Report: {output}/report.md")


@main.command(
    context_settings=CONTEXT,
    short_help="Compare each seed's runs through their large files into DIR/pairs/.",
    epilog="""\b
Example:
  prednet-study pairs docs/study/device/spec.toml -o docs/study/device --remove-incomplete
""",
)
@click.argument("spec_path", metavar="SPEC")
@click.option("-o", "--output", required=True, type=click.Path(exists=True, file_okay=False),
              help="The study folder, its runs/ unpacked with their large files.")
@click.option("--remove-incomplete", is_flag=True, help="Delete the finished runs of every seed that still lacks a "
              "planned run, so that a later portion runs the seed again whole (its pairs need all its runs' files "
              "at once).")
@click.option("--overwrite", is_flag=True, help="Write a seed's pairs again when its file exists.")
@click.option("-j", "--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Seeds compared at once, each in a process of its own (a full-size seed reads about 2 GB).")
@fail_on_user_errors
def pairs(spec_path, output, remove_incomplete, overwrite, workers):
    """Compare every pair of each seed's runs through the files a study's archive does not keep.

    For each seed whose planned runs are all complete, DIR/pairs/seed-NNNN.json.xz
    gets, for every pair of its runs: the RMS difference of their held-out
    predictions (heldout_predictions.npz), the normalised L2 and cosine distance
    of their sampled weights at each snapshot (trajectory.npz), and the first
    update whose logged loss differs. Run it where the runs were trained,
    before their large files are dropped and the runs packed.
    """
    from prednet_keras.study.report.seed_pairs import remove_runs, write_seed_pairs
    from prednet_keras.study.spec import load_spec, resolve_spec_path

    spec = load_spec(resolve_spec_path(spec_path))
    result = write_seed_pairs(output, spec.planned_runs(), overwrite=overwrite, workers=workers)
    click.echo(f"pairs written for {len(result['written'])} seed(s), {len(result['kept'])} already there, "
               f"{len(result['incomplete'])} incomplete.")
    if remove_incomplete and result["incomplete"]:
        incomplete = set(result["incomplete"])
        seed_of = {run.key: run.seed for run in spec.planned_runs() if run.seed in incomplete}
        removed = remove_runs(output, list(seed_of))
        if removed:
            seeds = sorted({seed_of[key] for key in removed})
            click.echo(f"removed {len(removed)} finished run(s) of seed(s) {', '.join(map(str, seeds))}, left "
                       "incomplete: a later portion runs them again whole.")


@main.command(
    context_settings=CONTEXT,
    short_help="The pre-registered confirmatory analysis of a study's runs, as a plan file fixes it.",
    epilog="""\b
Example:
  prednet-study confirm results/device --plan docs/study/device/confirmatory-plan.toml -o confirmatory/
""",
)
@click.argument("sources", nargs=-1, required=True, metavar="DIR_OR_ARCHIVE...", type=click.Path(exists=True))
@click.option("--plan", "plan_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The plan (TOML): hypotheses, metrics, smallest effect, alpha, noise floors and rule, deviations "
              "(docs/study/device/confirmatory-plan.toml shows every key).")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False),
              help="Folder for confirmatory.json, confirmatory.md and confirmatory.png (and, with pairs, "
              "confirmatory-weights.png).")
@click.option("--no-plot", is_flag=True, help="Skip the PNGs.")
@click.option("--overwrite", is_flag=True, help="Replace an earlier analysis in the output folder.")
@fail_on_user_errors
def confirm(sources, plan_path, output, no_plot, overwrite):
    """The confirmatory analysis of the runs under DIR_OR_ARCHIVE (run folders, a packed study's folder or its
    runs.tar.xz), exactly as the plan file fixes it.

    Per hypothesis and metric, on the seeds complete in both arms: the per-seed log-ratio of the arm to its
    reference, its mean with t and bootstrap intervals, the paired t-test (Wilcoxon beside it), TOST at the
    smallest effect of interest, Holm over the family for each, the verdict in the plan's words; the noise
    floors and the noise rule; the deviations the plan declares. Where a study folder has pairs/ (prednet-study
    pairs), the secondary measures of each contrast and floor beside, reported, not tested: held-out
    prediction disagreement, weight distance over training, the first update whose loss differs.
    """
    from prednet_keras.study.report.confirmatory_report import summary_lines, write_confirmatory

    result = write_confirmatory(list(sources), plan_path, output, plot=not no_plot, overwrite=overwrite)
    click.echo(f"{result['runs']['used']} runs of the plan's arms used, of {result['runs']['found']} found"
               + (f" ({len(result['runs']['left_out'])} left out, see confirmatory.md)"
                  if result["runs"]["left_out"] else "") + ".")
    for line in summary_lines(result):
        click.echo(f"  {line}")
    click.echo(f"Confirmatory analysis: {os.path.join(output, 'confirmatory.md')}")


@main.command(
    context_settings=CONTEXT,
    short_help="Pack a study folder's finished runs into DIR/runs.tar.xz.",
    epilog="""\b
Examples:
  prednet-study pack results/quick                 # runs/ stays; runs.tar.xz beside it
  prednet-study pack docs/study/retraction --remove   # how the published studies are kept
""",
)
@click.argument("study_dir", metavar="DIR", type=click.Path(exists=True, file_okay=False))
@click.option("--remove", is_flag=True, help="Delete the packed run folders once the archive is written and read "
              "back (unfinished runs stay).")
@fail_on_user_errors
def pack(study_dir, remove):
    """Pack the finished runs of DIR/runs/ into one xz archive, DIR/runs.tar.xz.

    The archive holds runs/<configuration>/<run>/ as the study wrote them, in a
    fixed order with normalised owners and times (the same runs give the same
    bytes). `prednet-study report DIR/runs.tar.xz` reads it as it is;
    `prednet-study unpack DIR` restores runs/ to resume or extend the study.
    An existing archive is replaced only when runs/ holds all of its runs.
    """
    from prednet_keras.study.archive import pack as pack_runs

    result = pack_runs(study_dir, remove=remove)
    click.echo(f"{result['runs']} runs in {result['archive']} ({result['bytes'] / 1e6:.2f} MB)"
               + ("; the run folders removed" if remove else "") + ".")
    for folder in result["left_out"]:
        click.echo(f"not packed (unfinished): {folder}", err=True)


@main.command(
    context_settings=CONTEXT,
    short_help="Unpack DIR/runs.tar.xz into DIR/runs/ (to resume or extend a packed study).",
    epilog="""\b
Example:
  prednet-study unpack docs/study/retraction
  prednet-study run docs/study/retraction/spec.toml -o docs/study/retraction   # then resume or extend it
""",
)
@click.argument("study_dir", metavar="DIR", type=click.Path(exists=True, file_okay=False))
@fail_on_user_errors
def unpack(study_dir):
    """Unpack DIR/runs.tar.xz into DIR/runs/, so that `prednet-study run` sees its finished runs.

    Members are extracted with tarfile's "data" filter (nothing outside DIR, no
    links out of it). Runs already in runs/ are kept when they equal the
    archived ones; a run that differs stops the unpacking before anything moves.
    """
    from prednet_keras.study.archive import unpack as unpack_runs

    result = unpack_runs(study_dir)
    click.echo(f"{result['unpacked']} runs unpacked into {os.path.join(study_dir, 'runs')}"
               + (f" ({result['present']} were there already)" if result["present"] else "") + ".")


if __name__ == "__main__":
    main()
