"""Wall time of every console script's --help, each in a fresh process, as a user starts it.

    .venv/bin/python scripts/bench_help.py [--repeats 5] [--json docs/benchmarks/cpu2-help.json]

Runs the installed entry points (beside this interpreter) from a temporary folder with KERAS_BACKEND
unset, `--repeats` times each after one untimed start (which warms the file cache), and prints the
median and the slowest. The goal is under 1 s on 2 cores: --help imports no deep-learning framework.
`import prednet_keras` is timed the same way, as the floor under every command.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPTS = ("prednet-import", "prednet-data", "prednet-env", "prednet-train", "prednet-eval", "prednet-study",
           "prednet-bench")


def wall_times(command, repeats, cwd, env):
    subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=True)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="also write the figures and the machine to this file")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    bin_dir = Path(sys.executable).parent
    commands = {"import prednet_keras": [sys.executable, "-c", "import prednet_keras"]}
    commands.update({f"{name} --help": [str(bin_dir / name), "--help"] for name in SCRIPTS})
    rows = {}
    with tempfile.TemporaryDirectory() as cwd:
        for label, command in commands.items():
            times = wall_times(command, args.repeats, cwd, env)
            rows[label] = {"median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3),
                           "times_s": [round(t, 3) for t in times]}
            print(f"{label:<24} median {rows[label]['median_s']:.2f} s   slowest {rows[label]['max_s']:.2f} s",
                  flush=True)
    if args.json:
        record = {
            "command": "python scripts/bench_help.py " + " ".join(sys.argv[1:]),
            "repeats": args.repeats,
            "machine": {"cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
                        "processor": platform.processor() or platform.machine(),
                        "python": platform.python_version()},
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "figures": rows,
        }
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
