"""One run of a study, whichever executor runs it: its folders, its first manifest, its end.

    runs/<configuration>/.partial-seed-NNNN-rK/   the run while it trains (or after it failed: its log.txt)
    runs/<configuration>/seed-NNNN-rK/            the run once finished and verified

An executor (local_executor.py: a pool of processes here; ray_executor.py: Ray tasks) makes the partial
folder and manifest (prepare_run), starts the training process (worker.start) and hands the exit status
to finish_run, which renames the folder to its final name only when the run is complete and started
from its seed's weights.
"""

import dataclasses
import os
import shutil
from pathlib import Path

from prednet_keras.session import folder as run_folders
from prednet_keras.study import archive
from prednet_keras.study.executors import starting_points

__all__ = ["LOG", "PARTIAL", "RUNS", "RunOutcome", "finish_run", "make_partial", "partial_folder", "prepare_run",
           "run_folder", "run_manifest"]

RUNS = archive.RUNS
PARTIAL = ".partial-"
LOG = "log.txt"


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
    return run_folders.new_manifest(run.name, options, config.runtime, command, study=study)


def make_partial(partial, manifest):
    """(Re)makes a run's partial folder from scratch, holding only `manifest`.

    Whatever an earlier attempt left there is deleted first, so nothing
    half-written survives into a new attempt.
    """
    partial = Path(partial)
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    run_folders.RunFolder(partial).write_manifest(manifest)
    return partial


def prepare_run(spec, study_dir, run, seed_record, command, executor=None):
    """Makes a planned run's partial folder and its manifest; returns the folder."""
    manifest = run_manifest(spec, study_dir, run, seed_record, command, executor)
    return make_partial(partial_folder(study_dir, run), manifest)


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
    from prednet_keras.session.worker import exit_status

    key = run.key
    try:
        manifest = run_folders.RunFolder(folder).read_record()
    except run_folders.RunFolderError as error:
        return RunOutcome(key, "failed", seconds, message=str(error))
    if code != 0 or not manifest.complete:
        message = (manifest.get("error") or _last_line(Path(folder) / LOG)
                   or f"exit status {exit_status(code)}")
        return RunOutcome(key, "failed", seconds, message=message)
    expected = manifest.study.seed_checksum if manifest.study else None
    actual = manifest.initial_weights.checksum if manifest.initial_weights else None
    if expected != actual:
        return RunOutcome(key, "failed", seconds,
                          message=f"started from weights {str(actual)[:12]}, not the seed's {str(expected)[:12]}")
    final = run_folder(study_dir, run)
    os.rename(folder, final)
    metric = (manifest.metric or {}).get("value")
    return RunOutcome(key, "done", seconds, metric=metric)


def _last_line(path):
    try:
        lines = [line.strip() for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line and not line.startswith(("I0000", "WARNING: All log messages"))]
    return lines[-1] if lines else ""
