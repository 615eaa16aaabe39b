"""Tests of the data layer (prednet_keras.data, prednet-data)."""
