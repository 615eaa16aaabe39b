"""`prednet-study run`: every run of a spec, each in its own process, resumable.

    DIR/
      study.json                     the spec as run (merged over invocations), and each invocation
      spec.toml                      the spec file as first given
      seeds/seed-NNNN/               each seed's shared starting point (starting_points.py)
      runs/<configuration>/seed-NNNN-rK/      finished run folders (prednet-train's layout + log.txt)
      runs/<configuration>/.partial-seed-...  a run in progress (or one that failed: kept to read its log)
      runs.tar.xz                    finished runs packed (`prednet-study pack`, archive.py); unpack to resume
      report/                        `prednet-study report`, made when every run is done

Resuming is running the same command again: finished run folders are never
touched; partial ones (a run that was killed, or failed) are deleted and the
run starts again from its seed's starting point. A run folder gets its final
name only once its training process has finished and its manifest says
complete and names the seed's initial-weights checksum, so a folder with a
final name is always a whole run.

Runs go to an executor. The default, "local", is a pool of `workers` child
processes (several may share one GPU: JAX is started without preallocation);
"ray" (ray_executor.py) makes each run a Ray task placed on whichever node of
a Ray cluster has the resources its configuration asks for. Both share what a
run is: its manifest and partial folder (prepare_run: run_manifest +
make_partial), the training process (worker.start) and the finish step
(finish_run). Training processes get SIGTERM when the study process dies, so a
killed study leaves no orphan writing into its folder. One study process at a
time works on a folder (a lock file).
"""

import dataclasses
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from prednet_keras import runs
from prednet_keras.study import archive, starting_points
from prednet_keras.study.spec import SpecError

__all__ = ["EXECUTORS", "StudyFolderError", "finish_run", "make_partial", "plan_status", "prepare_run", "run_manifest",
           "run_study"]

FORMAT = "prednet-keras-study"
STUDY_RECORD = "study.json"
SPEC_COPY = "spec.toml"
LOCK = ".lock"
RUNS = archive.RUNS
PARTIAL = ".partial-"
LOG = "log.txt"
EXECUTORS = ("local", "ray")


class StudyFolderError(ValueError):
    """The output folder cannot hold this study (another spec's, locked, or damaged)."""


@dataclasses.dataclass
class RunOutcome:
    key: str
    status: str  # "done", "failed", "skipped"
    seconds: float = 0.0
    metric: float = None
    message: str = ""


def run_folder(study_dir, run):
    """The final folder of a planned run."""
    return Path(study_dir) / RUNS / run.configuration.name / run.name


def partial_folder(study_dir, run):
    """The folder a planned run trains in until it is complete."""
    return Path(study_dir) / RUNS / run.configuration.name / (PARTIAL + run.name)


def plan_status(spec, study_dir, configurations=None):
    """(finished, pending) planned runs of `spec` in `study_dir`.

    A final folder whose manifest is not complete is damaged (someone edited
    or half-copied it): an error, since it is never rewritten. So is a packed
    study whose archive holds runs that runs/ lacks: they would be trained again.
    """
    missing = archive.missing_runs(study_dir)
    if missing:
        raise StudyFolderError(f"{Path(study_dir) / archive.ARCHIVE} holds {len(missing)} finished run(s) that "
                               f"{Path(study_dir) / RUNS} lacks; unpack them first: prednet-study unpack {study_dir}")
    finished, pending = [], []
    for run in spec.planned_runs(configurations):
        folder = run_folder(study_dir, run)
        if folder.is_dir():
            try:
                status = runs.RunFolder(folder).read_manifest().get("status")
            except runs.RunFolderError as error:
                raise StudyFolderError(f"{folder} is damaged ({error}); move it away to run it again.") from None
            if status != "complete":
                raise StudyFolderError(f"{folder} is not a complete run (status {status!r}); "
                                       "move it away to run it again.")
            finished.append(run)
        else:
            pending.append(run)
    return finished, pending


