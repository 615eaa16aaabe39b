"""The kind "prednet-chainer": the study's Chainer-lineage PredNet, trained as the authors' main.py
(`chainer_protocol.train_chainer_prednet`), window by window at batch 1."""

from prednet_keras.options import value_rules as rules
from prednet_keras.model_kinds import base
from prednet_keras.model_kinds.study_config import CHAINER_DEFAULT_SIZE, EMBEDDED_HELDOUT, TBPTT_MODES, ProtocolKind

__all__ = ["KIND", "ChainerKind"]


class ChainerKind(ProtocolKind):
    name = "prednet-chainer"
    help = "the study's Chainer-lineage PredNet"
    options = ("protocol", "tbptt", "emulate_cpu_aliasing", "stack_sizes", "r_stack_sizes", "filter_size", "data",
               "size", "seed", "init_weights", "period", "bprop", "unroll", "heldout_data")
    arm_factors = {"tbptt": "chainer", "emulate_cpu_aliasing": False}
    protocol_overrides = ("period", "bprop")
    accepts_chainer_npz = True
    history_columns = ("update", "loss", "window_loss", "sequence", "frame", "frames_seen", "steps", "seconds")
    bench = base.BenchDefaults(size=(120, 160), nt=20, min_nt=1, train_batch_one=True, unroll=True,
                               unroll_default=False)
    # [train] options added after studies were run, with the value those runs had.
    predating_train_options = {"unroll": False, "heldout_data": None}

    def factor_rules(self):
        return {"tbptt": rules.Choice(TBPTT_MODES), "emulate_cpu_aliasing": rules.Boolean()}

    def resolve_config(self, config):
        if config.tbptt is None:
            config.tbptt = "chainer"
        if config.emulate_cpu_aliasing is None:
            config.emulate_cpu_aliasing = False
        if config.filter_size is None:
            config.filter_size = 3
        if config.size is None:
            config.size = CHAINER_DEFAULT_SIZE
        if config.unroll is None:
            # Rolled, as every run before the option (which is faster depends on the backend: ChainerPredNetTrainer).
            config.unroll = False
        return config

    def validate_config(self, config):
        if config.autoencoder is not None:
            raise ValueError("--autoencoder applies to --model autoencoder, not to --model prednet-chainer.")
        if config.images is not None:
            raise ValueError("--images applies to --model autoencoder, not to --model prednet-chainer.")
        if not isinstance(config.unroll, bool):
            raise ValueError(f"--unroll must be true or false, got {config.unroll!r}.")
        if config.tbptt not in TBPTT_MODES:
            raise ValueError(f"--tbptt must be one of {', '.join(TBPTT_MODES)}, got {config.tbptt!r}.")
        if config.filter_size < 1 or config.filter_size % 2 == 0:
            raise ValueError(f"--filter-size must be odd and >= 1, got {config.filter_size}.")
        if config.stack_sizes is not None and len(config.stack_sizes) < 1:
            raise ValueError("--stack-sizes must name at least one layer.")
        layers = len(config.stack_sizes) if config.stack_sizes is not None else 4
        if config.r_stack_sizes is not None and len(config.r_stack_sizes) != layers:
            raise ValueError(f"--r-stack-sizes has {len(config.r_stack_sizes)} values but the model has {layers} "
                             "layers.")
        if len(config.size) != 2 or min(config.size) < 1:
            raise ValueError(f"--size must be HxW with positive numbers, got {config.size}.")
        from prednet_keras.options.frame_size import check_frame_size

        check_frame_size(config.size[0], config.size[1], layers)
        self._check_heldout_apart(config)

    @staticmethod
    def _check_heldout_apart(config):
        """Refuses held-out data that the run also trains on (a score on trained frames is not held out)."""
        import os

        heldout = config.heldout_data
        if heldout is None:
            return
        if heldout == EMBEDDED_HELDOUT:
            if config.data is None:
                raise ValueError("--heldout-data embedded holds out the embedded video, which is also the training "
                                 "data when --data is not given: give --data another set.")
        elif config.data is not None and os.path.abspath(heldout) == os.path.abspath(config.data):
            raise ValueError(f"--heldout-data {heldout} is the training data (--data): held-out frames must be "
                             "frames no update trains on.")

    # -- training ---------------------------------------------------------------------------------------

    def load_data(self, config):
        from prednet_keras.session.training_data import describe_data

        origin = config.data or "embedded:train"
        print(f"Loading frames ({'embedded real video' if config.data is None else config.data}) ...", flush=True)
        dataset = self.load_data_quietly(config)
        return dataset, {"train": describe_data(dataset, origin)}

    def load_data_quietly(self, config):
        from prednet_keras import data as pdata

        return pdata.load_frames(config.data or pdata.embedded_dataset("train"), size=config.size)

    def build(self, config, data):
        from prednet_keras.models import chainer_protocol

        return chainer_protocol.build_chainer_prednet(data.frame_shape, config.model_config())

    def plan(self, config, data, preset):
        from prednet_keras.models import chainer_protocol, starting_point

        windows, _ = chainer_protocol.plan_windows(
            [len(s) for s in chainer_protocol.chainer_sequences(data)], preset.period, preset.bprop
        )
        # main.py's order: the sequences in turn, cycled; the windows say it all.
        return len(windows), starting_point.order_checksum(
            [v for w in windows for v in (w.sequence, w.first_step, w.last_step)]
        )

    def evaluate_heldout(self, config, model):
        from prednet_keras.models import chainer_protocol
        from prednet_keras import data as pdata
        from prednet_keras.session.training_data import describe_data

        if config.heldout_data is None:
            return None
        if config.heldout_data == EMBEDDED_HELDOUT:
            origins = [(f"embedded:{split}", pdata.embedded_dataset(split)) for split in ("train", "val", "test")]
        else:
            origins = [(config.heldout_data, config.heldout_data)]
        sequences, predictions, described = [], {}, []
        for origin, path in origins:
            dataset = pdata.load_frames(path, size=config.size)
            described.append(describe_data(dataset, origin))
            errors, predicted = chainer_protocol.heldout_errors(model, dataset)
            for (source, start, stop), error, frames in zip(dataset.source_runs(), errors, predicted):
                name = f"{origin}#{len(sequences)}"
                sequences.append({"name": name, "source": str(source), "frames": stop - start, "error": error})
                predictions[name] = frames
        mean = sum(s["error"] for s in sequences) / len(sequences)
        record = {
            "heldout_error": mean,
            "heldout": {
                "description": "next-frame MSE on frames no update trained on: per sequence, the mean over its "
                               "T-1 predictions of the per-frame MSE; heldout_error is the mean over sequences",
                "data": described,
                "sequences": sequences,
            },
        }
        return record, predictions

    def label(self, config):
        return f"prednet-chainer ({config.protocol}, tbptt {config.tbptt})"

    def study_settings(self, config):
        return {"tbptt": config.tbptt, "emulate_cpu_aliasing": bool(config.emulate_cpu_aliasing)}

    def protocol_record(self, config, preset):
        import dataclasses

        return {"model": config.model, "preset": dataclasses.asdict(preset), "model_config": config.model_config(),
                "size": list(config.size)}

    def train(self, config, data, preset, *, initial_weights, on_update, jit_compile, on_start, checkpoint=None):
        from prednet_keras.models import chainer_protocol

        return chainer_protocol.train_chainer_prednet(
            data,
            model_config=config.model_config(),
            protocol=preset,
            tbptt=config.tbptt,
            emulate_cpu_aliasing=config.emulate_cpu_aliasing,
            seed=config.seed,
            initial_weights=initial_weights,
            on_update=on_update,
            jit_compile=jit_compile,
            on_start=on_start,
            checkpoint=checkpoint,
            unroll=config.unroll,
        )

    # -- prednet-bench ------------------------------------------------------------------------------------

    def bench_runner(self, config, phase, jit_compile, rng, kit):
        import numpy as np

        from prednet_keras.models.chainer_protocol import ChainerPredNetTrainer

        model_config = {"stack_sizes": tuple(config.stack_sizes)}
        trainer = ChainerPredNetTrainer(config.frame_shape, model_config, bprop=config.nt, jit_compile=jit_compile,
                                        unroll=config.unroll)
        parameters = int(trainer.layer.count_params())
        if phase == "train":
            # One window: nt frame steps (nt + 1 frames: inputs and the last target), batch 1.
            window = kit.synthetic(rng, (config.nt + 1,) + config.frame_shape)
            count = [0]

            def step():
                count[0] += 1
                return trainer.update(window, starts_sequence=count[0] == 1)

            notes = (
                "ChainerPredNetTrainer.update: one truncated-BPTT window of nt frame steps at batch 1 "
                f"(tbptt chainer, Chainer's Adam, time loop {'unrolled' if config.unroll else 'rolled'}), as "
                "train_chainer_prednet"
            )
        else:
            predictor = trainer.prediction_model(nt=config.nt)
            predictor.compile(jit_compile=jit_compile)
            x = kit.synthetic(rng, (config.batch_size, config.nt) + config.frame_shape)

            def step():
                return np.asarray(predictor.predict_on_batch(x))

            notes = "predict_on_batch of ChainerPredNetTrainer.prediction_model"
        return kit.Runner(kit.one_by_one(step), parameters, config.frames_per_step, notes)


KIND = ChainerKind()
