"""Early stopping on the validation loss (`prednet-train --patience N`), resumable.

Keras' EarlyStopping, with its count restored on --resume from the run's
state (the best epoch and its validation loss), so an interrupted and resumed
run stops at the epoch an uninterrupted one would. Nothing is restored into
the model: model.keras is already the best epoch's (RunRecorder).
"""

import keras

from prednet_keras.session.folder import plural

__all__ = ["ResumableEarlyStopping"]


class ResumableEarlyStopping(keras.callbacks.EarlyStopping):
    """Stops training once val_loss has not improved for `patience` epochs.

    Improvement is a strictly lower val_loss, as RunRecorder's best epoch.

    Args:
        patience: epochs without improvement before stopping (>= 1).
        epochs: the run's total epochs (a stop after the last one is no early stop).
        best: (best epoch, counted from 1, val_loss) of the epochs already
            completed, or None.
        first_epoch: epochs already completed (0 for a new run).
    """

    def __init__(self, patience, epochs, best=None, first_epoch=0):
        super().__init__(monitor="val_loss", mode="min", patience=patience)
        self.epochs = epochs
        self._restored = best
        self._first_epoch = first_epoch

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        if self._restored:
            epoch, value = self._restored
            self.best, self.best_epoch = float(value), int(epoch) - 1
            # Keras counts the epochs since the best one.
            self.wait = self._first_epoch - int(epoch)

    def record(self):
        """The manifest's result.stopped_early, or None when training was not cut short."""
        stopped = self.stopped_epoch + 1
        if self.stopped_epoch <= 0 or stopped >= self.epochs:
            return None
        return {
            "epoch": stopped,
            "reason": f"val_loss did not improve for {plural(self.wait, 'epoch')} (--patience {self.patience})",
            "best_epoch": self.best_epoch + 1,
            "patience": self.patience,
        }
