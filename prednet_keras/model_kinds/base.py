"""What a model kind is, and the table of kinds by name.

A kind is one object (a `ModelKind`) that says everything the rest of the package needs to know about one
network family: its name, its training options and their rules, its defaults, the study's arm factors,
its benchmark sizes, how its starting weights are built, how its data is loaded and how it is trained: the
protocol it states (`session_protocol`) is what the one training session (`session/training.py`) runs, and
what that protocol can do (resume from a checkpoint) is stated there, never tested by the kind's type.
The names, options, rules and defaults are plain Python (this module and every kind module import no
framework at import time); whatever builds or trains a Keras model is imported inside the method that
does it.

`get(name)` answers the kind of a name. A name with a ':' (`package.module:function` or
`path/to/file.py:function`) is a user's own Keras model (`model_kinds/user.py`): `get` makes its kind on
the spot, through the one factory registered for references.
"""

import dataclasses

from prednet_keras.options import value_rules as rules

__all__ = ["SHARED_TRAIN_RULES", "BenchDefaults", "ModelKind", "get", "is_reference", "kinds", "names", "protocol_of",
           "register", "register_reference_kind"]

_KINDS = {}
# [train] rules of the options Lotter's PredNet and the Chainer-lineage one share. Sizes bound what one run
# allocates.
CHANNELS = rules.ListOf(rules.Whole(1, 4096), 1, 8, "channels per layer, at most 8 layers (each halves the frame)")
SHARED_TRAIN_RULES = {
    "stack_sizes": CHANNELS,
    "r_stack_sizes": CHANNELS,
    "filter_size": rules.Whole(1, 15, "a convolution kernel's size"),
    "data": rules.PATH,
    "size": rules.ListOf(rules.Whole(1, 4096), 2, 2, "[H, W] in pixels"),
}
_REFERENCE_KIND = []


@dataclasses.dataclass(frozen=True)
class BenchDefaults:
    """How prednet-bench measures a kind on synthetic input.

    Attributes:
        size: default (H, W) of the frames; None: the kind's inputs have one fixed shape (`image_shape`).
        nt: default frames per sequence (per window for a kind trained window by window).
        min_nt: the smallest nt that makes sense.
        image_shape: the fixed (H, W, C) of one input when `size` is None.
        variants: the choices of BenchConfig.autoencoder (the architecture), or None.
        unroll: whether the kind has the unroll switch (BenchConfig.unroll).
        unroll_default: the switch's value when not given (the kind's training default).
        train_batch_one: trained at batch 1 only (another batch only for --mode infer).
        fixed_note: how the fixed shape is described in an error ("28x28 MNIST images").
    """

    size: tuple = None
    nt: int = 1
    min_nt: int = 1
    image_shape: tuple = None
    variants: tuple = None
    unroll: bool = False
    unroll_default: bool = True
    train_batch_one: bool = False
    fixed_note: str = ""


