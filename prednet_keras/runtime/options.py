"""The runtime options, declared once: RUNTIME_OPTIONS, one RuntimeOption per switch of a run process.

What is made from the table (each maker takes `options=RUNTIME_OPTIONS`, so a caller, a test above all, may
pass its own):

    runtime.config.runtime_config_class(options)    RuntimeConfig: its fields, defaults, checks and docstring
    session.records.runtime_requested_record(options)  the manifest's runtime.requested record
    cli.options.runtime_options(options=...)          the Click options of every command that starts a framework
    study.spec.rules.runtime_rules(options)           the study spec's runtime keys and their rules

and, through RuntimeConfig, the child environment (environment.CONFIG_ENV holds its to_dict()). What a switch
does is its implementation, beside the others in this package: environment.py (variables set before the
framework starts), apply.py (switches set after), readback.py (what is in force), config.unsupported_settings
(where a backend or device cannot honour it; a backend's reasons are its entry's `unsupported`,
prednet_keras/backends.py). docs/architecture.md's "Adding a runtime switch" says the rest.

No framework and no Click at import: a command's --help reads this table.
"""

import dataclasses
import re

from prednet_keras import backends
from prednet_keras.options.value_rules import Boolean, Choice, Text, Whole

# Keras dtype policies a run may ask for: float32 throughout, or float32 variables with
# bfloat16 activations (PredNet keeps its cell state, the error against the frame, the error
# means and the loss in float32; see layers/lotter.py).
PRECISIONS = ("float32", "mixed_bfloat16")

# How a value is given and checked. "switch": True or False (None, where the default is None: the framework's
# choice), a --name/--no-name flag; "whole": a whole number >= 1 (or None where that is the default);
# "choice": one of `choices`; "text": a string its `check` reads.
KINDS = ("switch", "whole", "choice", "text")
# flag_default's default: the Click option's default is RuntimeConfig's.
AS_DEFAULT = "as default"


@dataclasses.dataclass(frozen=True)
class RuntimeOption:
    """One switch of a run process.

    Attributes:
        name: RuntimeConfig's field, the manifest's key under runtime.requested and the study spec's key.
        kind: one of KINDS.
        default: RuntimeConfig's default (None: the framework's own choice).
        doc: what the field means, for RuntimeConfig's docstring.
        help: its Click option's help text.
        choices: the values of a "choice".
        check: value -> the value as kept, raising ValueError with the user's message; None: the kind's check.
        spec_rule: the study spec's value rule (value_rules); None: the kind's (Boolean, Choice(choices)).
        flags: the Click option's declarations; () for the kind's (--name, or --name/--no-name for a switch).
        flag_default: the Click option's default where it is not `default` (backend: None, the command picks).
        offered: every command that takes the runtime options offers it, unless the command says otherwise.
        help_beside: (option, sentence): the sentence ends the help where the command also offers that option.
        setting: a setting of the process (prednet-env shows it requested beside effective, a study names a
            configuration by it); False for `strict`, which says only what an unsupported setting is.
        read_back_as: the key of what is in force (runtime.read_back), where not `name`.
        flag_follows, recorded_follows: the option this one comes right after in --help, and in a manifest's
            runtime.requested (RuntimeConfig's fields); None: the table's order. Both keep the orders users and
            files have had since before the table; a new option needs neither.
    """

    name: str
    kind: str
    default: object
    doc: str
    help: str
    choices: tuple = ()
    check: object = None
    spec_rule: object = None
    flags: tuple = ()
    flag_default: object = AS_DEFAULT
    offered: bool = True
    help_beside: tuple = ()
    setting: bool = True
    read_back_as: str | None = None
    flag_follows: str | None = None
    recorded_follows: str | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"RuntimeOption {self.name!r}: kind {self.kind!r} is not one of {KINDS}.")

    @property
    def annotation(self):
        """The type of RuntimeConfig's field."""
        kind = {"switch": bool, "whole": int, "choice": str, "text": str}[self.kind]
        return kind | None if self.default is None else kind

    @property
    def click_default(self):
        """The Click option's default."""
        return self.default if self.flag_default == AS_DEFAULT else self.flag_default

    @property
    def rule(self):
        """The study spec's rule for this key."""
        if self.spec_rule is not None:
            return self.spec_rule
        if self.kind == "switch":
            return Boolean()
        if self.kind == "choice":
            return Choice(self.choices)
        raise ValueError(f"RuntimeOption {self.name!r}: a {self.kind} needs its spec_rule (its cap and why).")

    @property
    def effective_key(self):
        """The key of what is in force, in runtime.read_back's dict."""
        return self.read_back_as or self.name

    def checked(self, value):
        """`value` as RuntimeConfig keeps it. Raises ValueError with the message a user sees."""
        if self.check is not None:
            return self.check(value)
        optional = self.default is None
        if self.kind == "whole":
            if value is None and optional:
                return value
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"`{self.name}` must be a whole number >= 1{' or None' if optional else ''}, "
                                 f"got {value!r}.")
            if value < 1:
                raise ValueError(f"`{self.name}` must be >= 1, got {value}.")
            return value
        if self.kind == "switch":
            if value is None and optional:
                return value
            if not isinstance(value, bool):
                raise ValueError(f"`{self.name}` must be {'True, False or None' if optional else 'True or False'}"
                                 f", got {value!r}.")
            return value
        if value not in self.choices:
            raise ValueError(f"`{self.name}` must be one of {', '.join(map(str, self.choices))}, got {value!r}.")
        return value