class _Lock:
    """An exclusive lock on the study folder (flock: released when the process dies)."""

    def __init__(self, study_dir):
        self.path = Path(study_dir) / LOCK
        self.handle = None

    def __enter__(self):
        import fcntl

        self.handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            self.handle.seek(0)
            holder = self.handle.read().strip() or "?"
            self.handle.close()
            raise StudyFolderError(f"Another prednet-study run (pid {holder}) is working on "
                                   f"{self.path.parent}; wait for it or stop it first.") from None
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(str(os.getpid()))
        self.handle.flush()
        return self

    def __exit__(self, *exc):
        self.handle.close()


def _record_study(spec, study_dir, spec_path, command):
    """Checks the folder against this spec and records the invocation in study.json."""
    path = Path(study_dir) / STUDY_RECORD
    now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if path.is_file():
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:
            raise StudyFolderError(f"{path} is not valid JSON ({error}).") from None
        if record.get("format") != FORMAT:
            raise StudyFolderError(f"{path} is not a {FORMAT} record.")
        _check_compatible(record["spec"], spec, study_dir)
        merged = _merge(record["spec"], spec.to_dict())
    else:
        if Path(study_dir).is_dir() and any(p.name not in (LOCK,) for p in Path(study_dir).iterdir()):
            raise StudyFolderError(f"{study_dir} exists and is not a study folder (no {STUDY_RECORD}); "
                                   "choose another --output.")
        record = {"format": FORMAT, "format_version": 1, "created": now, "invocations": []}
        merged = spec.to_dict()
        if spec_path is not None:
            shutil.copyfile(spec_path, Path(study_dir) / SPEC_COPY)
    record["spec"] = merged
    record["invocations"].append({"time": now, "command": list(command), "spec": os.fspath(spec_path or ""),
                                  "host": os.uname().nodename})
    runs.atomic_write_json(path, record)


# [train] options added after studies were run, with the value those runs had.
_PREDATING_TRAIN_OPTIONS = {"prednet": {"unroll": False, "augment": []}}
# The same for runtime options.
_PREDATING_RUNTIME_OPTIONS = {"precision": "float32"}


def _check_compatible(recorded, spec, study_dir):
    train = {**_PREDATING_TRAIN_OPTIONS.get(recorded.get("model"), {}), **recorded.get("train", {})}
    if recorded.get("model") != spec.model or train != spec.train:
        differing = sorted(k for k in set(train) | set(spec.train) if train.get(k) != spec.train.get(k))
        what = "model" if recorded.get("model") != spec.model else "[train] " + ", ".join(differing)
        raise SpecError(f"{study_dir} holds a study with another {what}; a study folder keeps one protocol "
                        "(use another --output).")
    earlier = {c["name"]: c for c in recorded.get("configurations", [])}
    for config in spec.configurations:
        before = earlier.get(config.name)
        if before is not None and ({**_PREDATING_RUNTIME_OPTIONS, **before["runtime"]} != config.runtime
                                   or before["factors"] != config.factors):
            raise SpecError(f"configuration {config.name} differs from the one of that name already run in "
                            f"{study_dir}; give the changed arm a new name.")


def _merge(recorded, current):
    merged = dict(current)
    names = {c["name"] for c in current["configurations"]}
    merged["configurations"] = current["configurations"] + [
        c for c in recorded.get("configurations", []) if c["name"] not in names
    ]
    merged["seeds"] = list(current["seeds"]) + [s for s in recorded.get("seeds", []) if s not in current["seeds"]]
    merged["replicates"] = max(current["replicates"], recorded.get("replicates", 1))
    merged["replicate_seeds"] = _merge_replicate_seeds(recorded, current, merged["seeds"])
    merged["ulp_baseline"] = current["ulp_baseline"] or recorded.get("ulp_baseline", False)
    return merged


def _merge_replicate_seeds(recorded, current, seeds):
    """The seeds that got replicates in either invocation's spec: None (every seed) or a list.

    A spec with replicates = 1 replicated no seed; one without replicate_seeds
    (also every study.json from before the key) replicated all of its seeds.
    The union comes in the order of the merged `seeds`, and is None when it
    covers them all.
    """
    replicated = set()
    for spec in (recorded, current):
        if spec.get("replicates", 1) < 2:
            continue
        chosen = spec.get("replicate_seeds")
        replicated |= set(spec.get("seeds", []) if chosen is None else chosen)
    if not replicated or set(seeds) <= replicated:
        return None  # no replicates anywhere (replicates is 1), or every seed has them
    return [s for s in seeds if s in replicated]


