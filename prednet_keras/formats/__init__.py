"""Files written by other programs, and Keras files read and written safely; docs/architecture.md, the map.

keras2: the authors' released Keras 2 files (model JSON and HDF5 weights), read without running anything in
them (`prednet_keras.load_legacy_weights`, `import_legacy_model`). chainer: the study's authors' Chainer npz
files, read and written. keras_files: `.keras` files written whole (`save_model_atomically`) and loaded only
after their archive and config.json are checked (`load_model`).

This module imports nothing: its modules are reached by name, since keras_files imports Keras.
"""
