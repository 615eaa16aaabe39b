"""The kind "prednet": Lotter's PredNet, trained by the authors' KITTI recipe (its protocol,
session.protocol.RecipeProtocol, runs session/recipe_training.py: epochs, validation, checkpoints, --resume)."""

from prednet_keras.options import value_rules as rules
from prednet_keras.model_kinds import base
from prednet_keras.session.protocol import RecipeProtocol

__all__ = ["KIND", "LotterKind"]


class LotterKind(base.ModelKind):
    name = "prednet"
    help = "Lotter's PredNet"
    session_protocol = RecipeProtocol()
    follows_recipe = True
    precision_modes = True
    options = ("stack_sizes", "r_stack_sizes", "filter_size", "data", "val_data", "val_fraction", "size", "epochs",
               "steps_per_epoch", "batch_size", "nt", "lr", "lr_drop_epoch", "lr_drop_factor", "layer_loss",
               "val_sequences", "seed", "unroll", "augment", "init_weights", "patience", "devices")
    bench = base.BenchDefaults(size=(128, 160), nt=10, min_nt=2, unroll=True)
    # [train] options added after studies were run, with the value those runs had.
    predating_train_options = {"unroll": False, "augment": [], "patience": None}

    def config_class(self):
        from prednet_keras.options.recipe import TrainConfig

        return TrainConfig

    def train_rules(self):
        from prednet_keras.options.recipe import AUGMENTATIONS

        return {
            **base.SHARED_TRAIN_RULES,
            "nt": rules.Whole(2, 1000, "frames per training sequence"),
            "batch_size": rules.Whole(1, 1024, "sequences per step"),
            "epochs": rules.Whole(1, 100_000, "the recipe trains 150"),
            "steps_per_epoch": rules.Whole(1, 1_000_000, "the recipe's: 125"),
            "lr": rules.Number(0),
            "lr_drop_epoch": rules.Whole(0, 100_000, "at most the epochs' cap"),
            "lr_drop_factor": rules.Number(0),
            "layer_loss": rules.Either((rules.Choice(("L_0", "L_all")), rules.ListOf(rules.Number(0, low_open=False), 1, 8))),
            "val_sequences": rules.Whole(0, 1_000_000, "validation sequences held in memory"),
            "val_data": rules.PATH,
            "val_fraction": rules.Number(0, 1),
            "unroll": rules.Boolean(),
            "augment": rules.ListOf(rules.Choice(AUGMENTATIONS), 0, len(AUGMENTATIONS)),
            "patience": rules.Whole(1, 100_000, "epochs without a lower validation loss before stopping"),
        }

    def build_for_starting_point(self, options):
        from prednet_keras.options.recipe import TrainConfig
        from prednet_keras.session import recipe_training, training_data

        config = TrainConfig.from_dict(options).resolved()
        frames, _, _ = training_data.load_training_data(config)
        built, _ = recipe_training.build_model(config, frames.frame_shape, jit_compile=False)
        return built

    def bench_runner(self, config, phase, jit_compile, rng, kit):
        import numpy as np

        from prednet_keras.models.lotter import build_prediction_model
        from prednet_keras.options.recipe import TrainConfig
        from prednet_keras.session import recipe_training

        train_config = TrainConfig(
            stack_sizes=config.stack_sizes, nt=config.nt, batch_size=config.batch_size, val_sequences=0,
            unroll=config.unroll,
        ).resolved()
        model, _ = recipe_training.build_model(train_config, config.frame_shape, jit_compile)
        x = kit.synthetic(rng, (config.batch_size, config.nt) + config.frame_shape)
        parameters = int(model.count_params())
        if phase == "train":
            y = np.zeros((config.batch_size, 1), np.float32)
            # Recorded in every benchmark document (docs/benchmarks/*.json): the words stay as first written,
            # when build_model lived in train.py, so that the documents read alike.
            notes = (
                f"model.fit of train.build_model's model (Adam 1e-3, MAE of the L_0-weighted error, time loop "
                f"{'unrolled' if config.unroll else 'rolled'}), as prednet-train runs it: next batch sent ahead, "
                f"each loss read after the next step is dispatched; step time = time between losses arriving"
            )
            return kit.Runner(kit.fit_loop(model, x, y), parameters, config.frames_per_step, notes)
        predictor = build_prediction_model(model, nt=config.nt)
        predictor.compile(jit_compile=jit_compile)

        def step():
            return np.asarray(predictor.predict_on_batch(x))

        notes = "predict_on_batch of build_prediction_model (output_mode prediction)"
        return kit.Runner(kit.one_by_one(step), parameters, config.frames_per_step, notes)


KIND = LotterKind()
