"""How long a study takes to start its first run: seconds from `prednet-study run` to its first run folder, and
to the last seed's starting point (seed.json). The study is interrupted (SIGINT, as Ctrl-C) once both are there;
with --to-end it runs to its end instead, and the JSON adds the wall time and when each run's training session
started (from its manifest).

    python scripts/study_start_time.py --checkout . --json new.json -- paper --only cpu-torch-1-thread -j 2
    git worktree add /tmp/old COMMIT && python scripts/study_start_time.py --checkout /tmp/old --json old.json -- ...

--checkout runs that source tree's prednet_keras (PYTHONPATH), so two commits compare on one machine.
"""
import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", default=".", help="the source tree whose prednet_keras runs")
    parser.add_argument("--json", required=True, help="where the figures go (must not exist)")
    parser.add_argument("--limit", type=float, default=120, help="seconds before giving up")
    parser.add_argument("--to-end", action="store_true", help="let the study finish; record its wall time")
    parser.add_argument("study_args", nargs="+", help="prednet-study run's arguments, without -o")
    args = parser.parse_args(argv)
    if os.path.exists(args.json):
        sys.exit(f"study_start_time: {args.json}: already exists; not overwritten")
    checkout = os.path.abspath(args.checkout)
    commit = subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as work:
        output = os.path.join(work, "study")
        environment = dict(os.environ, PYTHONPATH=checkout)
        environment.pop("KERAS_BACKEND", None)
        command = [sys.executable, "-m", "prednet_keras.cli.study", "run", *args.study_args, "-o", output,
                   "--no-report", "-q"]
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=work, env=environment, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        first_run = None
        while time.perf_counter() - started < args.limit and process.poll() is None:
            if first_run is None and glob.glob(os.path.join(output, "runs", "*", ".partial-*")):
                first_run = time.perf_counter() - started
            seeds = glob.glob(os.path.join(output, "seeds", "*", "seed.json"))
            if not args.to_end and first_run is not None and seeds and _all_seeds_written(output, seeds):
                break
            time.sleep(0.05)
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
        wall = time.perf_counter() - started
        seeds = glob.glob(os.path.join(output, "seeds", "*", "seed.json"))
        wall_start = time.time() - (time.perf_counter() - started)
        last_seed = max(os.path.getmtime(path) for path in seeds) - wall_start if seeds else None
        sessions = _session_starts(output, wall_start) if args.to_end else None
    result = {"command": ["python", "scripts/study_start_time.py"] + (sys.argv[1:] if argv is None else argv),
              "checkout_commit": commit.strip(), "first_run_folder_s": first_run, "last_seed_json_s": last_seed,
              "seeds_written": len(seeds), "exit_status": process.returncode, "stderr_tail": stderr[-500:]}
    if args.to_end:
        result.update(wall_s=wall, session_started_s=sessions)
    with open(args.json, "x") as handle:
        json.dump(result, handle, indent=1)
    print(json.dumps({key: result[key] for key in ("first_run_folder_s", "last_seed_json_s", "seeds_written",
                                                   "wall_s") if key in result}))


def _session_starts(output, wall_start):
    """{run: seconds from the command's start to its training session's start} of the finished runs."""
    from datetime import datetime

    starts = {}
    for path in sorted(glob.glob(os.path.join(output, "runs", "*", "seed-*", "manifest.json"))):
        with open(path) as handle:
            started = json.load(handle)["sessions"][0]["started"]
        run = os.path.relpath(os.path.dirname(path), os.path.join(output, "runs"))
        starts[run] = datetime.strptime(started, "%Y-%m-%dT%H:%M:%S%z").timestamp() - wall_start
    return starts


def _all_seeds_written(output, seeds):
    """Whether every seed the study planned has its seed.json (study.json lists the spec's seeds)."""
    try:
        with open(os.path.join(output, "study.json")) as handle:
            planned = json.load(handle)["spec"]["seeds"]
    except (OSError, ValueError, KeyError):
        return False
    return len(seeds) >= (len(planned) if isinstance(planned, list) else int(planned))


if __name__ == "__main__":
    main()
