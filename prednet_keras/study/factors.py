"""The study's factors, declared once: STUDY_FACTORS, one StudyFactor per thing two runs of a study may differ in.

Each entry says, beside its name and the values it takes, whether two arms that differ in it are *comparable*:

    comparable       a factor under test: part of an arm's configuration. Arms that differ in it are compared,
                     pair by pair, within one protocol; the report names and labels configurations by it.
    not comparable   part of the protocol: arms that differ in it trained something else, so they must be equal
                     for a comparison. Each protocol is reported on its own, never compared with another.

Where the entries come from:

    runtime switches     RUNTIME_OPTIONS (runtime/options.py): every option that is a setting of the process,
                         comparable, its values the option's rule. This module adds only how a study words and
                         names the switches (RUNTIME_WORDS, for those whose words predate this table; any other
                         switch gets the generic words).
    a model kind's own   the kind's `arm_factors` and `factor_rules` (model_kinds/), comparable, recorded in the
                         manifest's study.settings: kind_factors(kind) adds them for a spec of that kind.
    the protocol         PROTOCOL_FACTORS below: what the manifest's model, schedule and options records hold.

What is made from the table (each maker takes `factors=STUDY_FACTORS`, so a caller, a test above all, may pass
its own):

    report.configurations.configuration_settings, arm_settings   a run's configuration (the comparable factors)
    report.configurations.describe_settings, group_configurations   its label and, for runs a spec did not name,
                                                                    its name
    report.configurations.protocol_identity        the protocol (the factors that are not comparable)
    spec, spec.rules.factor_rules                  a configuration's keys and their rules, the arm factors [train]
                                                   may not set (arm_factors)
    runner                                         the value a resumed study assumes where its older plan lacks a
                                                   runtime switch (predating_runtime)

An earlier study keeps its names: a factor that the first studies recorded is `named_always` (in every
configuration's settings, unset as None, so its identity and label are what they were); one added since is named
only where a run set it to other than `predating`, the value every record from before it had (precision float32,
autotune unset). A resumed study assumes `predating` where its older plan lacks the key. In a generated name the
factors named always come first, in the table's order; the others follow by their names' alphabetical order.
docs/architecture.md's "Adding a study factor" says the rest.

This module imports no framework.
"""

import dataclasses
import re

from prednet_keras import backends
from prednet_keras.runtime.options import RUNTIME_OPTIONS

__all__ = [
    "PROTOCOL_FACTORS",
    "RUNTIME_WORDS",
    "STUDY_FACTORS",
    "StudyFactor",
    "arm_factors",
    "describe_precision",
    "kind_factors",
    "label_order",
    "machine_name",
    "name_part",
    "predating_runtime",
    "runtime_factors",
    "slug",
    "study_factors",
    "words",
]

# Where a manifest records a factor: runtime.requested, study.settings, or the model, schedule or options record.
RECORDS = ("runtime", "study", "model", "schedule", "options")


@dataclasses.dataclass(frozen=True)
class StudyFactor:
    """One thing two runs of a study may differ in.

    Attributes:
        name: its key in the records (and, for an arm factor, in a spec's configuration table).
        comparable: True: a factor under test, part of the configuration (arms that differ in it are compared);
            False: part of the protocol (arms that differ in it are never compared).
        values: the values it takes, a value_rules rule (a spec checks a configuration's value by it); None:
            the model kind's [train] rule of that name.
        records: where a manifest holds it (RECORDS): "runtime" (runtime.requested), "study" (study.settings),
            "model", "schedule" or "options" (a protocol identity reads model and schedule, or, for a run that
            never started, options).
        named_always: True: in every configuration's settings or protocol record, None where unset (what the
            first studies recorded); False: only where a run set it to other than `predating`.
        predating: the value every record from before the factor had; what a resumed study assumes where an
            older plan lacks it.
        default: an arm factor's value where a configuration does not set it (a model kind's).
        label: (value, settings, machine, effective) -> the words of a configuration's label, or None; None:
            the generic "name=value" where the configuration holds it.
        name_part: (value, varying) -> the part of a generated configuration name, or None (`varying`: whether
            the unnamed configurations differ in it); None: the generic words, where varying.
        label_follows: the factor whose words this one's come right after in a label (where the first reports
            put them); None: the table's order.
        kept: value -> what of it identifies the arm or protocol (None: all of it).
        unrequested_from_effective: for a runtime switch, read what was in force where a manifest has no
            runtime.requested (the oldest runs).
    """

    name: str
    comparable: bool
    values: object = None
    records: tuple = ()
    named_always: bool = True
    predating: object = None
    default: object = None
    label: object = None
    name_part: object = None
    label_follows: str | None = None
    kept: object = None
    unrequested_from_effective: bool = False

    def __post_init__(self):
        unknown = sorted(set(self.records) - set(RECORDS))
        if unknown:
            raise ValueError(f"StudyFactor {self.name!r}: records {unknown} are not among {RECORDS}.")

    def value_kept(self, value):
        """The part of `value` that identifies an arm or a protocol."""
        return value if self.kept is None else self.kept(value)

    def is_named(self, value):
        """Whether a record holding `value` names this factor."""
        return self.named_always or value not in (None, self.predating)


