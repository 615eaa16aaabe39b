"""`prednet-study run`: every run of a spec, each in its own process, resumable.

    DIR/
      study.json                     the spec as run (merged over invocations), and each invocation
                                     (its command, host and code)
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

import json
import os
import shutil
import time
from pathlib import Path

from prednet_keras import _backend_choice, model_kinds
from prednet_keras.runtime.code_provenance import code_provenance
from prednet_keras.files.diskwrite import atomic_write_json
from prednet_keras.session import folder as run_folders
from prednet_keras.session.lock import FolderLock, RunFolderLocked
from prednet_keras.study import archive
from prednet_keras.study.executors import starting_points
from prednet_keras.study.factors import predating_runtime
from prednet_keras.study.executors.local_executor import LocalExecutor
from prednet_keras.study.executors.one_run import PARTIAL, RUNS, run_folder
from prednet_keras.study.spec import SpecError

__all__ = ["EXECUTORS", "StudyFolderError", "make_executor", "plan_status", "run_study"]

FORMAT = "prednet-keras-study"
STUDY_RECORD = "study.json"
SPEC_COPY = "spec.toml"
LOCK = ".lock"
LOCK_OWNER = ".lock.owner"
EXECUTORS = ("local", "ray")


class StudyFolderError(ValueError):
    """The output folder cannot hold this study (another spec's, locked, or damaged)."""


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
    # Each configuration's folder is listed once: a stat per planned run made a --dry-run of a large
    # plan (100,000 runs) take seconds.
    present = {}
    for run in spec.planned_runs(configurations):
        name = run.configuration.name
        if name not in present:
            try:
                present[name] = set(os.listdir(Path(study_dir) / RUNS / name))
            except (FileNotFoundError, NotADirectoryError):
                present[name] = set()
        if run.name not in present[name]:
            pending.append(run)
            continue
        folder = run_folder(study_dir, run)
        if folder.is_dir():
            try:
                status = run_folders.RunFolder(folder).read_manifest().get("status")
            except run_folders.RunFolderError as error:
                raise StudyFolderError(f"{folder} is damaged ({error}); move it away to run it again.") from None
            if status != "complete":
                raise StudyFolderError(f"{folder} is not a complete run (status {status!r}); "
                                       "move it away to run it again.")
            finished.append(run)
        else:
            pending.append(run)
    return finished, pending


class _Lock:
    """The study folder's lock (FolderLock: filelock, released when its holder dies however it
    dies; the holder's pid in LOCK_OWNER while held), inside the study folder."""

    def __init__(self, study_dir):
        self.lock = FolderLock(study_dir, Path(study_dir) / LOCK, Path(study_dir) / LOCK_OWNER)

    def __enter__(self):
        try:
            self.lock.acquire()
        except RunFolderLocked:
            raise StudyFolderError(f"Another prednet-study run ({self.lock.holder()}) is working on "
                                   f"{self.lock.folder}; wait for it or stop it first.") from None
        return self

    def __exit__(self, *exc):
        self.lock.release()


def _record_study(spec, study_dir, spec_path, command, cache_folder=None):
    """Checks the folder against this spec and records the invocation in study.json (with the compilation
    cache its JAX runs share, None for none, and the code it ran: code_provenance)."""
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
        # A folder that holds the spec being run (and its papers, such as a pre-registration) is the study's
        # own: a study can be planned in the folder it will fill. Earlier runs or seeds without a record are
        # not a study this command may take over.
        folder = Path(study_dir)
        found = {p.name for p in folder.iterdir()} - {LOCK, LOCK_OWNER} if folder.is_dir() else set()
        own = spec_path is not None and Path(spec_path).resolve().parent == folder.resolve()
        if found and (not own or found & {"runs", "seeds", archive.ARCHIVE}):
            raise StudyFolderError(f"{study_dir} exists and is not a study folder (no {STUDY_RECORD}); "
                                   "choose another --output.")
        record = {"format": FORMAT, "format_version": 1, "created": now, "invocations": []}
        merged = spec.to_dict()
        if spec_path is not None and Path(spec_path).resolve() != (folder / SPEC_COPY).resolve():
            shutil.copyfile(spec_path, folder / SPEC_COPY)
    record["spec"] = merged
    record["invocations"].append({"time": now, "command": list(command), "spec": os.fspath(spec_path or ""),
                                  "host": os.uname().nodename,
                                  "compile_cache": os.fspath(cache_folder) if cache_folder else None,
                                  "code": code_provenance()})
    atomic_write_json(path, record)


# The same for runtime switches: each one added since the first studies, with the value every earlier run had
# (factors.py's table says them).
_PREDATING_RUNTIME_OPTIONS = predating_runtime()


def _check_compatible(recorded, spec, study_dir):
    # [train] options added after studies were run, with the value those runs had (the model kind says them).
    kind = model_kinds.find(recorded.get("model"))
    train = {**(kind.predating_train_options if kind else {}), **recorded.get("train", {})}
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
    merged["seeds"] = list(current["seeds"]) + [s for s in recorded.get("seeds", []) if s not in current["seeds"]]
    merged.update(_merge_plans([(recorded, recorded.get("seeds", [])), (current, current["seeds"])], merged["seeds"]))
    # Each configuration's plan over the merged seeds: what either invocation planned for it.
    plans = {c["name"]: [(c["plan"], current["seeds"])] for c in current["configurations"]}
    earlier = []
    for config in recorded.get("configurations", []):
        if config["name"] not in plans:
            earlier.append(config)
        plans.setdefault(config["name"], []).append((_plan_of(config, recorded), recorded.get("seeds", [])))
    merged["configurations"] = [{**c, "plan": _merge_plans(plans[c["name"]], merged["seeds"])}
                                for c in current["configurations"] + earlier]
    return merged


def _plan_of(configuration, spec):
    """A recorded configuration's plan; a study.json from before configurations had their own gave each the
    spec's top-level replicates, replicate_seeds and ulp_baseline."""
    if "plan" in configuration:
        return configuration["plan"]
    return {"replicates": spec.get("replicates", 1), "replicate_seeds": spec.get("replicate_seeds"),
            "ulp_baseline": spec.get("ulp_baseline", False)}


def _merge_plans(plans, seeds):
    """The plan that covers every run of `plans` ([(plan, the seeds of its spec)], a plan being a dict of
    replicates, replicate_seeds and ulp_baseline: a spec's top-level ones, or a configuration's), over the
    merged `seeds`: the most replicates, the union of the replicated seeds, and a 1-ulp baseline if any had one."""
    return {"replicates": max(plan.get("replicates", 1) for plan, _ in plans),
            "replicate_seeds": _merge_replicate_seeds(plans, seeds),
            "ulp_baseline": any(plan.get("ulp_baseline", False) for plan, _ in plans)}


def _merge_replicate_seeds(plans, seeds):
    """The seeds that got replicates in any of `plans` ([(plan, the seeds of its spec)]): None (every seed)
    or a list.

    A plan with replicates = 1 replicated no seed; one without replicate_seeds
    (also every study.json from before the key) replicated all of its spec's
    seeds. The union comes in the order of the merged `seeds`, and is None when
    it covers them all.
    """
    replicated = set()
    for plan, plan_seeds in plans:
        if plan.get("replicates", 1) < 2:
            continue
        chosen = plan.get("replicate_seeds")
        replicated |= set(plan_seeds if chosen is None else chosen)
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


def make_executor(name, *, workers=None, address=None, gpu_share=1.0, retries=None, share_compilation=True):
    """The executor called `name`: "local" (a pool of `workers` processes here, JAX runs sharing the study's
    compilation cache unless share_compilation is False) or "ray".

    Both offer check(configurations), shared_cache(study_dir, configurations) (the compilation cache folder
    their runs share, for the record) and execute(spec, study_dir, pending, records, command, progress,
    outcome, done_before), which run_study calls the same way.
    """
    if name == "local":
        return LocalExecutor(workers, share_compilation)
    if name == "ray":
        from prednet_keras.study.executors.ray_executor import RayExecutor

        return RayExecutor(address=address, gpu_share=gpu_share, max_in_flight=workers, retries=retries)
    raise ValueError(f"Unknown executor {name!r} (known: {', '.join(EXECUTORS)}).")


def run_study(spec, study_dir, *, workers=None, only=None, spec_path=None, command=(), progress=None,
              backend=None, executor="local", address=None, gpu_share=1.0, retries=None, share_compilation=True):
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
            (default: the one a command would use, found without importing
            Keras: the numbers do not depend on it).
        executor: "local" (a pool of processes on this machine) or "ray"
            (one Ray task per run; ray_executor.py).
        address: with executor "ray": the cluster's address (None: a private
            Ray on this machine).
        gpu_share: with executor "ray": the fraction of a GPU a GPU run asks for.
        retries: with executor "ray": further attempts of a run whose worker
            died (default ray_executor.DEFAULT_RETRIES).
        share_compilation: with executor "local": JAX runs share the study's
            compilation cache (runtime/compile_cache.py), recorded in study.json's
            invocation; False compiles in every process.

    Returns:
        dict: finished (before this call), done, failed (list of RunOutcome),
        skipped (configurations skipped after a failure), pending; with
        executor "ray" also unplaceable ({configuration: why no node can run it}).
    """
    study_dir = Path(study_dir)
    configurations = spec.select(only)
    executor = make_executor(executor, workers=workers or (None if executor == "ray" else spec.workers),
                             address=address, gpu_share=gpu_share, retries=retries,
                             share_compilation=share_compilation)
    # Refused here, before anything is written: what no executor can run (Ray absent, a GPU arm no node holds).
    executor.check(configurations)
    study_dir.mkdir(parents=True, exist_ok=True)
    with _Lock(study_dir):
        _record_study(spec, study_dir, spec_path, command, executor.shared_cache(study_dir, configurations))
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
        # Made in a child while the runs start: a run waits only for its own seed's starting point.
        with starting_points.start(spec, study_dir, pending, backend or _backend_choice.default_backend()) as points:
            for config in configurations:
                (study_dir / RUNS / config.name).mkdir(parents=True, exist_ok=True)
            executor.execute(spec, study_dir, pending, points, command, progress, outcome, len(finished))
    return outcome


