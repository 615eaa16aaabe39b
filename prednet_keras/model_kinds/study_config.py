"""The study's own models (prednet-chainer, autoencoder): their one options record and what their kinds share.

The record's fields are what manifests have always held; what each field means for one model, its
defaults and its checks are the kind's (model_kinds/chainer.py, model_kinds/autoencoder.py).
"""

import dataclasses
import os

from prednet_keras.options import value_rules as rules
from prednet_keras.options.record import OptionsRecord
from prednet_keras.model_kinds import base
from prednet_keras.session.protocol import UpdateProtocol

__all__ = ["AUTOENCODERS", "CHAINER_DEFAULT_SIZE", "EMBEDDED_HELDOUT", "PROTOCOLS", "ProtocolKind", "StudyConfig",
           "TBPTT_MODES", "flag", "names_a_file", "protocol_train_rules", "study_model_names"]

PROTOCOLS = ("paper", "quick")
TBPTT_MODES = ("chainer", "clean")
AUTOENCODERS = ("conv", "dense")
CHAINER_DEFAULT_SIZE = (120, 160)
# heldout_data's name for the embedded video's three splits (train, val and test), all held out at once.
EMBEDDED_HELDOUT = "embedded"


def names_a_file(option, value):
    """Whether a path option's `value` is a file or folder to check and to make absolute: always, but for
    heldout_data's name of the embedded video."""
    return value is not None and not (option == "heldout_data" and value == EMBEDDED_HELDOUT)


def flag(name):
    """The command-line flag of an option: --filter-size."""
    return "--" + name.replace("_", "-")


def study_model_names():
    """The kinds this record is the options of."""
    return tuple(kind.name for kind in base.kinds() if kind.config_class() is StudyConfig)


