"""Your own Keras model through prednet-keras: a small CNN classifier on MNIST.

The function below is all prednet-keras needs: it returns a `UserModel` (the model, its data, its loss).
Train it once, with every runtime switch of the built-in models:

    prednet-train --model prednet_keras.examples.mnist_cnn:small_cnn -o weights/mnist-cnn
    prednet-train --model prednet_keras.examples.mnist_cnn:small_cnn --backend jax --threads 1 --deterministic

or ask the study's question of it (does the hardware / software stack change what it learns?):

    prednet-study run mnist-cnn -o studies/mnist-cnn          # the spec prednet_keras/study/specs/mnist-cnn.toml
    prednet-study report studies/mnist-cnn

Rules of the contract (prednet_keras/model_kinds/user.py says them in full): the function takes no
argument it needs (these have defaults) and returns the same architecture and the same data on every call;
it draws no random numbers of its own. The run's seed sets the initial weights (drawn with numpy, the same
on every backend and device) and the order of the training examples, so every configuration of a study
starts from the same weights and sees the same batches. history.csv gets the loss of every batch; the
study compares the mean loss of the last `metric_updates` batches.
"""

import keras

from prednet_keras.datasets import load_mnist
from prednet_keras.model_kinds import UserModel


def small_cnn(train_images=6000, val_images=1000, batch_size=32, epochs=1):
    """A 2-convolution MNIST classifier (about 5,000 parameters) on the first `train_images` digits."""
    (x_train, y_train), (x_test, y_test) = load_mnist()  # the embedded copy: nothing to download

    def images(x):
        return (x[..., None] / 255.0).astype("float32")

    # The functional API, with named layers: a keras.Sequential built inside a function gives its weights
    # other paths than the same model loaded from model.keras, and prednet-eval's check of the saved
    # weights against the run's record compares them by path.
    inputs = keras.Input((28, 28, 1), name="digits")
    x = keras.layers.Conv2D(8, 3, activation="relu", name="conv1")(inputs)
    x = keras.layers.MaxPooling2D(2, name="pool1")(x)
    x = keras.layers.Conv2D(16, 3, activation="relu", name="conv2")(x)
    x = keras.layers.MaxPooling2D(2, name="pool2")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    outputs = keras.layers.Dense(10, name="logits")(x)
    model = keras.Model(inputs, outputs, name="small_cnn")
    return UserModel(
        model=model,
        train_data=(images(x_train[:train_images]), y_train[:train_images].astype("int32")),
        val_data=(images(x_test[:val_images]), y_test[:val_images].astype("int32")),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        batch_size=batch_size,
        epochs=epochs,
        metric_updates=20,
    )
