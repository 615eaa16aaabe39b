"""The MNIST autoencoder's training protocol (the study's control), on any Keras backend.

MNIST autoencoder (`train_autoencoder`): one image per update, Adam as the Chainer PredNet's
(`protocols.chainer_adam`), per-pixel MSE; the metric is the mean loss over the last 1000 images.
"""

import dataclasses
import time

import keras
import numpy as np

from prednet_keras import backends
from prednet_keras.models.lotter import LastBatchMSE
from prednet_keras.models.torch_training_step import compile_for_training
from prednet_keras.models.protocols import (
    BackendCannotTrainThis,
    ProtocolResult,
    UpdateLog,
    UpdateRecorder,
    chainer_adam,
    load_initial_weights_into,
    protocol_metric,
    resolve_protocol,
)

__all__ = ["BackendCannotTrainThis", "autoencoder_order", "train_autoencoder"]

# What PyTorch's CPU convolution (slow_conv2d) raises for a batch of one image with a kernel view Keras gives it.
TORCH_CPU_BATCH_1_BUG = "slow_conv2d: grad_weight must be contiguous"


def autoencoder_order(count, images, seed):
    """Training-image indices for `images` updates: passes over the `count` images
    chained, pass k in `starting_point.data_order(count, seed, epoch=k)` order (pass 0: epoch None)."""
    from prednet_keras.models import starting_point

    passes = []
    for k in range(-(-int(images) // int(count))):
        passes.append(starting_point.data_order(count, seed, epoch=k if k else None))
    return np.concatenate(passes)[: int(images)]


def train_autoencoder(
    kind="conv",
    *,
    protocol="paper",
    seed=0,
    initial_weights=None,
    on_update=None,
    mnist=None,
    jit_compile="auto",
    images=None,
    on_start=None,
    checkpoint=None,
):
    """Trains an MNIST autoencoder one image per update (the study's control).

    Args:
        kind: "conv" or "dense" (`prednet_keras.models.autoencoder`).
        protocol: "paper", "quick" or an `AutoencoderProtocol`.
        seed: seed of the initial weights (numpy, the same on every backend)
            and of the image order.
        initial_weights: a starting_point HDF5 file instead of the seed's weights.
        on_update: called after every image with its record (dict: update,
            image, loss, seconds).
        mnist: `load_mnist()`'s ((x_train, y_train), (x_test, y_test)), or a
            path load_mnist reads; None: the embedded MNIST.
        jit_compile: Model.compile's jit_compile.
        images: override the protocol's number of training images.
        on_start: called once with the compiled model, after its initial
            weights are set and before the first update. A callback reading
            weights during training must sync them first on JAX
            (`model.jax_state_sync()`): fit keeps them outside the variables.
        checkpoint: the run's checkpoints (`protocols`' module docstring): it is given the compiled
            model (its weights and Adam's variables); the images after its records are trained, in
            the same order.

    Returns:
        ProtocolResult: model = the trained autoencoder, records (one per
        image), metric (mean loss of the last `metric_images` images), summary
        (train_mse, test_mse and the mean-image baseline on the evaluation images).
    """
    from prednet_keras.models import autoencoder as ae
    from prednet_keras.data import load_mnist

    protocol = resolve_protocol("autoencoder", protocol, images=images)
    if mnist is None or not isinstance(mnist, tuple):
        mnist = load_mnist(mnist)
    (x_train, _), (x_test, _) = mnist
    model = ae.build_autoencoder(kind)
    initial = load_initial_weights_into(model, initial_weights, seed)
    compile_for_training(
        model,
        optimizer=chainer_adam(protocol.lr, protocol.beta_1, protocol.beta_2, protocol.epsilon),
        loss="mean_squared_error",
        metrics=[LastBatchMSE()],
        jit_compile=jit_compile,
    )
    done = ()
    if checkpoint is not None:
        checkpoint.attach(model)
        done = checkpoint.records
    if on_start is not None:
        on_start(model)
    order = autoencoder_order(len(x_train), protocol.images, seed)
    # A continued run trains the images after those its checkpoint records, in the same order.
    inputs = ae.mnist_images(x_train[order[len(done):]])
    log = UpdateLog(on_update, records=done)
    started = time.perf_counter()
    if len(inputs):
        try:
            model.fit(
                inputs,
                inputs,
                batch_size=1,
                epochs=1,
                shuffle=False,  # the order is the seeded one above, the same on every backend
                verbose=0,
                callbacks=[UpdateRecorder(log, "image_mse", fields=lambda index: {"image": int(order[index])})],
            )
        except RuntimeError as error:
            if TORCH_CPU_BATCH_1_BUG not in str(error):
                raise
            raise BackendCannotTrainThis(
                f"{backends.named(keras.backend.backend()).display_name} on the CPU cannot train the {kind} autoencoder one image at a time: "
                f"the first update failed with '{TORCH_CPU_BATCH_1_BUG}' (a PyTorch bug in batch-1 convolution "
                "gradients on the CPU, torch 2.11-2.13; docs/determinism.md). Train it with --backend jax or "
                "tensorflow, or on a GPU."
            ) from None
    seconds = time.perf_counter() - started
    records = log.records
    del inputs

    count = protocol.eval_images
    train_eval = x_train[:count] if count else x_train
    test_eval = x_test[:count] if count else x_test
    summary = {
        "protocol": dataclasses.asdict(protocol),
        "model": "autoencoder",
        "autoencoder": kind,
        "parameters": int(model.count_params()),
        "updates": len(records),
        "initial_weights": initial,
        "train_seconds": round(seconds, 3),
        "train_mse": ae.autoencoder_mse(model, train_eval),
        "test_mse": ae.autoencoder_mse(model, test_eval),
        "mean_image_test_mse": ae.mean_image_mse(x_train, test_eval),
        "eval_images": {"train": int(len(train_eval)), "test": int(len(test_eval))},
        "backend": keras.backend.backend(),
    }
    metric = protocol_metric([r["loss"] for r in records], protocol.metric_images, "images")
    return ProtocolResult(model, records, metric, summary)
