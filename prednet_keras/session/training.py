"""One training session for every model kind (issue 38): the training process's one entry.

`train` opens the run folder's session (`bookkeeping.RunSession`: the manifest, this process's session
record, history.csv, the timing, loss.png, the run marked complete) and hands it to the protocol the run's
model kind states (`protocol`: Lotter's recipe, the Chainer window, the autoencoder, a user's model). The
protocol reports its progress and records through Keras callbacks (`callbacks`, `display`), the session's
own (`StopOnRequest`: Ctrl-C or SIGTERM honoured at the next step) called after them; what it can do (resume
from a checkpoint or not) it states (`model_kinds.protocol_of` reads it for a recorded run).

No framework at import: the worker imports this module before `runtime.configure`.
"""

from prednet_keras import model_kinds
from prednet_keras.session import folder as run_folders
from prednet_keras.session.bookkeeping import RunSession

__all__ = ["train"]


def train(run_dir, runtime_record=None, quiet=False, resume=None, should_stop=None):
    """Trains the run in `run_dir` by its model kind's protocol; returns the manifest's result.

    Args:
        run_dir: the run folder (its manifest written by prednet-train).
        runtime_record: {"effective", "fingerprint"} of this process (runtime.configure, runtime.fingerprint).
        quiet: fewer progress lines.
        resume: for `prednet-train --resume`: {"command", "time", "epochs", "code"[, "code_changed"]} (a protocol
            that can resume; `start.code_to_resume_with` made the code fields).
        should_stop: a function; True stops training at the next step with KeyboardInterrupt.
    """
    folder = run_folders.RunFolder(run_dir)
    manifest = folder.read_record()
    kind = model_kinds.get(manifest.model_kind or "prednet")
    protocol = kind.session_protocol
    if resume is not None and not protocol.can_resume:
        # prednet-train refuses it first, in these words; a caller of the session is told the same.
        raise ValueError(f"--resume is not available for --model {kind.name}: its protocol keeps no checkpoints; "
                         "start the run again (--overwrite replaces it).")
    if runtime_record is not None:
        protocol.record_runtime(folder, runtime_record)
    callbacks = []
    if should_stop is not None:
        from prednet_keras.session.callbacks import StopOnRequest

        # Last at every step: a stop asked for while an epoch is recorded takes effect once it is (interrupts).
        callbacks.append(StopOnRequest(should_stop))
    return protocol.run(RunSession(run_dir), kind, callbacks, runtime_record, quiet=quiet, resume=resume,
                        should_stop=should_stop)
