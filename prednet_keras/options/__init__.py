"""A training run's options as data and the rules of values, no framework at import.

Reached module by module (this face imports nothing): recipe (a training run's options as data: Lotter's
recipe, its loss weights), record (OptionsRecord: an options dataclass to a manifest's JSON and back),
value_rules (the rules a value read from a user's file follows: a study spec's, a model kind's, the runtime
options'), frame_size (the frame sizes a PredNet of N layers takes, checked without Keras).
"""
