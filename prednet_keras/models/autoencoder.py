"""The MNIST autoencoders: the study's control model, the one that showed no "GPU effect".

The paper describes it only as "a simple autoencoder" trained on MNIST one
image per batch. Two are offered, both textbook MNIST autoencoders (the two of
the Keras blog post "Building Autoencoders in Keras", Chollet 2016), small
enough to train one image per update on a CPU:

    conv   (28, 28, 1) -> Conv 16 3x3 relu -> maxpool 2 -> Conv 8 3x3 relu ->
           maxpool 2 [code 7x7x8 = 392] -> Conv 8 3x3 relu -> up 2 ->
           Conv 16 3x3 relu -> up 2 -> Conv 1 3x3 linear        3,217 parameters
    dense  (28, 28, 1) -> flatten -> Dense 64 relu [code 64] ->
           Dense 784 linear -> reshape (28, 28, 1)            101,200 parameters

Why these two: the convolutional one runs the same kinds of kernels as PredNet
(3x3 convolutions, max pooling, nearest upsampling), so a control built from it
separates "this model" from "these kernels"; the dense one runs matrix
products only, the other end of what a device can do differently. Both are
trained with the per-pixel MSE (the loss the study reported) and end in a
linear output: with the blog's sigmoid output, MSE and one image per update,
the first updates saturate the sigmoid and the convolutional one stays at
"all black" (test MSE 0.104, worse than the mean image's 0.065) for thousands
of images; with a linear output it reaches 0.012 after 1,000. Reconstructions
are clipped to [0, 1] for display only. Weights use Keras' default initializers
(glorot_uniform, zeros), which `prednet_keras.models.starting_point` reproduces with
numpy so that every arm of a comparison starts alike.

Training (one image per update, the protocol's metric) is in
`prednet_keras.models.autoencoder_protocol.train_autoencoder`.
"""

import keras
import numpy as np
from keras import layers

__all__ = [
    "AUTOENCODERS",
    "autoencoder_mse",
    "build_autoencoder",
    "mean_image_mse",
    "mnist_images",
    "reconstruction_grid",
    "save_reconstruction_grid",
]

AUTOENCODERS = ("conv", "dense")
IMAGE_SHAPE = (28, 28, 1)


def build_autoencoder(kind="conv", name=None):
    """An uncompiled MNIST autoencoder: images (batch, 28, 28, 1) in [0, 1] -> reconstructions.

    Args:
        kind: "conv" or "dense" (see the module docstring).
        name: model name; default "autoencoder_{kind}".

    Returns:
        A built `keras.Model`.
    """
    if kind not in AUTOENCODERS:
        raise ValueError(f"Unknown autoencoder {kind!r}; expected one of {', '.join(AUTOENCODERS)}.")
    inputs = keras.Input(IMAGE_SHAPE, name="images")
    outputs = _ARCHITECTURES[kind](inputs)
    return keras.Model(inputs, outputs, name=name or f"autoencoder_{kind}")


def mnist_images(images):
    """uint8 MNIST images (N, 28, 28) -> float32 (N, 28, 28, 1) in [0, 1]."""
    images = np.asarray(images)
    if images.ndim == 3:
        images = images[..., np.newaxis]
    if images.shape[1:] != IMAGE_SHAPE:
        raise ValueError(f"MNIST images must be (N, 28, 28) or (N, 28, 28, 1), got {images.shape}.")
    if images.dtype == np.uint8:
        return images.astype(np.float32) / np.float32(255)
    return images.astype(np.float32, copy=False)


def autoencoder_mse(model, images, batch_size=500):
    """Mean per-pixel squared reconstruction error over `images` (float images in [0, 1]).

    Accumulated per batch in float64, so the result does not depend on the batch size beyond round-off.
    """
    images = mnist_images(images)
    total = 0.0
    for start in range(0, len(images), batch_size):
        batch = images[start : start + batch_size]
        out = np.asarray(keras.ops.convert_to_numpy(model(batch, training=False)), dtype=np.float64)
        total += float(np.sum((out - batch.astype(np.float64)) ** 2))
    return total / images.size


def mean_image_mse(train_images, test_images):
    """The MSE of always answering the mean training image: the bar an autoencoder must clear."""
    mean = mnist_images(train_images).astype(np.float64).mean(axis=0)
    test = mnist_images(test_images).astype(np.float64)
    return float(np.mean((test - mean) ** 2))


def reconstruction_grid(model, images, count=10):
    """A (2*28, count*28) float image: originals on the top row, reconstructions below."""
    images = mnist_images(images)[:count]
    recon = np.asarray(keras.ops.convert_to_numpy(model(images, training=False)))
    top = np.concatenate(list(images[..., 0]), axis=1)
    bottom = np.concatenate(list(np.clip(recon[..., 0], 0, 1)), axis=1)
    return np.concatenate([top, bottom], axis=0)


def save_reconstruction_grid(model, images, path, count=10):
    """Writes `reconstruction_grid` as a grey-scale PNG (scaled up 4x for viewing)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = reconstruction_grid(model, images, count)
    plt.imsave(path, np.kron(grid, np.ones((4, 4))), cmap="gray", vmin=0.0, vmax=1.0)


def _conv(inputs):
    x = layers.Conv2D(16, 3, activation="relu", padding="same", name="encode_conv1")(inputs)
    x = layers.MaxPooling2D(2, name="encode_pool1")(x)
    x = layers.Conv2D(8, 3, activation="relu", padding="same", name="encode_conv2")(x)
    x = layers.MaxPooling2D(2, name="code")(x)
    x = layers.Conv2D(8, 3, activation="relu", padding="same", name="decode_conv1")(x)
    x = layers.UpSampling2D(2, name="decode_up1")(x)
    x = layers.Conv2D(16, 3, activation="relu", padding="same", name="decode_conv2")(x)
    x = layers.UpSampling2D(2, name="decode_up2")(x)
    return layers.Conv2D(1, 3, padding="same", name="reconstruction")(x)


def _dense(inputs):
    x = layers.Flatten(name="flatten")(inputs)
    x = layers.Dense(64, activation="relu", name="code")(x)
    x = layers.Dense(int(np.prod(IMAGE_SHAPE)), name="decode")(x)
    return layers.Reshape(IMAGE_SHAPE, name="reconstruction")(x)


_ARCHITECTURES = {"conv": _conv, "dense": _dense}