@dataclasses.dataclass
class StudyConfig(OptionsRecord):
    """Everything that defines a study-model run (the runtime aside).

    Args:
        model: "prednet-chainer" or "autoencoder".
        protocol: "paper" or "quick" (`protocols.PRESETS`).
        tbptt: "chainer" or "clean" (prednet-chainer only).
        emulate_cpu_aliasing: the original's CPU gradients (prednet-chainer only).
        autoencoder: "conv" or "dense" (autoencoder only).
        stack_sizes, r_stack_sizes, filter_size: ChainerPredNet's; None: the study's.
        data: frames (prednet-chainer; default the embedded video's train
            split) or an MNIST file/folder (autoencoder; default the embedded MNIST).
        size: (H, W) frames are resized to (prednet-chainer; default 120x160).
        seed: seed of the initial weights (and of the autoencoder's image order).
        init_weights: a starting_point .h5 (or, prednet-chainer, a Chainer .npz) to start from.
        period, bprop: prednet-chainer only: frames stepped through and frames
            per update, instead of the protocol's (a scaled-down protocol).
        images: autoencoder only: training images instead of the protocol's.
        unroll: prednet-chainer only: the window's time loop unrolled in the
            compiled update (default False: rolled, as records without it).
        heldout_data: prednet-chainer only: frames no update trains on, scored
            after training (`chainer_protocol.heldout_errors`): a dataset path,
            or "embedded" for the three embedded video splits (370 frames; then
            `data` must be another set). None: no held-out score.
    """

    WHAT = "training options"

    model: str = "prednet-chainer"
    protocol: str = "paper"
    tbptt: str = None
    emulate_cpu_aliasing: bool = None
    autoencoder: str = None
    stack_sizes: tuple = None
    r_stack_sizes: tuple = None
    filter_size: int = None
    data: str = None
    size: tuple = None
    seed: int = 0
    init_weights: str = None
    period: int = None
    bprop: int = None
    images: int = None
    unroll: bool = None
    heldout_data: str = None

    @classmethod
    def from_dict(cls, values):
        """The record a to_dict() produced; options it predates take the value its runs had (the kind's
        predating_train_options: a prednet-chainer record without `unroll` trained rolled)."""
        kind = base.find(values.get("model", cls.model))
        return super().from_dict({**(kind.predating_train_options if kind else {}), **values})

    def _kind(self):
        models = study_model_names()
        if self.model not in models:
            raise ValueError(f"--model must be one of {', '.join(models)}, got {self.model!r}.")
        return base.get(self.model)

    def resolved(self):
        """A copy with the model's defaults filled in, validated."""
        config = dataclasses.replace(self)
        config = config._kind().resolve_config(config)
        for name in ("stack_sizes", "r_stack_sizes", "size"):
            value = getattr(config, name)
            if value is not None:
                setattr(config, name, tuple(int(v) for v in value))
        config.validate()
        return config

    def validate(self):
        """Raises ValueError naming the first bad setting (no data is read)."""
        kind = self._kind()
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"--protocol must be one of {', '.join(PROTOCOLS)}, got {self.protocol!r}.")
        for name in ("period", "bprop", "images"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{flag(name)} must be a whole number >= 1, got {value!r}.")
        kind.validate_config(self)

    def training_protocol(self):
        """The protocols' protocol object: the preset with this config's overrides."""
        from prednet_keras.models import protocols

        overrides = {name: getattr(self, name) for name in base.get(self.model).protocol_overrides}
        return protocols.resolve_protocol(self.model, self.protocol, **overrides)

    def check_paths(self):
        """Raises FileNotFoundError for a data or weights path that does not exist."""
        for name in ("data", "init_weights", "heldout_data"):
            value = getattr(self, name)
            if names_a_file(name, value) and not os.path.exists(value):
                raise FileNotFoundError(2, f"{flag(name)}: no such file or folder", value)

    def model_config(self):
        """ChainerPredNet arguments (stack_sizes None: the study's, with the data's channels)."""
        config = {"stack_sizes": self.stack_sizes, "filter_size": self.filter_size}
        if self.r_stack_sizes is not None:
            config["R_stack_sizes"] = self.r_stack_sizes
        return config


def protocol_train_rules():
    """[train]'s rules of the StudyConfig kinds (one record, so one set of rules)."""
    return {
        **base.SHARED_TRAIN_RULES,
        "protocol": rules.Choice(PROTOCOLS),
        "tbptt": rules.Choice(TBPTT_MODES),
        "emulate_cpu_aliasing": rules.Boolean(),
        "autoencoder": rules.Choice(AUTOENCODERS),
        "period": rules.Whole(1, 10_000_000, "frames stepped through by one run; the paper's protocol: 5,000"),
        "bprop": rules.Whole(1, 1000, "frames per update, all held in one compiled window"),
        "images": rules.Whole(1, 10_000_000, "updates of one run; the paper's protocol: 60,000"),
        "unroll": rules.Boolean(),
        "heldout_data": rules.PATH,
    }


class ProtocolKind(base.ModelKind):
    """What the study's own models share: StudyConfig, --protocol, a protocol counted in updates (checkpointed,
    resumable)."""

    session_protocol = UpdateProtocol()
    protocol_overrides = ()

    def config_class(self):
        return StudyConfig

    def train_rules(self):
        return protocol_train_rules()

    def config_from_options(self, options, explicit):
        values = {"model": self.name, "protocol": options["protocol"] or "paper"}
        for name in ("tbptt", "emulate_cpu_aliasing", "autoencoder", "stack_sizes", "r_stack_sizes", "filter_size",
                     "data", "size", "seed", "init_weights", "period", "bprop", "images", "unroll", "heldout_data"):
            values[name] = options.get(name) if name in self.options else None
        return StudyConfig(**values)

    def model_record(self, config, result):
        # The model's own config as the protocol reported it; an autoencoder's choice otherwise.
        return {
            "name": config.model,
            "parameters": int(result.summary.get("parameters", 0)),
            "config": result.summary.get("model_config") or {"autoencoder": config.autoencoder},
        }
