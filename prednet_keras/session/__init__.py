"""One training run, whoever asks for it (prednet-train, the study's runs); docs/architecture.md, the map.

Its folder: folder (the run folder), records (its manifest, typed), history (history.csv, loss.png), lock (one
writer per folder). One process's work on it: bookkeeping (the session record, status, checked checkpoints),
display (what a run prints), start (a command's new or continued run), worker (the training process),
interrupts (how it stops). The loops: recipe_training (Lotter's recipe, Keras fit, resumable) and
protocol_training (a model kind's protocol, no checkpoints), with training_data, callbacks, early_stopping,
trajectory and torch_compile.

This module imports nothing: its modules are reached by name, since the loops import a framework and the
training process (`python -m prednet_keras.session.worker`) loads this package before anything else.
"""
