"""How a model kind trains in the one training session (`session.training`): the protocol interface.

A kind states its protocol as one object (`ModelKind.session_protocol`), in the spirit of a Keras model's
`fit`: the session opens the run (`bookkeeping.RunSession`), the protocol trains in it, reporting every
update and epoch through Keras callbacks (`callbacks`: under `fit` Keras calls them; a protocol that steps by
itself calls the same methods, `on_train_begin` and `on_train_batch_end`, on the same kind of objects), the
session's own callbacks (`StopOnRequest`) after its own, and the session's records (the manifest,
history.csv, loss.png) are written through the session.

What differs between protocols is stated, not tested for:
- `can_resume`: whether the protocol checkpoints every epoch, so that `prednet-train --resume` continues a
  run (Lotter's recipe), or keeps no checkpoints, so that a run is started again (the Chainer window, the
  autoencoder, a user's model: their final weights are their result).
- `record_runtime`: when this process's runtime is first written to the manifest: before the session opens
  (a protocol that always starts anew), or with the session once a resumed run is verified (the recipe).

The two protocols: `RecipeProtocol` (Lotter's KITTI recipe with Keras fit, `recipe_training`) and
`UpdateProtocol` (a kind's protocol counted in updates, `protocol_training`). No framework at import: the
CLI reads `can_resume` before any training process starts.
"""

__all__ = ["RecipeProtocol", "TrainingProtocol", "UpdateProtocol"]


class TrainingProtocol:
    """How one model kind trains in a session; subclasses implement `run`.

    Attributes:
        can_resume: True when every completed epoch is checkpointed, so --resume continues the run.
    """

    can_resume = False

    def __repr__(self):
        return f"<{type(self).__name__}>"

    def record_runtime(self, folder, runtime_record):
        """Writes this process's runtime to the manifest before the session opens (default: nothing; the
        run's `run` records it with its session)."""

    def run(self, session, kind, callbacks=(), runtime_record=None, quiet=False, resume=None):
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
        """
        raise NotImplementedError


class RecipeProtocol(TrainingProtocol):
    """Lotter's KITTI recipe with Keras fit: epochs, validation, a checkpoint every epoch, --resume."""

    can_resume = True

    def run(self, session, kind, callbacks=(), runtime_record=None, quiet=False, resume=None):
        from prednet_keras.session import recipe_training

        return recipe_training.run_training(session, runtime_record, quiet=quiet, resume=resume,
                                            session_callbacks=callbacks)


class UpdateProtocol(TrainingProtocol):
    """A kind's own protocol counted in updates (the Chainer window, the autoencoder, a user's model): one
    history row per update; no checkpoints, so a run starts anew."""

    def record_runtime(self, folder, runtime_record):
        from prednet_keras.session.records import Fingerprint, RuntimeEffective

        manifest = folder.read_record()
        recorded = manifest.runtime.effective
        if recorded is None or not recorded.to_dict():  # absent, null or {}: none recorded yet
            manifest.runtime.effective = RuntimeEffective.from_dict(runtime_record["effective"])
            manifest.fingerprint = Fingerprint.from_dict(runtime_record["fingerprint"])
            folder.write_manifest(manifest)

    def run(self, session, kind, callbacks=(), runtime_record=None, quiet=False, resume=None):
        from prednet_keras.session import protocol_training

        return protocol_training.run_protocol(session, kind, runtime_record, quiet=quiet, session_callbacks=callbacks)
