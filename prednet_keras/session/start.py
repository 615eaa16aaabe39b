"""Starting a training run for a command: a new run, or the continuation of one.

What `prednet-train` does once its options are parsed and checked: under the run folder's lock
(`lock`), write the manifest of a new run (keeping an old run aside with `--overwrite` until the
new one has completed an epoch: `run_folders.Replacement`) or check a run to continue, then train in the
training process (`worker.launch`) and leave the folder as the outcome deserves: a run that ended
before completing an epoch is removed (or the old run put back), one that was killed says how to
continue. The command's lines go through `say` (the CLI prints them on stderr). No framework at
import.
"""

import shutil
from pathlib import Path

from prednet_keras.files.diskwrite import require_writable_folder
from prednet_keras.session import folder as run_folders
from prednet_keras.session import worker
from prednet_keras.session.lock import RunLock

__all__ = ["code_to_resume_with", "how_it_ended", "resumable_run", "resume_run", "start_new_run"]


def start_new_run(path, config, runtime_config, command, *, overwrite=False, quiet=False, schedule=None, say=print):
    """Creates the run folder `path` for `config` and trains it; returns the training process's exit status.

    Args:
        path: the run folder to create (or replace, with `overwrite`).
        config: the run's validated options (recipe.TrainConfig or a model kind's config): `to_dict()`.
        runtime_config: the runtime.RuntimeConfig of its process.
        command: the command line, recorded in the manifest.
        overwrite: replace an existing run folder (the old run kept aside until the new one has results).
        quiet: one line per epoch instead of a progress bar.
        schedule: the manifest's first "schedule" record (why the learning rate drops when it does), or None.
        say: prints one line of the command's own output.

    Raises:
        run_folders.RunFolderError: the folder may not be written (it exists, it is locked, ...); nothing changed.
    """
    folder = run_folders.RunFolder(path)
    replacement = run_folders.Replacement(folder)
    # Refused before anything is written, the lock file included: a folder that cannot be made or written,
    require_writable_folder(folder.path)
    if not replacement.aside.is_dir():
        # and one that exists and may not be replaced.
        folder.check_new(overwrite=overwrite)
    with RunLock(folder.path) as lock:
        recovered = replacement.recover()
        if recovered:
            say(f"({recovered})")
        folder.check_new(overwrite=overwrite)
        return _start_locked(folder, replacement, lock, config, runtime_config, command, quiet, schedule, say)


def _start_locked(folder, replacement, lock, config, runtime_config, command, quiet, schedule, say):
    existed = folder.path.is_dir()
    if folder.exists():
        replacement.begin()
        existed = False
    folder.create()
    extra = {"schedule": schedule} if schedule else {}
    folder.write_manifest(run_folders.new_manifest(folder.path.name, config.to_dict(), runtime_config.to_dict(), command,
                                            **extra))
    say(f"Run folder: {folder.path}")
    if replacement.active:
        say(f"(the old run is kept as {replacement.aside} until the new one completes epoch 1)")

    def settle_replacement():
        if replacement.active and folder.has_results():
            replacement.commit()
            say(f"Replaced the old run in {folder.path} (kept until the new run completed epoch 1).")

    _say_starting(runtime_config, say)
    code = worker.launch(folder.path, runtime_config, quiet=quiet, pass_fds=lock.fds(),
                         every_second=settle_replacement)
    settle_replacement()
    if code != 0 and not folder.has_results():
        # A run that ended before its first epoch (no GPU, bad data, Ctrl-C)
        # has nothing worth keeping, and must not block the corrected command.
        how = how_it_ended(code)
        if replacement.active:
            replacement.rollback()
            say(f"The new run {how} before completing an epoch; the old run in {folder.path} is unchanged.")
        elif existed:
            _empty(folder.path)
            say(f"(the new run {how} before completing an epoch; {folder.path} is empty again, as it was)")
        else:
            shutil.rmtree(folder.path, ignore_errors=True)
            say(f"(removed {folder.path}: the new run {how} before completing an epoch)")
    elif code > 128 and code != worker.EXIT_INTERRUPTED:
        _say_killed(code, folder, say)
    return code


