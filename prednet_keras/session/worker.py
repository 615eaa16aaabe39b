"""The training process, and how the CLI starts it.

Backend, threads and determinism are fixed when the framework is imported; so
`prednet-train` validates its options, writes the run folder's manifest, and
trains in a fresh process (childproc: the runtime's environment, death with its
parent, Ctrl-C passed on once):

    python -m prednet_keras.session.worker train RUN_DIR [--quiet] [--resume JSON]

The process calls `runtime.configure` before building anything. Its output goes
straight to the terminal; its exit status is the command's: 0 done, 1 error
(one line for user errors; a traceback for bugs, or for everything with
PREDNET_DEBUG=1), 130 interrupted (Ctrl-C, SIGTERM, or the command that
started it killed).
"""

import argparse
import json
import os
import sys
import time

from prednet_keras.runtime.childproc import exit_status
from prednet_keras.runtime import compile_cache, log_noise
from prednet_keras.session import interrupts

__all__ = ["EXIT_INTERRUPTED", "exit_status", "launch", "main", "start"]

EXIT_INTERRUPTED = 130
# `import prednet_keras` loads no framework, so this is about when the process
# started: its start-up (importing and configuring the framework) is reported.
_STARTED = time.perf_counter()


def start(run_dir, runtime_config, quiet=False, resume=None, **start_kwargs):
    """Starts the training process for `run_dir` and returns it (a childproc.Child).

    Args:
        run_dir: the run folder (its manifest must exist).
        runtime_config: the runtime.RuntimeConfig asked for.
        quiet: one log line per epoch instead of a progress bar.
        resume: for --resume, the record the run's protocol takes (command,
            time, epochs, the code it runs); the training process writes it once the run is verified.
        **start_kwargs: passed to childproc.start (stdout, pass_fds, death_signal, ...).
    """
    from prednet_keras.runtime import childproc

    args = ["-m", "prednet_keras.session.worker", "train", os.fspath(run_dir)]
    if quiet:
        args.append("--quiet")
    if resume is not None:
        args += ["--resume", json.dumps(resume)]
    return childproc.start(args, runtime_config, **start_kwargs)


def launch(run_dir, runtime_config, quiet=False, resume=None, pass_fds=(), every_second=None):
    """Runs the training process for `run_dir` and waits for it.

    Ctrl-C (and SIGTERM, SIGHUP) sent to this process is passed on to the
    training process once; this process waits for it to record the
    interruption instead of dying first.

    Args:
        run_dir: the run folder (its manifest must exist).
        runtime_config: the runtime.RuntimeConfig asked for.
        quiet: one log line per epoch instead of a progress bar.
        resume: see start.
        pass_fds: descriptors the child keeps open (the run folder's lock).
        every_second: called about once a second while the child runs.

    Returns:
        The child's exit status.
    """
    child = start(run_dir, runtime_config, quiet=quiet, resume=resume, pass_fds=tuple(pass_fds))
    return child.wait_forwarding(every=every_second)


def _user_errors():
    from prednet_keras.runtime.errors import USER_ERRORS
    from prednet_keras.runtime import RuntimeSetupError

    return tuple(USER_ERRORS) + (RuntimeSetupError,)


def _one_line(error):
    from prednet_keras.runtime.errors import one_line

    return one_line(error)