# -------------------------------------------------------------- words and names

def slug(text):
    """`text` as a part of a configuration name: lower case, runs of other characters as one '-'."""
    return re.sub(r"[^a-z0-9.]+", "-", str(text).lower()).strip("-")


def _on_off(value):
    return "on" if value else "off"


def machine_name(settings, machine):
    """The device a configuration ran on: its GPU models, else its CPU model."""
    return ", ".join(machine.get("gpu") or []) if settings.get("device") == "gpu" else machine.get("cpu")


def describe_precision(settings, effective):
    """What float32 convolutions and matrix products ran in, from the effective settings.

    A device, a library and a precision change together when a CPU run is
    compared with a GPU run: JAX and PyTorch use TF32 on NVIDIA GPUs by
    default, which no CPU has, so the label says it.

    Args:
        settings: configuration_settings (the requested tf32 is None for the default).
        effective: manifest runtime.effective (tf32, tf32_applies).
    """
    if settings.get("precision") == "mixed_bfloat16":
        return "bfloat16 convolutions (mixed_bfloat16)"
    if settings.get("device") != "gpu" or effective.get("tf32_applies") is False:
        return "float32"
    tf32 = effective.get("tf32", settings.get("tf32"))
    default = " (default)" if settings.get("tf32") is None else ""
    if tf32 is True:
        return "TF32 on" + default
    if tf32 is False:
        return "TF32 off" + default
    if isinstance(tf32, str) and "conv True" in tf32 and "matmul False" in tf32:
        return "TF32 convolutions" + default
    return f"TF32 {tf32 if tf32 is not None else 'unknown'}" + default


def _library(value, settings, machine, effective):
    known = backends.find(value)
    library = known.display_name if known is not None else str(value or "?")
    return library + (f" {machine['backend_version']}" if machine.get("backend_version") else "")


def _device(value, settings, machine, effective):
    where = machine_name(settings, machine)
    return f"{str(value or '?').upper()} ({where or 'unknown machine'})"


def _device_kind(value):
    # gpu:0 and gpu:1 of one machine are the same kind of device; which model it is goes into the machine identity.
    if not isinstance(value, str):
        return value
    return "gpu" if value.split(":")[0] in ("gpu", "cuda") else value.split(":")[0]


def _switch_words(words):
    return lambda value, *context: None if value is None else f"{words} {_on_off(value)}"


def _switch_name(name):
    return lambda value, varying: None if value is None or not varying else (name if value else f"no-{name}")


def _threads_name(value, varying):
    return None if value is None or not varying else f"{value}-thread{'s' if value != 1 else ''}"


def _threads_words(value, *context):
    return None if value is None else f"{value} thread{'s' if value != 1 else ''}"


# How a study's configurations word and name the runtime switches, in the order of their settings: the switches
# the first studies recorded (named always), then those added since. A switch not here gets the generic words.
RUNTIME_WORDS = {
    "backend": dict(label=_library, name_part=lambda value, varying: str(value or "unknown"),
                    unrequested_from_effective=True),
    "device": dict(label=_device, name_part=lambda value, varying: str(value or "unknown"), kept=_device_kind,
                   unrequested_from_effective=True),
    "threads": dict(label=_threads_words, name_part=_threads_name),
    "interop_threads": dict(label=lambda value, *context: None if value is None else f"interop {value}",
                            name_part=lambda value, varying: None if value is None or not varying else
                            f"interop-{value}"),
    "deterministic": dict(label=lambda value, *context: "deterministic" if value else None,
                          name_part=lambda value, varying: "deterministic" if value and varying else None,
                          unrequested_from_effective=True),
    "cudnn": dict(label=lambda value, *context: "cuDNN off" if value is False else None,
                  name_part=lambda value, varying: "no-cudnn" if value is False and varying else None),
    # The label says what float32 ran in (TF32, or bfloat16 under precision), where tf32's words are.
    "tf32": dict(label=lambda value, settings, machine, effective: describe_precision(settings, effective),
                 name_part=_switch_name("tf32")),
    "onednn": dict(label=_switch_words("oneDNN"), name_part=_switch_name("onednn")),
    "xla": dict(label=_switch_words("XLA"), name_part=_switch_name("xla")),
    # Added since: named only where a run set it to other than its default (which every earlier run had).
    "precision": dict(named_always=False, label=lambda *args: None),  # in tf32's words
    "autotune": dict(named_always=False, label=_switch_words("autotuning"), label_follows="onednn"),
}