def backend_option(table=None):
    """The `backend` option, made from the backends' table (prednet_keras.backends.BACKENDS, or a caller's
    copy): its choices, its check, its texts; the default is the first backend, Keras' own default."""
    choices = backends.names(table)
    quoted = ", ".join(f'"{name}"' for name in choices)

    def check(value):
        if value not in choices:
            raise ValueError(f"Unknown backend {value!r}: expected one of {list(choices)}.")
        return value

    return RuntimeOption(
        "backend", "choice", choices[0], choices=choices, check=check, flag_default=None,
        doc=f"Keras backend, one of {quoted}.",
        help="Keras backend [default: KERAS_BACKEND, else the backend in ~/.keras/keras.json if installed, "
             f"else the first installed of {', '.join(choices)}].",
    )


_DEVICE_RE = re.compile(r"^(cpu|gpu|cuda)(?::(\d+))?$")


def _device(value):
    """"cpu", "gpu" or "gpu:N" ("cuda" the same as "gpu"), in lower case."""
    match = _DEVICE_RE.match(str(value).strip().lower())
    if not match:
        raise ValueError(f"Unknown device {value!r}: expected 'cpu', 'gpu' or 'gpu:N'.")
    if match.group(1) == "cpu" and match.group(2) is not None:
        raise ValueError(f"Device {value!r}: a CPU run uses the whole CPU; use 'cpu' and `threads`.")
    kind = "cpu" if match.group(1) == "cpu" else "gpu"
    return kind if match.group(2) is None else f"{kind}:{int(match.group(2))}"


def _precision(value):
    if value not in PRECISIONS:
        raise ValueError(f"Unknown precision {value!r}: expected one of {', '.join(PRECISIONS)}.")
    return value


THREADS_RULE = Whole(1, 1024, "CPU threads; more than any machine's cores")