def _remove_partials(study_dir):
    removed = 0
    for config_dir in (Path(study_dir) / RUNS).glob("*"):
        for partial in config_dir.glob(PARTIAL + "*"):
            shutil.rmtree(partial, ignore_errors=True)
            removed += 1
    return removed


def _die_with_parent():
    """In the child before exec: SIGTERM when the study process dies (Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # not Linux: the lock and partial folders still keep the study consistent
        pass


class _Running:
    def __init__(self, run, process, log, folder, started):
        self.run = run
        self.process = process
        self.log = log
        self.folder = folder
        self.started = started


def run_manifest(spec, study_dir, run, seed_record, command, executor=None):
    """The first manifest of a planned run (what every executor writes into its partial folder).

    Args:
        spec: the StudySpec.
        study_dir: the study folder.
        run: the PlannedRun.
        seed_record: its seed's seed.json (for the checksum the run must start from).
        command: the command line, for the record.
        executor: where the run is placed (e.g. {"kind": "ray", "node_id": ...}),
            recorded as study.executor; None: not recorded (the local pool).
    """
    config = run.configuration
    init = starting_points.weights_path(study_dir, run.seed, run.perturbation).resolve()
    options = spec.run_options(run, init)
    study = {
        "name": spec.name,
        "configuration": config.name,
        "replicate": run.replicate,
        "perturbation": run.perturbation,
        "settings": dict(config.factors),
        "trajectory_points": spec.trajectory_points,
        "seed_checksum": seed_record["ulp_checksum" if run.perturbation == "ulp" else "checksum"],
    }
    if executor is not None:
        study["executor"] = dict(executor)
    return runs.new_manifest(run.name, options, config.runtime, command, study=study)


def make_partial(partial, manifest):
    """(Re)makes a run's partial folder from scratch, holding only `manifest`.

    Whatever an earlier attempt left there is deleted first, so nothing
    half-written survives into a new attempt.
    """
    partial = Path(partial)
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    runs.RunFolder(partial).write_manifest(manifest)
    return partial


def prepare_run(spec, study_dir, run, seed_record, command, executor=None):
    """Makes a planned run's partial folder and its manifest; returns the folder."""
    manifest = run_manifest(spec, study_dir, run, seed_record, command, executor)
    return make_partial(partial_folder(study_dir, run), manifest)


