"""How a model kind trains in the one training session (`session.training`): the protocol interface.

A kind states its protocol as one object (`ModelKind.session_protocol`), in the spirit of a Keras model's
`fit`: the session opens the run (`bookkeeping.RunSession`), the protocol trains in it, reporting every
update and epoch through Keras callbacks (`callbacks`: under `fit` Keras calls them; a protocol that steps by
itself calls the same methods, `on_train_begin` and `on_train_batch_end`, on the same kind of objects), the
session's own callbacks (`StopOnRequest`) after its own, and the session's records (the manifest,
history.csv, loss.png) are written through the session.

What differs between protocols is stated, not tested for:
- `can_resume`: whether the protocol checkpoints its progress, so that `prednet-train --resume` continues a
  killed or stopped run: Lotter's recipe after every epoch (`recipe_training`), a protocol counted in
  updates every few minutes and when asked to stop (`protocol_training`: the Chainer window, the
  autoencoder, a user's model), the continuation bit-identical to an uninterrupted run. A kind that could
  not continue its runs so would state False: its runs would keep no checkpoints and be started again.
- `keeps_final_model`: what model.keras holds once the run is complete: the final weights, the run's result
  (a protocol counted in updates; its result.weights_checksum then vouches for model.keras), or the best
  epoch's (the recipe, which records that model's own checksum).
- `progress_unit`: what the run's progress (its checkpoints, history.csv's rows) is counted in: "epoch" (the
  recipe) or "update".
- `record_runtime`: when this process's runtime is first written to the manifest: before the session opens
  (a protocol counted in updates, whose resumed process records its own in its session), or with the
  session once a resumed run is verified (the recipe).

`model_kinds.protocol_of(manifest)` answers the protocol of a recorded run: the run folder, the training
session and the worker read these facts through it. No framework at import: the CLI reads them before any
training process starts.
"""

__all__ = ["RecipeProtocol", "TrainingProtocol", "UpdateProtocol"]


class TrainingProtocol:
    """How one model kind trains in a session; subclasses implement `run`.

    Attributes:
        can_resume: True when the run's progress is checkpointed, so --resume continues it.
        keeps_final_model: True when model.keras holds the final weights, False when the best epoch's.
        progress_unit: "epoch" or "update", what its checkpoints and history.csv count.
    """

    can_resume = False
    keeps_final_model = True
    progress_unit = "update"

    def __repr__(self):
        return f"<{type(self).__name__}>"

    def record_runtime(self, folder, runtime_record):
        """Writes this process's runtime to the manifest before the session opens (default: nothing; the
        run's `run` records it with its session)."""

    def run(self, session, kind, callbacks=(), runtime_record=None, quiet=False, resume=None, should_stop=None):
        """Trains the run of `kind` that `session` (a bookkeeping.RunSession) opened; returns the manifest's
        result.

        Args:
            session: the RunSession (manifest, history, timing, completion).
            kind: the run's model kind.
            callbacks: the session's own Keras callbacks (stopping when asked), called after the protocol's
                own at every step, as fit calls a callback list.
            runtime_record: {"effective", "fingerprint"} from runtime.configure.
            quiet: fewer progress lines.
            resume: the --resume record (only for a protocol that can resume).
            should_stop: the session's stop request (the function StopOnRequest asks), for a protocol that
                checkpoints when a stop is asked for.
        """
        raise NotImplementedError


class RecipeProtocol(TrainingProtocol):
    """Lotter's KITTI recipe with Keras fit: epochs, validation, a checkpoint every epoch, --resume."""

    can_resume = True
    keeps_final_model = False
    progress_unit = "epoch"

    def run(self, session, kind, callbacks=(), runtime_record=None, quiet=False, resume=None, should_stop=None):
        from prednet_keras.session import recipe_training

        return recipe_training.run_training(session, runtime_record, quiet=quiet, resume=resume,
                                            session_callbacks=callbacks)


class UpdateProtocol(TrainingProtocol):
    """A kind's own protocol counted in updates (the Chainer window, the autoencoder, a user's model): one
    history row per update; checkpointed (`protocol_training`), so --resume continues a run, unless the kind
    states it cannot.

    Args:
        can_resume: False for a kind whose runs cannot be continued bit-identically (say why where it is
            stated); its runs keep no checkpoints and are started again.
    """

    def __init__(self, can_resume=True):
        self.can_resume = bool(can_resume)

    def record_runtime(self, folder, runtime_record):
        from prednet_keras.session.records import Fingerprint, RuntimeEffective

        manifest = folder.read_record()
        recorded = manifest.runtime.effective
        if recorded is None or not recorded.to_dict():  # absent, null or {}: none recorded yet
            manifest.runtime.effective = RuntimeEffective.from_dict(runtime_record["effective"])
            manifest.fingerprint = Fingerprint.from_dict(runtime_record["fingerprint"])
            folder.write_manifest(manifest)

    def run(self, session, kind, callbacks=(), runtime_record=None, quiet=False, resume=None, should_stop=None):
        from prednet_keras.session import protocol_training

        return protocol_training.run_protocol(session, kind, runtime_record, quiet=quiet, session_callbacks=callbacks,
                                              resume=resume, should_stop=should_stop)