RUNTIME_OPTIONS = (
    backend_option(),
    RuntimeOption(
        "device", "text", "cpu", check=_device,
        spec_rule=Text(r"(cpu|gpu|cuda)(:[0-9]{1,3})?", '"cpu", "gpu" or "gpu:N"'),
        doc='"cpu", "gpu" (the GPUs the process may see; Keras uses the first) or "gpu:N" (only GPU N, numbered '
            'within the CUDA_VISIBLE_DEVICES of the process that calls environment_for). "cuda" and "cuda:N" are '
            'aliases.',
        help="cpu, gpu or gpu:N. A GPU asked for and not visible is an error, never a silent CPU run.",
    ),
    RuntimeOption(
        "threads", "whole", None, spec_rule=THREADS_RULE,
        doc="CPU threads for compute (TensorFlow intra-op, torch set_num_threads, JAX CPU affinity); None leaves "
            "the backend's default.",
        help="CPU compute threads (TensorFlow intra-op, torch, JAX by CPU affinity) [default: the framework's].",
    ),
    RuntimeOption(
        "interop_threads", "whole", None, spec_rule=THREADS_RULE, offered=False, recorded_follows="xla",
        doc="TensorFlow inter-op / torch interop threads; None means the same as `threads`. JAX has no such "
            "pool.",
        help="TensorFlow inter-op / torch interop threads [default: = --threads].",
    ),
    RuntimeOption(
        "deterministic", "switch", False,
        doc="deterministic kernels (TensorFlow op determinism, torch deterministic algorithms, XLA "
            "--xla_gpu_deterministic_ops).",
        help="Deterministic kernels (slower; the same results run to run).",
    ),
    RuntimeOption(
        "cudnn", "switch", True,
        doc="cuDNN on or off; off is real only on torch.",
        help="cuDNN on GPUs (off exists only on torch; elsewhere an error).",
    ),
    RuntimeOption(
        "tf32", "switch", None,
        doc="TF32 for float32 convolutions and matrix products on NVIDIA GPUs; None keeps the backend's default "
            "(which differs between backends).",
        help="TensorFloat-32 convolutions and matrix products on NVIDIA GPUs [default: the framework's].",
    ),
    RuntimeOption(
        "onednn", "switch", None,
        doc="oneDNN kernels on the CPU (TensorFlow TF_ENABLE_ONEDNN_OPTS, torch mkldnn); None keeps the default.",
        help="oneDNN CPU kernels, TensorFlow and torch [default: the framework's].",
    ),
    RuntimeOption(
        "autotune", "switch", None,
        doc="GPU kernel autotuning, where the library times candidate kernels (cuDNN's convolution algorithms, "
            "XLA's fusions) and keeps the fastest (XLA --xla_gpu_autotune_level, TensorFlow "
            "TF_CUDNN_USE_AUTOTUNE, torch cudnn.benchmark). False: each library's fixed choice, so the kernels a "
            "program runs do not depend on timings taken under whatever else the GPU was doing. None keeps the "
            "default (XLA and TensorFlow tune; torch does not). A CPU run has none to turn on.",
        help="GPU kernels picked by timing them (XLA's autotuning, TensorFlow's cuDNN autotune, torch's "
             "cudnn.benchmark); --no-autotune takes each library's fixed choice, so no timing taken under load "
             "decides [default: the framework's: on for XLA and TensorFlow, off for torch].",
    ),
    RuntimeOption(
        "xla", "switch", None, flags=("--xla/--no-xla", "--jit-compile/--no-jit-compile", "xla"),
        read_back_as="jit_compile",
        doc="the `jit_compile` the training code should pass to Keras (XLA on TensorFlow, one jitted step on "
            "JAX, torch.compile of the step on torch); None lets Keras choose, except that deterministic "
            "TensorFlow runs get False and torch runs eager.",
        help="Compile the training step (Keras' jit_compile): XLA on TensorFlow and JAX, torch.compile on torch "
             "[default: off for TensorFlow on CPU, where it is slower, and on torch; Keras' choice elsewhere].",
    ),
    RuntimeOption(
        "strict", "switch", True, offered=False, setting=False, flag_follows="precision",
        recorded_follows="autotune",
        doc='when True an unsupported setting is an error; when False it is recorded as "not available" and the '
            'run goes on.',
        help="Unsupported settings are errors (strict) or recorded as 'not available'.",
    ),
    RuntimeOption(
        "precision", "choice", "float32", choices=PRECISIONS, check=_precision,
        doc='the Keras dtype policy of every layer built in the process: "float32", or "mixed_bfloat16" (float32 '
            'weights, bfloat16 compute). Set in-process by `configure`, after a check that this backend and '
            'device can run bfloat16 convolutions. Independent of `tf32`, which says how float32 convolutions and '
            'products run on NVIDIA GPUs.',
        help="Keras dtype policy: float32, or mixed_bfloat16 (float32 weights; PredNet's convolutions in "
             "bfloat16, its states, errors and loss in float32). Checked on the device before the run starts.",
        help_beside=(("tf32", " Independent of --tf32, which says how float32 convolutions run on NVIDIA GPUs."),),
    ),
    RuntimeOption(
        "devices", "whole", 1, offered=False, flag_follows="threads",
        # A study's runs each train on one device (prednet-train --devices trains data-parallel).
        spec_rule=Whole(1, 1, "each study run trains on one device"),
        doc="devices of this host to train on, data-parallel (Keras' DataParallel, set up by "
            "`distribution.configure` in the training process); more than 1 exists on JAX only "
            "(`distribution.request_problem`).",
        help="Train data-parallel on the first N devices of --device (Keras' DataParallel; JAX only). "
             "--batch-size stays the global batch, split evenly over the N devices, so it must divide by N. On a "
             "CPU, JAX shows N devices with XLA_FLAGS=--xla_force_host_platform_device_count=N.",
    ),
)


def _ordered(options, follows):
    """`options` in the table's order, each option whose `follows` names another placed right after it (after
    that one's own followers placed before it)."""
    named = {option.name for option in options}
    followers = {}
    for option in options:
        leader = getattr(option, follows)
        if leader is not None and leader in named:
            followers.setdefault(leader, []).append(option)
    out = []

    def place(option):
        out.append(option)
        for follower in followers.get(option.name, ()):
            place(follower)

    for option in options:
        if getattr(option, follows) is None or getattr(option, follows) not in named:
            place(option)
    return tuple(out)


def flag_order(options=RUNTIME_OPTIONS):
    """The options in the order --help lists their flags."""
    return _ordered(options, "flag_follows")


def recorded_order(options=RUNTIME_OPTIONS):
    """The options in the order of RuntimeConfig's fields, and so of a manifest's runtime.requested."""
    return _ordered(options, "recorded_follows")


def names(options=RUNTIME_OPTIONS):
    """The options' names, in the table's order (a study spec's)."""
    return tuple(option.name for option in options)