def train_main(run_dir, quiet=False, resume=None):
    """Configures the runtime from the run's manifest and trains.

    Args:
        run_dir: the run folder.
        quiet: one log line per epoch.
        resume: see start.

    Returns:
        The exit status.
    """
    from prednet_keras.session import folder as run_folders
    interrupts.install()
    sys.unraisablehook = _quiet_about_full_disks(sys.unraisablehook)
    folder = run_folders.RunFolder(run_dir)
    try:
        from prednet_keras import runtime

        manifest = folder.read_record()
        config = runtime.RuntimeConfig.from_dict(manifest.runtime.requested.to_dict())
        # Refuses (RuntimeSetupError) when a requested setting is not in force,
        # e.g. a GPU asked for and not visible.
        effective = runtime.configure(config)
        if config.devices > 1:
            from prednet_keras.runtime import distribution

            # Before any model is built: its variables are then created on every device.
            effective["distribution"] = distribution.configure(config.devices, config.device_kind)
        record = {"effective": effective, "fingerprint": runtime.fingerprint()}
        print(f"{config.backend} started on {config.device} in {time.perf_counter() - _STARTED:.1f} s", flush=True)
        # A study run may be held here, started, until its configuration's program is compiled (compile_cache).
        waited = compile_cache.wait_at_gate(say=lambda line: print(line, flush=True))
        if waited:
            print(f"  waited {waited:.1f} s", flush=True)

        from prednet_keras.session import training

        # The protocol records the runtime when it should: a resumed run once it is verified.
        training.train(run_dir, record, quiet=quiet, resume=resume, should_stop=interrupts.stop_requested)
        return 0
    except KeyboardInterrupt:
        # One interruption is recorded; a second signal must not cut the record short.
        interrupts.ignore()
        from prednet_keras.session import bookkeeping

        bookkeeping.mark_stopped(run_dir, "interrupted")
        if not _resumable(folder):
            print(
                f"\nInterrupted; this model's protocol keeps no checkpoints, so start it again "
                f"(prednet-train ... --overwrite --output {folder.path}).",
                file=sys.stderr,
                flush=True,
            )
            return EXIT_INTERRUPTED
        done, unit = folder.progress()
        if not done:
            # prednet-train says what follows: a new run is undone, a resumed one can be resumed again.
            before = "completing an epoch" if unit == "epoch" else "its first checkpoint"
            print(f"\nInterrupted before {before}.", file=sys.stderr, flush=True)
            return EXIT_INTERRUPTED
        print(
            f"\nInterrupted with {folder.progress_text()}; continue with:\n"
            f"  prednet-train --resume --output {folder.path}",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_INTERRUPTED
    except _user_errors() as error:
        from prednet_keras.session import bookkeeping

        message = _one_line(error)
        bookkeeping.mark_stopped(run_dir, "failed", message)
        if os.environ.get("PREDNET_DEBUG"):
            raise
        print(f"Error: {message}", file=sys.stderr, flush=True)
        from prednet_keras.files.diskwrite import NoRoomError

        if isinstance(error, NoRoomError):
            _after_full_disk(folder)
        return 1
    except Exception as error:
        from prednet_keras.files.diskwrite import is_space_error
        from prednet_keras.session import bookkeeping

        if is_space_error(error):
            # A write the run folder's own writers did not see (a library's file): still the user's disk.
            message = _space_message(error, folder.path)
            bookkeeping.mark_stopped(run_dir, "failed", message)
            print(f"Error: {message}", file=sys.stderr, flush=True)
            _after_full_disk(folder)
            return 1
        bookkeeping.mark_stopped(run_dir, "failed", f"{type(error).__name__}: {_one_line(error)}")
        raise


def _quiet_about_full_disks(previous):
    """An unraisablehook that drops HDF5's errors from closing files on a full disk.

    When a checkpoint write meets a full disk, h5py reports the failed close of
    every object of that file again from its finalizers, a traceback each; the
    write itself fails and is reported once, as one line. Anything else goes
    to the previous hook.
    """
    from prednet_keras.files.diskwrite import is_space_error

    def hook(unraisable):
        if not is_space_error(unraisable.exc_value):
            previous(unraisable)

    return hook


def _after_full_disk(folder):
    """What can follow a full disk: a run with completed epochs resumes once there is room."""
    from prednet_keras.session.folder import plural

    done, unit = folder.progress()
    if done and _resumable(folder):
        kept = plural(done, "completed epoch") if unit == "epoch" else plural(done, "checkpointed update")
        print(f"The run keeps its {kept}; free space, then continue with:\n"
              f"  prednet-train --resume --output {folder.path}", file=sys.stderr, flush=True)


def _space_message(error, folder):
    import errno

    from prednet_keras.files.diskwrite import SPACE_ERRORS, space_message

    if not (isinstance(error, OSError) and error.errno in SPACE_ERRORS):
        error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return space_message(error, folder / "checkpoints" / "(files of this epoch)")


def _resumable(folder):
    """Whether the run's protocol keeps checkpoints (a folder whose manifest cannot be read: as a run of Lotter's
    recipe)."""
    from prednet_keras.model_kinds import protocol_of

    try:
        protocol = protocol_of(folder.read_record())
    except Exception:
        return True
    return protocol is None or protocol.can_resume


def main(argv=None):
    """Entry point of `python -m prednet_keras.session.worker`."""
    parser = argparse.ArgumentParser(prog="python -m prednet_keras.session.worker")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train the run in RUN_DIR from its last completed epoch")
    train.add_argument("run_dir")
    train.add_argument("--quiet", action="store_true")
    train.add_argument("--resume", type=json.loads, help="the --resume record (JSON)")
    args = parser.parse_args(argv)
    return train_main(args.run_dir, quiet=args.quiet, resume=args.resume)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    log_noise.finish()  # its last lines out before the parent's next ones
    # Every file of the run is complete by now; skipping interpreter teardown
    # spares TensorFlow's noise about generator datasets finalized at exit.
    os._exit(code)
