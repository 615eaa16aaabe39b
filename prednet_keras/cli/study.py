"""prednet-study: run one training across a matrix of configurations, and decide with statistics.

    prednet-study run SPEC -o DIR        (to come: the spec, runner and resume live in prednet_keras.study)
    prednet-study report DIR... -o REPORT

Each subcommand only parses, calls prednet_keras.study and prints; add `run`
as another `@main.command` below, next to `report`.
"""

import click

from prednet_keras.cli.common import fail_on_user_errors

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


@click.group(context_settings=CONTEXT)
def main():
    """Controlled study: does the hardware or software configuration change what PredNet learns?"""


@main.command(
    context_settings=CONTEXT,
    short_help="Compare configurations from run folders (one or several machines).",
    epilog="""\b
Examples:
  prednet-study report results/ -o report/
  prednet-study report cpu-box/ gpu-box/ -o report/          # two machines, one report
  prednet-study report results/ -o report/ --metric last_steps:50 --margin 0.001
""",
)
@click.argument("dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
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
@click.option("--bootstrap", type=click.IntRange(min=100), default=2000, show_default=True,
              help="Bootstrap resamples for the CI of Hedges' g.")
@click.option("--permutations", type=click.IntRange(min=100), default=2000, show_default=True,
              help="Permutations for the max-t curve test.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap and permutations.")
@click.option("--no-plots", is_flag=True, help="Skip the PNG plots.")
@click.option("--overwrite", is_flag=True, help="Replace an earlier report in the output folder.")
@fail_on_user_errors
def report(dirs, output, metric, margin, margin_sd, alpha, power, checkpoints, curve_test, bootstrap,
           permutations, seed, no_plots, overwrite):
    """Compare configurations from the run folders under DIRS (one or several machines).

    Groups runs by protocol and configuration (runtime settings plus machine),
    audits determinism, tests every pair of configurations (Welch, Mann-Whitney,
    Levene, Hedges g, Holm, TOST equivalence, paired tests on shared seeds),
    tests the loss curves at checkpoints, estimates the seeds needed, and gives
    a verdict per pair.
    """
    from prednet_keras.study.report import ReportOptions, make_report

    options = ReportOptions(metric=metric, alpha=alpha, power=power, margin=margin, margin_sd=margin_sd,
                            checkpoints=checkpoints, curve_test=curve_test, bootstrap=bootstrap,
                            permutations=permutations, seed=seed, plots=not no_plots)
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
    click.echo(f"Report: {output}/report.md")


if __name__ == "__main__":
    main()