def resume_run(path, check, *, changed_code_ok=False, quiet=False, say=print):
    """Continues the run in `path` from its last completed epoch; returns the training process's exit status.

    Args:
        path: the run folder.
        check: a function of the RunFolder that fails unless it may be continued as asked and returns
            (completed epochs, its runtime.RuntimeConfig, the resume record for the training process);
            called before the lock is taken (so a refusal writes nothing, the lock file included) and
            again under it.
        changed_code_ok: continue the run although the code now running is not the code it last trained
            with (see code_to_resume_with); the resume records it.
        quiet: one line per epoch instead of a progress bar.
        say: prints one line of the command's own output.
    """
    folder = run_folders.RunFolder(path)
    replacement = run_folders.Replacement(folder)
    if not replacement.aside.is_dir():
        check(folder)
        code_to_resume_with(folder, changed_code_ok)
    with RunLock(folder.path) as lock:
        recovered = replacement.recover()
        if recovered:
            say(f"({recovered})")
        done, runtime_config, record = check(folder)
        code_fields, note = code_to_resume_with(folder, changed_code_ok)
        record = {**record, **code_fields}
        if note:
            say(note)
        before = folder.manifest_path.read_bytes()
        say(f"Run folder: {folder.path} ({folder.progress_text()})")
        _say_starting(runtime_config, say)
        code = worker.launch(folder.path, runtime_config, quiet=quiet, resume=record, pass_fds=lock.fds())
    if code != 0 and folder.manifest_path.read_bytes() == before:
        say(f"(the training process stopped before it began; nothing in {folder.path} was changed)")
    elif code == worker.EXIT_INTERRUPTED and folder.progress()[0] == 0:
        say(f"Continue with: prednet-train --resume --output {folder.path}")
    elif code > 128 and code != worker.EXIT_INTERRUPTED:
        _say_killed(code, folder, say)
    return code


def code_to_resume_with(folder, changed_code_ok=False):
    """The code a resume of `folder` runs, checked against the code the run last trained with (its
    manifest's `code`, or its latest resume's: records.Manifest.last_code). Reads only.

    The package checksum (code_provenance.package_sha256: every .py file of prednet_keras) decides: a
    resume under other code would make one run of two versions of the package while its manifest names
    one, so it is refused unless `changed_code_ok`, and then recorded (code_changed). A commit or dirty flag
    that differs while the files are the same changes nothing the run computes. A run that records no
    checksum (made before runs recorded their code) cannot be checked: it continues, said in one line, and
    its resume records the code it ran, so that later resumes are checked against that.

    Returns:
        (the resume record's code fields: {"code"} and, continuing across a change, "code_changed": True;
        the line to say, or None).

    Raises:
        run_folders.RunFolderError: the code changed and `changed_code_ok` is false.
    """
    from prednet_keras.runtime.code_provenance import code_provenance
    from prednet_keras.session.records import Code

    current = Code.from_dict(code_provenance())
    last = folder.read_record().last_code
    fields = {"code": current.to_dict()}
    if last is None or not last.package_sha256:
        return fields, (f"({folder.path} records no code checksum (made before runs recorded one): whether the "
                        f"code now running, {current.describe()}, is the code it trained with cannot be checked; "
                        "this resume records it.)")
    if not current.package_sha256:
        return fields, (f"(the package checksum of the code now running cannot be computed: whether it is the "
                        f"code {folder.path} last trained with, {last.describe()}, cannot be checked.)")
    if current.package_sha256 == last.package_sha256:
        return fields, None
    if not changed_code_ok:
        raise run_folders.RunFolderError(
            f"{folder.path} last trained with {last.describe()}, and the code now running is {current.describe()}: "
            "resuming would make one run of two versions of prednet_keras. Resume it with the code it trained "
            "with, start a new run, or pass --resume-with-changed-code to continue it anyway (its manifest records "
            "the change)."
        )
    return {**fields, "code_changed": True}, (
        f"(continuing {folder.path} with changed code: it last trained with {last.describe()}, now "
        f"{current.describe()}; the manifest's resumes record it.)")


