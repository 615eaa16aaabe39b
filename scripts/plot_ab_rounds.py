"""Draws an A/B timing's rounds as one PNG: per round, the median training step before, after and the port's.

A change timed in rounds on a shared host (each round: the port, the code before, the code after, each its own
process) reads best round by round, since the host drifts between rounds; plot_bench.py draws frames/s against
batch size, where before and after share a line. Each --round gives a label, then prednet-bench JSON files of the
code before and after, then any scripts/port_bench.py JSON files of that round (their median steps averaged; a
round without the port draws no port bar):

    python scripts/plot_ab_rounds.py -o steps.png --title "H100: eager torch, batch 4" \
        --round "b4 r1" call-1/b4-r1/torch-eager-before-float32-b4.json call-1/b4-r1/torch-eager-float32-b4.json \
            call-1/b4-r1/port-b4-r1.json call-1/b4-r1/port-b4-r2.json \
        --round "b4 r2" ...
"""

import argparse
import json
import statistics
import sys



def median_step_ms(path):
    with open(path) as handle:
        document = json.load(handle)
    if "step_ms_median" in document:  # port_bench.py
        return document["step_ms_median"]
    (result,) = document["results"]
    return result["train"]["step_ms"]["median_ms"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--round", nargs="+", action="append", required=True, metavar="LABEL BEFORE AFTER [PORT]",
                        help="a round's label, its before and after JSON, then the port's JSON files, if any")
    parser.add_argument("-o", "--output", required=True, help="PNG to write")
    parser.add_argument("--title", required=True, help="what was compared, on which machine")
    args = parser.parse_args(argv)
    rounds = []
    for given in args.round:
        if len(given) < 3:
            parser.error(f"--round {' '.join(given)}: a label, then the before and after files")
        label, before, after, *ports = given
        try:
            port = statistics.mean(median_step_ms(path) for path in ports) if ports else float("nan")
            rounds.append((label, median_step_ms(before), median_step_ms(after), port))
        except (OSError, ValueError, KeyError) as error:  # not there, not JSON, or not a timing's JSON
            parser.error(f"--round {label}: {error.__class__.__name__}: {error} (prednet-bench or port_bench.py "
                         "JSON files expected)")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(max(4.5, 1.2 * len(rounds) + 2), 3.6), dpi=100)
    axes = figure.add_subplot()
    width = 0.27
    for offset, (name, column, colour) in enumerate((("before", 1, "#9aa5b1"), ("after", 2, "#1f77b4"),
                                                     ("the port (mean of its rounds)", 3, "#7f7f7f"))):
        positions = [index + (offset - 1) * width for index in range(len(rounds))]
        axes.bar(positions, [row[column] for row in rounds], width, label=name, color=colour,
                 hatch="//" if column == 3 else None, edgecolor="white")
    axes.set_xticks(range(len(rounds)), [row[0] for row in rounds])
    axes.set_ylabel("median training step (ms), lower is faster")
    axes.set_title(args.title, fontsize=10)
    tallest = max(value for row in rounds for value in row[1:] if value == value)
    axes.set_ylim(0, tallest * 1.3)  # room for the legend above the bars
    axes.legend(fontsize=8, loc="upper left", ncol=3)
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(args.output)
    for label, before, after, port in rounds:
        print(f"{label}: before {before:.1f} ms, after {after:.1f} ms" + (f", the port {port:.1f} ms" if port == port else ""))


if __name__ == "__main__":
    sys.exit(main())
