"""The local executor: a study's runs as a pool of training processes on this machine.

Several processes may share one GPU (JAX is started without preallocation). Each training process gets
SIGTERM when the study process dies (childproc), and on any exception here (Ctrl-C included) the running
ones are stopped and waited for, so a stopped study leaves nothing writing into its folder.
"""

import os
import signal
import subprocess
import time

from prednet_keras.study.one_run import LOG, finish_run, prepare_run

__all__ = ["LocalExecutor"]


class _Running:
    def __init__(self, run, process, log, folder, started):
        self.run = run
        self.process = process
        self.log = log
        self.folder = folder
        self.started = started


def _start(spec, study_dir, run, seed_record, command, quiet_child=True):
    from prednet_keras import worker

    partial = prepare_run(spec, study_dir, run, seed_record, command)
    config = run.configuration
    log = open(partial / LOG, "w", encoding="utf-8")
    # childproc: SIGTERM when the study process dies, so it leaves no orphan writing here.
    process = worker.start(partial, config.runtime_config(), quiet=quiet_child, stdout=log,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return _Running(run, process, log, partial, time.perf_counter())


def _finish(study_dir, running, code):
    """Moves a finished run to its final name, or says why it failed."""
    running.log.close()
    seconds = time.perf_counter() - running.started
    return finish_run(study_dir, running.run, running.folder, code, seconds)


def _cpu_threads(config):
    runtime = config.runtime
    if str(runtime.get("device", "cpu")).startswith("cpu"):
        return runtime.get("threads") or os.cpu_count() or 1
    return 1


class LocalExecutor:
    """Runs the pending runs `workers` at a time, in this machine's processes.

    Args:
        workers: runs at once.
    """

    name = "local"

    def __init__(self, workers):
        self.workers = workers

    def check(self, configurations):
        """Nothing to refuse ahead: every configuration runs here or fails with its own message."""

    def execute(self, spec, study_dir, pending, records, command, progress, outcome, done_before):
        """Runs `pending` (see runner.run_study for the arguments); fills `outcome`."""
        _execute(spec, study_dir, pending, records, self.workers, command, progress, outcome, done_before)


def _execute(spec, study_dir, pending, records, workers, command, progress, outcome, done_before):
    queue = list(pending)
    running = []
    total = done_before + len(pending)
    done = done_before
    warned = False
    try:
        while queue or running:
            while queue and len(running) < workers:
                run = queue.pop(0)
                if run.configuration.name in outcome["skipped"]:
                    continue
                running.append(_start(spec, study_dir, run, records[run.seed], command))
                if progress:
                    progress.run_started(run)
                threads = sum(_cpu_threads(r.run.configuration) for r in running)
                if not warned and len(running) > 1 and threads > (os.cpu_count() or 1):
                    warned = True
                    if progress:
                        progress.message(f"warning: {len(running)} runs at once ask for {threads} CPU threads on "
                                         f"{os.cpu_count()} cores; CPU timings will be slower than alone.")
            time.sleep(0.2)
            for item in list(running):
                code = item.process.poll()
                if code is None:
                    continue
                running.remove(item)
                result = _finish(study_dir, item, code)
                if result.status == "done":
                    done += 1
                    outcome["done"].append(result)
                else:
                    outcome["failed"].append(result)
                    name = item.run.configuration.name
                    outcome["skipped"].setdefault(name, result.message)
                if progress:
                    progress.run_finished(result, done, total)
    except BaseException:
        for item in running:
            if item.process.poll() is None:
                item.process.send_signal(signal.SIGTERM)
        for item in running:
            try:
                item.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                item.process.kill()
            item.log.close()
        raise
    outcome["pending"] = total - done
