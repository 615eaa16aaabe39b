"""Helpers for the runtime tests: child processes, run several at a time.

Every framework-dependent check runs in its own child process, because a process
can be configured only once and the pytest process has Keras imported already.
"""

import concurrent.futures
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from prednet_keras import runtime

CHILD = Path(__file__).with_name("child_tasks.py")
TIMEOUT = 400


def installed(backend):
    """Whether a backend's framework can be imported here."""
    return importlib.util.find_spec(backend) is not None


def gpu_may_exist():
    """True where a GPU could be visible: then "no GPU" tests do not apply."""
    return shutil.which("nvidia-smi") is not None


def run_task(env, task, *args, timeout=TIMEOUT):
    """Runs child_tasks.py TASK in a child with environment `env`; its JSON result.

    Args:
        env: a RuntimeConfig (its environment_for is used) or a full environment dict.
        task: task name in child_tasks.py.
        *args: task arguments.
    """
    if isinstance(env, runtime.RuntimeConfig):
        env = runtime.environment_for(env)
    with tempfile.TemporaryDirectory(prefix="prednet-runtime-test-") as scratch:
        result_path = os.path.join(scratch, "result.json")
        completed = subprocess.run(
            [sys.executable, str(CHILD), task, result_path, *map(str, args)],
            env=env, capture_output=True, text=True, timeout=timeout,
        )
        if not os.path.exists(result_path):
            raise AssertionError(
                f"child {task} wrote no result (exit {completed.returncode}):\n{completed.stderr[-3000:]}"
            )
        with open(result_path) as handle:
            return json.load(handle)


def run_tasks(jobs):
    """Runs several child tasks concurrently.

    Args:
        jobs: dict name -> (env, task, *args).

    Returns:
        dict name -> result.
    """
    workers = max(2, min(len(jobs), os.cpu_count() or 2))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(run_task, *job) for name, job in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


def ok(result):
    """The result of a child that must have succeeded (its error otherwise)."""
    assert result["ok"], f"{result.get('error_type')}: {result.get('error')}\n{result.get('traceback', '')}"
    return result