def runtime_factors(options=RUNTIME_OPTIONS):
    """The study factors of the runtime switches (every option that is a setting of the process): comparable,
    their values the option's rule, in RUNTIME_WORDS' order, then the table's."""
    settings = {option.name: option for option in options if option.setting}
    order = [name for name in RUNTIME_WORDS if name in settings] + [n for n in settings if n not in RUNTIME_WORDS]
    out = []
    for name in order:
        option = settings[name]
        words = dict(RUNTIME_WORDS.get(name) or {"named_always": False})
        out.append(StudyFactor(name, True, values=option.rule, records=("runtime",), predating=option.default,
                               **words))
    return tuple(out)


def _without_unroll(kwargs):
    # Unrolling changes how the time loop is computed, not what is trained (like --xla), and runs recorded before
    # the option have no such key.
    return {k: v for k, v in kwargs.items() if k != "unroll"} if isinstance(kwargs, dict) else kwargs


def _protocol(name, *records, **more):
    return StudyFactor(name, False, records=records, **more)


# What was trained and how, as the manifest records it (everything run-specific, such as the seed, paths, times
# and jit_compile, which follows the runtime, is no factor). Arms that differ in any of these are different
# protocols: an entry made comparable instead is compared (and leaves the protocol).
PROTOCOL_FACTORS = (
    _protocol("name", "model"),
    _protocol("layer", "model"),
    _protocol("kwargs", "model", kept=_without_unroll),
    _protocol("frame_shape", "model"),
    _protocol("nt", "model", "options"),
    _protocol("layer_loss_weights", "model"),
    _protocol("time_loss_weights", "model"),
    _protocol("epochs", "schedule", "options"),
    _protocol("steps_per_epoch", "schedule", "options"),
    _protocol("batch_size", "schedule", "options"),
    _protocol("optimizer", "schedule"),
    _protocol("lr", "schedule", "options"),
    _protocol("lr_drop_epoch", "schedule", "options"),
    _protocol("lr_after_drop", "schedule"),
    _protocol("loss", "schedule"),
    _protocol("monitor", "schedule"),
    _protocol("model", "options"),
    _protocol("stack_sizes", "options"),
    _protocol("r_stack_sizes", "options"),
    _protocol("filter_size", "options"),
    _protocol("lr_drop_factor", "options"),
    _protocol("layer_loss", "options"),
    _protocol("val_sequences", "options"),
    _protocol("val_fraction", "options"),
    _protocol("size", "options"),
    # Augmented data is another protocol; runs without augmentation (and those recorded before the option
    # existed) carry no key, so they stay one protocol.
    _protocol("augment", "schedule", "options", named_always=False, predating=[], kept=list),
)

STUDY_FACTORS = runtime_factors() + PROTOCOL_FACTORS


def kind_factors(kind):
    """The study factors a model kind adds (its arm factors: comparable, recorded in study.settings)."""
    rules = kind.factor_rules()
    return tuple(StudyFactor(name, True, values=rules.get(name), records=("study",), named_always=False,
                             default=default) for name, default in kind.arm_factors.items())


def study_factors(kind=None, factors=STUDY_FACTORS):
    """The table for a study of model `kind` (a ModelKind, or None): `factors` with the kind's own; a kind's
    factor replaces an entry of its name."""
    own = kind_factors(kind) if kind is not None else ()
    names = {factor.name for factor in own}
    return tuple(factor for factor in factors if factor.name not in names) + own


def arm_factors(kind, factors=STUDY_FACTORS):
    """{name: StudyFactor} of what a configuration of `kind` sets besides its runtime: the kind's arm factors and
    every comparable factor that is one of the kind's training options, in the table's order."""
    return {f.name: f for f in study_factors(kind, factors)
            if f.comparable and "runtime" not in f.records and ("study" in f.records or f.name in kind.options)}


def label_order(factors=STUDY_FACTORS):
    """The comparable factors in the order of a configuration's label: the table's, each one whose
    `label_follows` names another placed right after it."""
    comparable = [f for f in factors if f.comparable]
    named = {f.name for f in comparable}
    followers = {}
    for factor in comparable:
        if factor.label_follows in named:
            followers.setdefault(factor.label_follows, []).append(factor)
    out = []

    def place(factor):
        out.append(factor)
        for follower in followers.get(factor.name, ()):
            place(follower)

    for factor in comparable:
        if factor.label_follows not in named:
            place(factor)
    return tuple(out)


def predating_runtime(factors=STUDY_FACTORS):
    """{switch: value} a resumed study assumes where its older plan lacks a runtime switch added since."""
    return {f.name: f.predating for f in factors if "runtime" in f.records and not f.named_always}


def words(factor, value, settings, machine, effective):
    """The words of `factor` in a configuration's label, or None."""
    if factor.label is not None:
        return factor.label(value, settings, machine, effective)
    return f"{factor.name}={value}"


def name_part(factor, value, varying):
    """The part of a generated configuration name `factor` makes, or None."""
    if factor.name_part is not None:
        return factor.name_part(value, varying)
    if not varying:
        return None
    key = slug(factor.name)
    return key if value is True else f"no-{key}" if value is False else f"{key}-{slug(value)}"
