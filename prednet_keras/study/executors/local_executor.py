"""The local executor: a study's runs as a pool of training processes on this machine.

Several processes may share one GPU (JAX is started without preallocation). Each training process gets
SIGTERM when the study process dies (childproc), and on any exception here (Ctrl-C included) the running
ones are stopped and waited for, so a stopped study leaves nothing writing into its folder.

JAX runs share the study's compilation cache (compile_cache). So that the others load what one compiled
instead of all compiling at once, a JAX configuration trains one run alone until that run has recorded its first
update in history.csv (its training step is then compiled and in the cache) or one of its runs has finished in
this invocation. Runs of other configurations fill the free workers meanwhile; workers still free take the
configuration's next runs, started but held at a gate (compile_cache.GATE_ENV) once their framework is up, so
that their start-up overlaps the compilation. The gate opens when the program is in the cache; if the first run
fails instead, the held runs are stopped unstarted, as the configuration's queued runs are skipped.

A run starts once its seed's starting point is written: the study's first runs train while the child process
makes the later seeds'.
"""

import functools
import os
import shutil
import signal
import subprocess
import time

from prednet_keras.runtime import compile_cache
from prednet_keras.session import folder as run_folders
from prednet_keras.study.executors.one_run import LOG, finish_run, prepare_run

__all__ = ["LocalExecutor"]


class _Running:
    def __init__(self, run, process, log, folder, started, gate=None, cpus=None):
        self.run = run
        self.process = process
        self.log = log
        self.folder = folder
        self.started = started
        self.gate = gate  # the gate file it was started held at, or None
        self.cpus = cpus  # the CPUs its process was held to, or None (all of this process's)


