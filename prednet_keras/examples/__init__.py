"""Worked examples that ship with the package, so the README's commands work from an installed wheel.

    mnist_cnn      your own Keras model through prednet-keras: `prednet-train --model
                   prednet_keras.examples.mnist_cnn:small_cnn`, and the study of it, `prednet-study run mnist-cnn`
"""
