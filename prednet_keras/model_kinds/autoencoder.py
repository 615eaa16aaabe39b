"""The kind "autoencoder": the study's MNIST control (`prednet_keras.models.autoencoder`), trained one image per
update (`autoencoder_protocol.train_autoencoder`)."""

import os

from prednet_keras.model_kinds import base
from prednet_keras.model_kinds.study_config import AUTOENCODERS, ProtocolKind, flag

__all__ = ["KIND", "AutoencoderKind", "describe_mnist"]

MNIST_SHAPE = (28, 28, 1)


class AutoencoderKind(ProtocolKind):
    name = "autoencoder"
    help = "the study's MNIST autoencoder"
    options = ("protocol", "autoencoder", "data", "seed", "init_weights", "images")
    protocol_overrides = ("images",)
    history_columns = ("update", "loss", "image", "seconds")
    evaluation = "reconstruction"
    # StudyConfig's fields added after studies were run, as those runs' [train] would now read (unset).
    predating_train_options = {"unroll": None, "heldout_data": None}
    bench = base.BenchDefaults(image_shape=MNIST_SHAPE, nt=1, variants=AUTOENCODERS,
                               fixed_note="28x28 MNIST images")

    def resolve_config(self, config):
        if config.autoencoder is None:
            config.autoencoder = "conv"
        return config

    def validate_config(self, config):
        if config.autoencoder not in AUTOENCODERS:
            raise ValueError(f"--autoencoder must be one of {', '.join(AUTOENCODERS)}, got {config.autoencoder!r}.")
        for name in ("tbptt", "emulate_cpu_aliasing", "stack_sizes", "r_stack_sizes", "filter_size", "size",
                     "period", "bprop", "unroll", "heldout_data"):
            if getattr(config, name) is not None:
                raise ValueError(f"{flag(name)} applies to --model prednet-chainer, not to --model autoencoder.")

    # -- training ---------------------------------------------------------------------------------------

    def load_data(self, config):
        from prednet_keras.data import embedded_mnist_path

        print(f"Loading MNIST ({'embedded copy' if config.data is None else config.data}) ...", flush=True)
        mnist = self.load_data_quietly(config)
        return mnist, describe_mnist(mnist, config.data or f"embedded:{os.path.basename(str(embedded_mnist_path()))}")

    def load_data_quietly(self, config):
        from prednet_keras.data import load_mnist

        return load_mnist(config.data)

    def build(self, config, data):
        from prednet_keras.models import autoencoder as ae

        return ae.build_autoencoder(config.autoencoder)

    def build_for_starting_point(self, options):
        # The architecture alone: no data to read.
        config = self.config_class().from_dict(options).resolved()
        return self.build(config, None)

    def plan(self, config, data, preset):
        from prednet_keras.models import autoencoder_protocol, starting_point

        order = autoencoder_protocol.autoencoder_order(len(data[0][0]), preset.images, config.seed)
        return preset.images, starting_point.order_checksum(order)

    def label(self, config):
        return f"autoencoder {config.autoencoder} ({config.protocol})"

    def protocol_record(self, config, preset):
        import dataclasses

        return {"model": config.model, "preset": dataclasses.asdict(preset), "autoencoder": config.autoencoder}

    def train(self, config, data, preset, *, initial_weights, on_update, jit_compile, on_start, checkpoint=None):
        from prednet_keras.models import autoencoder_protocol

        return autoencoder_protocol.train_autoencoder(
            config.autoencoder,
            protocol=preset,
            seed=config.seed,
            initial_weights=initial_weights,
            on_update=on_update,
            mnist=data,
            jit_compile=jit_compile,
            on_start=on_start,
            checkpoint=checkpoint,
        )

    # -- prednet-bench ------------------------------------------------------------------------------------

    def bench_runner(self, config, phase, jit_compile, rng, kit):
        import numpy as np

        from prednet_keras.models import autoencoder
        from prednet_keras.models.protocols import chainer_adam
        from prednet_keras.models.torch_training_step import compile_for_training

        model = autoencoder.build_autoencoder(config.autoencoder)
        compile_for_training(model, optimizer=chainer_adam(), loss="mean_squared_error", jit_compile=jit_compile)
        x = kit.synthetic(rng, (config.batch_size,) + MNIST_SHAPE)
        if phase == "train":

            def step():
                return float(np.asarray(model.train_on_batch(x, x, return_dict=True)["loss"]))

            notes = f"train_on_batch of the {config.autoencoder} MNIST autoencoder (Chainer's Adam, MSE)"
        else:

            def step():
                return np.asarray(model.predict_on_batch(x))

            notes = f"predict_on_batch of the {config.autoencoder} MNIST autoencoder"
        return kit.Runner(kit.one_by_one(step), int(model.count_params()), config.frames_per_step, notes)

    def bench_label(self, config):
        return f"autoencoder ({config.autoencoder}), batch {config.batch_size}"

    def bench_row_name(self, config):
        return f"autoencoder-{config['autoencoder']}"


def describe_mnist(mnist, origin):
    """The manifest's `data` record of MNIST arrays: sizes and one checksum of all four arrays."""
    import hashlib

    import numpy as np

    (x_train, y_train), (x_test, y_test) = mnist
    digest = hashlib.sha256()
    for array in (x_train, y_train, x_test, y_test):
        digest.update(np.ascontiguousarray(array).tobytes())
    return {
        "train": {"source": origin, "images": int(len(x_train)), "checksum": digest.hexdigest()},
        "test": {"source": origin, "images": int(len(x_test))},
    }


KIND = AutoencoderKind()
