"""The local executor: a study's runs as a pool of training processes on this machine.

Several processes may share one GPU (JAX is started without preallocation). Each training process gets
SIGTERM when the study process dies (childproc), and on any exception here (Ctrl-C included) the running
ones are stopped and waited for, so a stopped study leaves nothing writing into its folder.

JAX runs share the study's compilation cache (compile_cache). So that the others load what one compiled
instead of all compiling at once, a JAX configuration runs one run alone until that run has recorded its first
update in history.csv (its training step is then compiled and in the cache) or one of its runs has finished in
this invocation; runs of other configurations fill the free workers meanwhile. A run starts once its seed's
starting point is written: the study's first runs train while the child process makes the later seeds'.
"""

import os
import signal
import subprocess
import time

from prednet_keras import compile_cache, runs
from prednet_keras.study.one_run import LOG, finish_run, prepare_run

__all__ = ["LocalExecutor"]


class _Running:
    def __init__(self, run, process, log, folder, started):
        self.run = run
        self.process = process
        self.log = log
        self.folder = folder
        self.started = started


def _start(spec, study_dir, run, seed_record, command, share_compilation, quiet_child=True):
    from prednet_keras import worker

    partial = prepare_run(spec, study_dir, run, seed_record, command)
    runtime_config = run.configuration.runtime_config()
    env = compile_cache.environment(study_dir, runtime_config) if share_compilation else {}
    log = open(partial / LOG, "w", encoding="utf-8")
    # childproc: SIGTERM when the study process dies, so it leaves no orphan writing here.
    process = worker.start(partial, runtime_config, quiet=quiet_child, env=env, stdout=log,
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
        share_compilation: JAX runs share the study's compilation cache (compile_cache); False compiles in
            every process.
    """

    name = "local"

    def __init__(self, workers, share_compilation=True):
        self.workers = workers
        self.share_compilation = share_compilation

    def check(self, configurations):
        """Nothing to refuse ahead: every configuration runs here or fails with its own message."""

    def shared_cache(self, study_dir, configurations):
        """The compilation cache folder these configurations' runs will share, or None."""
        if self.share_compilation and any(compile_cache.applies(c.runtime_config()) for c in configurations):
            return compile_cache.folder(study_dir)
        return None

    def execute(self, spec, study_dir, pending, points, command, progress, outcome, done_before):
        """Runs `pending`, each run once its seed's starting point is in `points` (a
        starting_points.StartingPoints); fills `outcome` (see runner.run_study)."""
        _execute(spec, study_dir, pending, points, self.workers, command, progress, outcome, done_before,
                 self.share_compilation)


def _has_trained(folder):
    """Whether the run writing into `folder` has recorded an update: history.csv holds a row past its header."""
    try:
        with open(runs.RunFolder(folder).history_path, encoding="utf-8") as handle:
            return len(handle.readlines(1 << 16)) > 1
    except OSError:
        return False


def _waits_for_compilation(run, running, compiled):
    """Whether `run` should wait: its configuration compiles for the shared cache (JAX) and one of its runs is
    running while none has recorded an update or finished yet."""
    name = run.configuration.name
    return (name not in compiled and compile_cache.applies(run.configuration.runtime_config())
            and any(item.run.configuration.name == name for item in running))


def _next_run(queue, running, compiled, share_compilation, points):
    """Takes the first run of `queue` that may start now (its seed's starting point is written, and it need
    not wait for a compilation), or returns None."""
    for index, run in enumerate(queue):
        if share_compilation and _waits_for_compilation(run, running, compiled):
            continue
        if points.get(run.seed) is not None:
            return queue.pop(index)
    return None


def _execute(spec, study_dir, pending, points, workers, command, progress, outcome, done_before,
             share_compilation=True):
    queue = list(pending)
    running = []
    compiled = set()  # configurations with a run that trained here: their training programs are in the cache
    total = done_before + len(pending)
    done = done_before
    warned = False
    try:
        while queue or running:
            while queue and len(running) < workers:
                run = _next_run(queue, running, compiled, share_compilation, points)
                if run is None:
                    break
                if run.configuration.name in outcome["skipped"]:
                    continue
                running.append(_start(spec, study_dir, run, points.get(run.seed), command,
                                      share_compilation))
                if progress:
                    progress.run_started(run)
                threads = sum(_cpu_threads(r.run.configuration) for r in running)
                if not warned and len(running) > 1 and threads > (os.cpu_count() or 1):
                    warned = True
                    if progress:
                        progress.message(f"warning: {len(running)} runs at once ask for {threads} CPU threads on "
                                         f"{os.cpu_count()} cores; CPU timings will be slower than alone.")
            time.sleep(0.2)
            if share_compilation and queue:
                compiled.update(item.run.configuration.name for item in running
                                if item.run.configuration.name not in compiled and _has_trained(item.folder))
            for item in list(running):
                code = item.process.poll()
                if code is None:
                    continue
                running.remove(item)
                compiled.add(item.run.configuration.name)
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
