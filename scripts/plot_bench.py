"""Plots frames/s of several prednet-bench JSON files together (one figure).

    python scripts/plot_bench.py docs/benchmarks/scaling/h200-jax-batch.json.xz \
        docs/benchmarks/scaling/h200-jax-sizes.json.xz -o docs/benchmarks/scaling/h200-jax-scaling.png

prednet-bench --plot draws one invocation's results; sweeps split over several
invocations (or cut short by a time limit, which keeps the finished
configurations in the JSON) are drawn together here. A file ending in .xz is
read decompressed (docs/ keeps its raw JSON so). scripts/port_bench.py's JSON
files (the PyTorch port timed beside ours) may be given too: their frames/s,
averaged per batch size over the files, are drawn as one dashed line.
"""

import argparse
import json
import lzma
import sys

from prednet_keras.bench import plot_results

PORT = "leido/pytorch-prednet"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", help="prednet-bench --json files")
    parser.add_argument("-o", "--output", required=True, help="PNG to write")
    parser.add_argument("--title", default="prednet-bench throughput (synthetic input)",
                        help="the figure's title (say the machine and what was compared)")
    args = parser.parse_args()
    results, port = [], {}
    for path in args.inputs:
        try:
            with (lzma.open(path, "rt") if path.endswith(".xz") else open(path)) as handle:
                document = json.load(handle)
            if "port" in document:  # scripts/port_bench.py
                port.setdefault(document["config"]["batch_size"], []).append(document["fps"])
            else:
                results += document["results"]
        except (OSError, ValueError, KeyError, TypeError, lzma.LZMAError) as exc:
            sys.exit(f"error: {path}: not a prednet-bench or port_bench JSON file ({exc})")
    others = {}
    if port:
        others[f"port ({PORT})"] = [(batch, sum(fps) / len(fps)) for batch, fps in port.items()]
    plot_results(results, args.output, title=args.title, others=others)
    print(f"{args.output}: {len(results)} configurations" + (f", the port at {len(port)} batch sizes" if port else ""))


if __name__ == "__main__":
    main()