def _cpus_for(config, running):
    """The CPUs a run with a thread count starts on: the least used by the runs already running (distinct
    ones while there are enough). None: a run without a thread count, or one that asks for all of them.

    JAX sets its threads by pinning the process to the first CPUs it may use, so without this every
    one-thread JAX run of a study would share the first core; torch's threads get cores of their own too.
    """
    threads = config.runtime.get("threads")
    if not threads or not hasattr(os, "sched_getaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if threads >= len(allowed):
        return None
    use = {cpu: 0 for cpu in allowed}
    for item in running:
        for cpu in item.cpus or ():
            if cpu in use:
                use[cpu] += 1
    return sorted(sorted(allowed, key=lambda cpu: (use[cpu], cpu))[:threads])


def _start(spec, study_dir, run, seed_record, command, share_compilation, gate=None, quiet_child=True, cpus=None):
    from prednet_keras.session import worker

    partial = prepare_run(spec, study_dir, run, seed_record, command)
    runtime_config = run.configuration.runtime_config()
    env = compile_cache.environment(study_dir, runtime_config) if share_compilation else {}
    if gate is not None:
        env.update(compile_cache.gate_environment(gate))
    log = open(partial / LOG, "w", encoding="utf-8")
    # childproc: SIGTERM when the study process dies, so it leaves no orphan writing here.
    held = {} if cpus is None else {"preexec_fn": functools.partial(os.sched_setaffinity, 0, cpus)}
    process = worker.start(partial, runtime_config, quiet=quiet_child, env=env, stdout=log,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **held)
    return _Running(run, process, log, partial, time.perf_counter(), gate, cpus)


def _reap(item):
    """Waits for a run's process told to stop (SIGTERM lets it record the interruption), killing it after
    30 s, and closes its log."""
    try:
        item.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        item.process.kill()
        item.process.wait()
    item.log.close()


def _stop_held(item):
    """Stops a run held at its gate (its configuration failed before compiling) and removes its folder: it
    never trained, and stays pending as the configuration's queued runs do."""
    item.process.send_signal(signal.SIGTERM)
    _reap(item)
    shutil.rmtree(item.folder, ignore_errors=True)


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
        """Refuses, before anything is written or trained, configurations whose backend this machine lacks:
        otherwise the study would train the others' runs and die at the first run of such an arm."""
        from prednet_keras.study.spec import SpecError

        missing = backends_missing(configurations)
        if missing:
            from prednet_keras.backends import named

            arms = "; ".join(f"{name} needs {named(backend).display_name} ({backend})"
                             for name, backend in missing.items())
            packages = " ".join(sorted(set(missing.values())))
            raise SpecError(f"not installed here: {arms}. Install it (pip install {packages}), or run the other "
                            "configurations here with --only and these on a machine that has it.")

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


def backends_missing(configurations):
    """{configuration name: its backend} for the configurations whose backend is not installed here."""
    from prednet_keras._backend_choice import backend_installed

    return {c.name: c.runtime["backend"] for c in configurations
            if c.runtime.get("backend") and not backend_installed(c.runtime["backend"])}


def _has_trained(folder):
    """Whether the run writing into `folder` has recorded an update: history.csv holds a row past its header."""
    try:
        with open(run_folders.RunFolder(folder).history_path, encoding="utf-8") as handle:
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
    """Takes the run of `queue` to start now: the first whose seed's starting point is written and that need
    not wait for a compilation; failing that, the first that waits, to start held at its configuration's gate.

    Returns:
        (run, held), or (None, False) when no run's starting point is written yet.
    """
    waiting = None
    for index, run in enumerate(queue):
        if points.get(run.seed) is None:
            continue
        if share_compilation and _waits_for_compilation(run, running, compiled):
            waiting = index if waiting is None else waiting
            continue
        return queue.pop(index), False
    if waiting is not None:
        return queue.pop(waiting), True
    return None, False


class _Gates:
    """One gate file per configuration whose runs were started held, in DIR/.start-gates/. The study's lock
    makes the folder this invocation's own: what a killed invocation left there is removed first."""

    FOLDER = ".start-gates"

    def __init__(self, study_dir):
        self._folder = os.path.join(study_dir, self.FOLDER)
        shutil.rmtree(self._folder, ignore_errors=True)
        self._names = {}
        self._opened = set()

    def path(self, name):
        os.makedirs(self._folder, exist_ok=True)
        return os.path.join(self._folder, self._names.setdefault(name, f"configuration-{len(self._names)}"))

    def open(self, name):
        if name in self._names and name not in self._opened:
            self._opened.add(name)
            with open(self.path(name), "w"):
                pass

    def is_open(self, item):
        return item.gate is None or os.path.exists(item.gate)

    def remove(self):
        shutil.rmtree(self._folder, ignore_errors=True)


def _execute(spec, study_dir, pending, points, workers, command, progress, outcome, done_before,
             share_compilation=True):
    queue = list(pending)
    running = []
    compiled = set()  # configurations with a run that trained here: their training programs are in the cache
    total = done_before + len(pending)
    done = done_before
    warned = False
    gates = _Gates(study_dir)
    try:
        while queue or running:
            while queue and len(running) < workers:
                run, held = _next_run(queue, running, compiled, share_compilation, points)
                if run is None:
                    break
                name = run.configuration.name
                if name in outcome["skipped"]:
                    continue
                running.append(_start(spec, study_dir, run, points.get(run.seed), command, share_compilation,
                                      gate=gates.path(name) if held else None,
                                      cpus=_cpus_for(run.configuration, running)))
                if progress:
                    progress.run_started(run)
                threads = sum(_cpu_threads(r.run.configuration) for r in running)
                if not warned and len(running) > 1 and threads > (os.cpu_count() or 1):
                    warned = True
                    if progress:
                        progress.message(f"warning: {len(running)} runs at once ask for {threads} CPU threads on "
                                         f"{os.cpu_count()} cores; CPU timings will be slower than alone.")
            time.sleep(0.2)
            if share_compilation:
                compiled.update(item.run.configuration.name for item in running
                                if item.run.configuration.name not in compiled and _has_trained(item.folder))
            for item in list(running):
                code = item.process.poll() if item in running else None  # (a held run stopped just before)
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
                    for held in [other for other in running
                                 if other.run.configuration.name == name and not gates.is_open(other)]:
                        running.remove(held)
                        _stop_held(held)
                if progress:
                    progress.run_finished(result, done, total)
            for name in compiled - set(outcome["skipped"]):
                gates.open(name)
    except BaseException:
        for item in running:
            if item.process.poll() is None:
                item.process.send_signal(signal.SIGTERM)
        for item in running:
            _reap(item)
        raise
    finally:
        gates.remove()
    outcome["pending"] = total - done