def _start(spec, study_dir, run, seed_record, command, quiet_child=True):
    from prednet_keras import worker

    partial = prepare_run(spec, study_dir, run, seed_record, command)
    config = run.configuration
    log = open(partial / LOG, "w", encoding="utf-8")
    process = worker.start(partial, config.runtime_config(), quiet=quiet_child, stdout=log,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    return _Running(run, process, log, partial, time.perf_counter())


def _finish(study_dir, running, code):
    """Moves a finished run to its final name, or says why it failed."""
    running.log.close()
    seconds = time.perf_counter() - running.started
    return finish_run(study_dir, running.run, running.folder, code, seconds)


def finish_run(study_dir, run, folder, code, seconds):
    """The shared end of a run: its final name once verified, or why it failed.

    A run folder is renamed (atomically) to its final name only when its
    training process exited 0, its manifest says complete and it started from
    its seed's initial weights (the checksum).

    Args:
        study_dir: the study folder.
        run: the PlannedRun.
        folder: its partial folder.
        code: the training process's return code (Popen's: -N killed by signal N).
        seconds: how long it ran.

    Returns:
        RunOutcome.
    """
    from prednet_keras.worker import exit_status

    key = run.key
    try:
        manifest = runs.RunFolder(folder).read_manifest()
    except runs.RunFolderError as error:
        return RunOutcome(key, "failed", seconds, message=str(error))
    if code != 0 or manifest.get("status") != "complete":
        message = (manifest.get("error") or _last_line(Path(folder) / LOG)
                   or f"exit status {exit_status(code)}")
        return RunOutcome(key, "failed", seconds, message=message)
    expected = (manifest.get("study") or {}).get("seed_checksum")
    actual = (manifest.get("initial_weights") or {}).get("checksum")
    if expected != actual:
        return RunOutcome(key, "failed", seconds,
                          message=f"started from weights {str(actual)[:12]}, not the seed's {str(expected)[:12]}")
    final = run_folder(study_dir, run)
    os.rename(folder, final)
    metric = (manifest.get("metric") or {}).get("value")
    return RunOutcome(key, "done", seconds, metric=metric)


def _last_line(path):
    try:
        lines = [line.strip() for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line and not line.startswith(("I0000", "WARNING: All log messages"))]
    return lines[-1] if lines else ""


def _cpu_threads(config):
    runtime = config.runtime
    if str(runtime.get("device", "cpu")).startswith("cpu"):
        return runtime.get("threads") or os.cpu_count() or 1
    return 1


def run_study(spec, study_dir, *, workers=None, only=None, spec_path=None, command=(), progress=None,
              backend=None, executor="local", address=None, gpu_share=1.0, retries=None):
    """Runs every pending run of `spec` into `study_dir`.

    Args:
        spec: a StudySpec.
        study_dir: the study folder (created). With executor "ray" it must be
            on a file system every node mounts at the same path.
        workers: runs at once (default: the spec's); with executor "ray":
            runs submitted at once (default: all, Ray places them as its
            resources allow).
        only: glob patterns of configuration names to run (default: all); the
            others are left for another machine (`prednet-study report` merges
            the folders).
        spec_path: the spec file (copied into a new study folder).
        command: the command line, for the record.
        progress: a reporter with start(total, done), run_started(run),
            run_finished(outcome, done, total), message(text); None: silent.
        backend: backend of the process making the starting points
            (default: Keras' current backend).
        executor: "local" (a pool of processes on this machine) or "ray"
            (one Ray task per run; ray_executor.py).
        address: with executor "ray": the cluster's address (None: a private
            Ray on this machine).
        gpu_share: with executor "ray": the fraction of a GPU a GPU run asks for.
        retries: with executor "ray": further attempts of a run whose worker
            died (default ray_executor.DEFAULT_RETRIES).

    Returns:
        dict: finished (before this call), done, failed (list of RunOutcome),
        skipped (configurations skipped after a failure), pending; with
        executor "ray" also unplaceable ({configuration: why no node can run it}).
    """
    import keras

    if executor not in EXECUTORS:
        raise ValueError(f"Unknown executor {executor!r} (known: {', '.join(EXECUTORS)}).")
    study_dir = Path(study_dir)
    configurations = spec.select(only)
    if executor == "ray":
        from prednet_keras.study import ray_executor

        ray_executor.require_ray()
        ray_executor.check_configurations(configurations, gpu_share)
        if address:
            ray_executor.check_address(address)
    else:
        workers = workers or spec.workers
    study_dir.mkdir(parents=True, exist_ok=True)
    with _Lock(study_dir):
        _record_study(spec, study_dir, spec_path, command)
        removed = _remove_partials(study_dir)
        finished, pending = plan_status(spec, study_dir, configurations)
        if progress:
            if removed:
                progress.message(f"Removed {removed} unfinished run folder{'s' if removed != 1 else ''}; "
                                 "those runs start again.")
            progress.start(len(finished) + len(pending), len(finished))
        outcome = {"finished": len(finished), "done": [], "failed": [], "skipped": {}, "pending": len(pending)}
        if not pending:
            return outcome
        seeds = sorted({run.seed for run in pending})
        if progress:
            progress.message(f"Starting points for {len(seeds)} seed{'s' if len(seeds) != 1 else ''} ...")
        records = starting_points.ensure_starting_points(spec, study_dir, seeds, backend or keras.backend.backend())
        for config in configurations:
            (study_dir / RUNS / config.name).mkdir(parents=True, exist_ok=True)
        if executor == "ray":
            ray_executor.execute(spec, study_dir, pending, records, command, progress, outcome, len(finished),
                                 address=address, gpu_share=gpu_share, max_in_flight=workers,
                                 retries=ray_executor.DEFAULT_RETRIES if retries is None else retries)
        else:
            _execute(spec, study_dir, pending, records, workers, command, progress, outcome, len(finished))
    return outcome


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
