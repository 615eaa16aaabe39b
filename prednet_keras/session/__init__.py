"""One training run, whoever asks for it (prednet-train, the study's runs); docs/architecture.md, the map.

Its folder: folder (the run folder), records (its manifest, typed), history (history.csv, loss.png), lock (one
writer per folder). One process's work on it: bookkeeping (the session record, status, checked checkpoints),
display (what a run prints), start (a command's new or continued run), worker (the training process),
interrupts (how it stops). One training session for every model kind: training (the process's one entry)
runs the protocol the kind states (protocol: what it can do, resume or not, stated there):
recipe_training (Lotter's recipe, Keras fit, checkpoints, resumable) or protocol_training (a protocol
counted in updates: the Chainer window, the autoencoder, a user's model; checkpointed and resumable unless
the kind states it cannot). Every protocol
reports through the Keras callbacks of callbacks; with training_data, early_stopping, trajectory and
torch_compile.

This module imports nothing: its modules are reached by name, since the loops import a framework and the
training process (`python -m prednet_keras.session.worker`) loads this package before anything else.
"""