def resumable_run(folder):
    """What a run records that --resume continues from; fails, changing nothing, when it cannot be continued.

    Args:
        folder: the run_folders.RunFolder.

    Returns:
        (its manifest dict, completed epochs (checkpointed updates, for a protocol counted in updates), its
        options (its kind's options record: a recipe.TrainConfig for Lotter's recipe), its runtime.RuntimeConfig).

    Raises:
        run_folders.RunFolderError: not a resumable run (see RunFolder.check_resumable), a model kind without
            checkpoints, a manifest without a prednet run's options and runtime, or a run that stopped early.
    """
    from prednet_keras import model_kinds, runtime
    from prednet_keras.session.records import Manifest

    manifest, done = folder.check_resumable()
    run_record = Manifest.coerce(manifest)
    recorded_model = run_record.model_kind
    recorded_kind = model_kinds.find(recorded_model) if recorded_model else None
    if recorded_kind is not None and not recorded_kind.session_protocol.can_resume:
        raise run_folders.RunFolderError(
            f"{folder.path} is a --model {recorded_model} run; its protocol keeps no checkpoints, so it cannot be "
            "resumed: start it again (--overwrite replaces it)."
        )
    try:
        options_record = (recorded_kind or model_kinds.get("prednet")).config_class()
        recorded = options_record.from_dict(_recorded_part(run_record.options, "options"))
        requested_runtime = runtime.RuntimeConfig.from_dict(
            _recorded_part(run_record.runtime and run_record.runtime.requested, "runtime.requested"))
    except (KeyError, TypeError, ValueError) as error:
        raise run_folders.RunFolderError(
            f"{folder.manifest_path} does not record a prednet run's options and runtime ({error}); "
            "it cannot be resumed."
        ) from None
    stopped = run_record.result.get("stopped_early") if run_record.result else None
    if stopped:
        raise run_folders.RunFolderError(
            f"{folder.path} stopped early at epoch {stopped.get('epoch')}: {stopped.get('reason')}, best epoch "
            f"{stopped.get('best_epoch')} (in model.keras). An early-stopped run is complete; --resume has nothing "
            "to continue. Train further in a new run (a larger --patience, or none)."
        )
    return manifest, done, recorded, requested_runtime


def _recorded_part(part, name):
    """The dict of a manifest's record `part` (records.Record); KeyError when absent, TypeError when not an
    object, as reading the dict raised."""
    from prednet_keras.session.records import Record

    if part is None:
        raise KeyError(name)
    if not isinstance(part, Record):
        raise TypeError(f"{name} is a {type(part).__name__}, not an object")
    return part.to_dict()


def how_it_ended(code):
    """The words for a training process's non-zero exit status ("was interrupted", "failed", ...)."""
    if code == worker.EXIT_INTERRUPTED:
        return "was interrupted"
    if code > 128:
        return f"was killed (signal {code - 128})"
    return "failed"


def _say_killed(code, folder, say):
    say(f"The training process was killed (signal {code - 128}); "
        f"continue with: prednet-train --resume --output {folder.path}")


def _say_starting(runtime_config, say):
    say(f"Starting the training process ({runtime_config.backend} on {runtime_config.device}; "
        "importing the framework takes a few seconds) ...")


def _empty(path):
    """Removes everything inside `path` (a folder that was empty before the run), keeping the folder."""
    for item in Path(path).iterdir():
        if item.is_dir() and not item.is_symlink():
            shutil.rmtree(item, ignore_errors=True)
        else:
            item.unlink(missing_ok=True)