class ModelKind:
    """One network family. Subclasses set the attributes and implement the methods their use needs.

    Attributes:
        name: the name in --model, in a spec's `model` and in every manifest's options.model.
        help: one line for --help and the docs.
        session_protocol: how the one training session (session/training.py) trains it, a
            session.protocol.TrainingProtocol: Lotter's recipe (RecipeProtocol: epochs, checkpoints, --resume) or a
            protocol counted in updates (UpdateProtocol: one history row per update, checkpoints, --resume unless
            the kind states it cannot). What it can do it states: `session_protocol.can_resume` is the one test of
            whether a run can be continued.
        follows_recipe: trained by Lotter's KITTI recipe, so prednet-train builds its options from the recipe's
            (TrainConfig: epochs, batches, the learning-rate schedule, devices) with the recipe's defaults and
            checks; False: the kind builds its own options record (`config_from_options`).
        precision_modes: whether --precision other than float32 applies.
        options: prednet-train's options (Python names) that apply to this kind; the others are refused.
        arm_factors: {factor: default} training switches a study configuration may set (compared, so part
            of the configuration, not of [train]).
        accepts_chainer_npz: --init-weights may be a Chainer .npz/.model file.
        history_columns: the columns of history.csv (a kind trained by an UpdateProtocol).
        bench: BenchDefaults, or None when prednet-bench does not measure this kind.
        predating_train_options: [train] options added after studies were run, with the value those runs had.
        evaluation: what prednet-eval scores of a run of this kind: "prediction" (next-frame prediction on
            video), "reconstruction" (an MNIST autoencoder's test MSE), or None (nothing: prednet-eval says
            so and where the run's own measures are, `evaluation_note`).
    """

    name = None
    help = ""
    session_protocol = None
    follows_recipe = False
    precision_modes = False
    options = ()
    arm_factors = {}
    accepts_chainer_npz = False
    history_columns = ()
    bench = None
    predating_train_options = {}
    evaluation = "prediction"

    def __repr__(self):
        return f"<model kind {self.name}>"

    # -- options and rules (no framework) -------------------------------------------------------------

    def config_class(self):
        """The OptionsRecord dataclass of this kind's training options (manifest `options`)."""
        raise NotImplementedError

    def train_rules(self):
        """{option: value_rules rule} of a study spec's [train] for this kind."""
        return {}

    def factor_rules(self):
        """{factor: value_rules rule} of the arm factors."""
        return {}

    def resolve_config(self, config):
        """Fills this kind's defaults into `config` (a copy the config class made); returns it."""
        return config

    def validate_config(self, config):
        """Raises ValueError naming the first bad setting of `config` that is this kind's business."""

    def config_from_options(self, options, explicit):
        """The (unresolved) config of prednet-train's `options` (a protocol kind's); `explicit`: the
        names given on the command line."""
        raise NotImplementedError

    def output_name(self):
        """The stem of prednet-train's default run folder (weights/<stem>-<date>-<time>)."""
        return self.name

    def canonical(self, base=None):
        """The name as recorded (a user model's reference with an absolute file path)."""
        return self.name

    # -- what an UpdateProtocol calls in the training process (imports the framework) ------------------

    def load_data(self, config):
        """(data, the manifest's `data` record); prints what it loads."""
        raise NotImplementedError

    def build(self, config, data):
        """The untrained model the run's initial weights are made for and loaded into."""
        raise NotImplementedError

    def training_protocol(self, config, data=None):
        """The protocol object (the preset with the config's overrides; `data`: what load_data gave)."""
        return config.training_protocol()

    def plan(self, config, data, preset):
        """(updates the run will make, the checksum of its data order)."""
        raise NotImplementedError

    def label(self, config):
        """How progress lines name the run."""
        return self.name

    def study_settings(self, config):
        """The run's values of the arm factors, for the manifest's study.settings."""
        return {}

    def protocol_record(self, config, preset):
        """The manifest's `protocol`: what every run of one study protocol shares (not the seed, not the
        arm factors)."""
        raise NotImplementedError

    def train(self, config, data, preset, *, initial_weights, on_update, jit_compile, on_start, checkpoint=None):
        """Trains; returns a protocols.ProtocolResult. `checkpoint`: the session's checkpoints, which a protocol
        that can resume gives its compiled model and continues from (models/protocols.py says how); None
        from a protocol that cannot."""
        raise NotImplementedError

    def evaluate_heldout(self, config, model):
        """(record for the manifest's result, {name: predictions}) of the trained `model` on frames no update
        trained on, or None when the kind scores none (prednet-chainer's --heldout-data)."""
        return None

    def model_record(self, config, result):
        """The manifest's `model` record of a finished run."""
        raise NotImplementedError

    def build_for_starting_point(self, options):
        """The model whose weights a study's seeds start from, given the spec's [train] `options`
        (a dict of the config class's fields, model included); runs in the starting-points process."""
        config = self.config_class().from_dict(options).resolved()
        return self.build(config, self.load_data_quietly(config))

    def load_data_quietly(self, config):
        """What `build` needs of the data (default: the data itself)."""
        return self.load_data(config)[0]

    def evaluation_note(self, manifest):
        """Where a run's own measures are, for a kind prednet-eval does not score (`manifest`: its
        records.Manifest)."""
        return "its results are in manifest.json (result)"

    # -- prednet-bench ---------------------------------------------------------------------------------

    def bench_runner(self, config, phase, jit_compile, rng, kit):
        """prednet-bench's runner of one phase; `kit` is bench/measure.py's toolbox (Runner, fit_loop, one_by_one,
        synthetic)."""
        raise NotImplementedError

    def bench_label(self, config):
        """A short description of a BenchConfig for progress lines."""
        return (f"{self.name} {','.join(str(v) for v in config.stack_sizes)}, {config.size[0]}x{config.size[1]}, "
                f"nt {config.nt}, batch {config.batch_size}" + ("" if config.unroll is not False else ", rolled"))

    def bench_row_name(self, config):
        """The model column of the benchmark table for a result's config dict."""
        return self.name


def register(kind):
    """Adds `kind` (a ModelKind) to the table; its name must be new and have no ':'."""
    if not kind.name or ":" in kind.name:
        raise ValueError(f"A model kind needs a name without ':', got {kind.name!r}.")
    if kind.name in _KINDS and _KINDS[kind.name] is not kind:
        raise ValueError(f"A model kind named {kind.name!r} is already registered.")
    _KINDS[kind.name] = kind
    return kind


def register_reference_kind(factory):
    """The factory (reference text -> ModelKind) of names with a ':' (a user's own model)."""
    _REFERENCE_KIND[:] = [factory]


def is_reference(text):
    """Whether `text` names a user's model (`module:function` or `file.py:function`), not a registered kind."""
    if not isinstance(text, str) or ":" not in text:
        return False
    where, _, function = text.rpartition(":")
    return bool(where) and function.isidentifier()


def get(name):
    """The kind of `name`: a registered kind, or a user's model for a reference.

    Raises:
        ValueError: an unknown name.
    """
    kind = _KINDS.get(name) if isinstance(name, str) else None
    if kind is not None:
        return kind
    if is_reference(name) and _REFERENCE_KIND:
        return _REFERENCE_KIND[0](name)
    raise ValueError(f"--model must be one of {', '.join(_KINDS)} or MODULE:FUNCTION / FILE.py:FUNCTION, "
                     f"got {name!r}.")


def find(name):
    """get(name), or None for an unknown name."""
    try:
        return get(name)
    except ValueError:
        return None


def protocol_of(manifest):
    """The protocol (a session.protocol.TrainingProtocol) of the run whose manifest is `manifest` (a
    session.records.Manifest or its dict); None for a model kind this installation does not know.

    The one place that reads a recorded run's model kind for what its protocol can do: the run folder (which
    checksum vouches for model.keras, whether a complete run can go on), the training session and the worker
    ask it. It lives in the registry's base, which imports nothing of the session's loops, so the run folder
    can ask it (the kinds' modules reach the loops, which use the run folder). The kinds are registered by
    importing `prednet_keras.model_kinds`, as every command that reads a run does.
    """
    from prednet_keras.session.records import Manifest

    kind = find(Manifest.coerce(manifest).model_kind or "prednet")
    return kind.session_protocol if kind is not None else None


def names(bench=False):
    """The registered kinds' names, in registration order (bench=True: those prednet-bench measures)."""
    return tuple(name for name, kind in _KINDS.items() if not bench or kind.bench is not None)


def kinds():
    """The registered kinds, in registration order."""
    return tuple(_KINDS.values())
