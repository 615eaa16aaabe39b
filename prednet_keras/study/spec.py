"""The study spec: what `prednet-study run` trains, in which configurations, with which seeds.

A spec is a TOML file:

    name = "quick"                    # [default: the file's name]
    model = "autoencoder"             # prednet | prednet-chainer | autoencoder
    seeds = 3                         # 3 -> seeds 0, 1, 2; or a list [0, 7, 11]
    replicates = 2                    # runs per seed and configuration
    replicate_seeds = [0, 1]          # only these seeds get `replicates` runs, the others one
                                      # [default: all seeds]; a whole number N: the first N seeds
    ulp_baseline = true               # + one run per seed and configuration from weights nudged by 1 ulp
    trajectory_points = 10            # weight snapshots per run, for divergence (study models)
    workers = 2                       # runs at once [default 1; --workers overrides]

    [train]                           # prednet-train's options for this model, shared by every run
    protocol = "quick"
    images = 300

    [runtime]                         # defaults of every configuration
    backend = "tensorflow"

    [configurations.cpu-1-thread]     # one arm; the name is the run folders' parent
    device = "cpu"
    threads = 1
    deterministic = true

    [configurations.cpu-2-threads]
    threads = 2

    [report]                          # defaults of `prednet-study report` for this study
    margin_sd = 0.5

A configuration sets runtime options (`runtime.RuntimeConfig`'s fields:
backend, device, threads, interop_threads, deterministic, cudnn, tf32, onednn,
xla, strict, precision; precision other than float32 only for model prednet) and, for prednet-chainer, the arm factors `tbptt` and
`emulate_cpu_aliasing` (training-code switches that the study compares, so
they are part of the configuration, not of the protocol). Everything else
that defines training goes in [train] and is the same for every run.

This module reads and checks specs; it imports no framework.
"""

import dataclasses
import fnmatch
import re
import tomllib
from pathlib import Path

__all__ = ["ARM_FACTORS", "PlannedRun", "SpecError", "StudySpec", "load_spec", "parse_spec", "ready_specs",
           "resolve_spec_path", "seed_list"]

MODELS = ("prednet", "prednet-chainer", "autoencoder")
# Training switches a configuration may set (per model): the study's own factors.
ARM_FACTORS = {"prednet-chainer": ("tbptt", "emulate_cpu_aliasing"), "prednet": (), "autoencoder": ()}
RUNTIME_KEYS = ("backend", "device", "threads", "interop_threads", "deterministic", "cudnn", "tf32", "onednn",
                "xla", "strict", "precision")
# Training options that identify a run rather than the protocol: set by the runner.
RUNNER_OWNED = ("model", "seed", "init_weights")
REPORT_KEYS = ("metric", "margin", "margin_sd", "alpha", "power", "checkpoints", "curve_test")
TOP_KEYS = ("name", "model", "seeds", "replicates", "replicate_seeds", "ulp_baseline", "trajectory_points",
            "workers", "train", "runtime", "configurations", "report")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
# The specs shipped with the package: `prednet-study run quick`.
READY_SPECS = Path(__file__).parent / "specs"


def ready_specs():
    """{name: path} of the specs shipped with the package."""
    return {p.stem: p for p in sorted(READY_SPECS.glob("*.toml"))}


def resolve_spec_path(text):
    """A spec file path: `text` itself when it exists, else the ready spec of that name."""
    path = Path(text)
    if path.exists() or path.suffix == ".toml" or "/" in str(text):
        return path
    ready = ready_specs()
    if text in ready:
        return ready[text]
    raise SpecError(f"{text}: no such spec file, and no ready spec of that name (ready: {', '.join(ready)}).")


class SpecError(ValueError):
    """A study spec that cannot be run as written."""


@dataclasses.dataclass(frozen=True)
class Configuration:
    """One arm of the study.

    Attributes:
        name: the spec's name of the arm.
        runtime: RuntimeConfig fields (dict, complete after defaults).
        factors: arm factors (training switches) the arm sets.
    """

    name: str
    runtime: dict
    factors: dict

    def runtime_config(self):
        from prednet_keras.runtime import RuntimeConfig

        return RuntimeConfig.from_dict(self.runtime)

    def to_dict(self):
        return {"name": self.name, "runtime": dict(self.runtime), "factors": dict(self.factors)}


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    """One training run of the study.

    Attributes:
        configuration: the Configuration.
        seed: seed of the initial weights and the data order.
        replicate: 1, 2, ... (a re-run of the same seed and configuration), or
            None for the 1-ulp baseline run.
        perturbation: None, or "ulp" (started from the seed's weights nudged by one ulp).
    """

    configuration: Configuration
    seed: int
    replicate: int | None
    perturbation: str | None = None

    @property
    def name(self):
        """The run folder's name inside its configuration's folder."""
        tail = "ulp" if self.perturbation == "ulp" else f"r{self.replicate}"
        return f"seed-{self.seed:04d}-{tail}"

    @property
    def key(self):
        """configuration/name: unique within a study."""
        return f"{self.configuration.name}/{self.name}"


@dataclasses.dataclass
class StudySpec:
    """A parsed, checked spec.

    Attributes:
        name: the study's name.
        model: "prednet", "prednet-chainer" or "autoencoder".
        train: the training options shared by every run (resolved: the
            model's config class's to_dict() without the runner-owned fields).
        configurations: the arms, in the spec's order.
        seeds: the seeds, in order.
        replicates: runs per seed and configuration (of the seeds in
            replicate_seeds; every other seed runs once).
        replicate_seeds: the seeds that get `replicates` runs, in the order
            of `seeds`; None: every seed.
        ulp_baseline: whether each seed and configuration gets a 1-ulp run.
        trajectory_points: weight snapshots per run (0: none).
        workers: default number of runs at once.
        report: defaults for `prednet-study report`.
    """

    name: str
    model: str
    train: dict
    configurations: list
    seeds: list
    replicates: int = 1
    replicate_seeds: list | None = None
    ulp_baseline: bool = False
    trajectory_points: int = 0
    workers: int = 1
    report: dict = dataclasses.field(default_factory=dict)

    def configuration(self, name):
        for config in self.configurations:
            if config.name == name:
                return config
        raise KeyError(name)

    def select(self, patterns):
        """The configurations whose names match any of the glob `patterns` (all when none)."""
        if not patterns:
            return list(self.configurations)
        chosen = [c for c in self.configurations if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]
        if not chosen:
            names = ", ".join(c.name for c in self.configurations)
            raise SpecError(f"No configuration matches {', '.join(patterns)}; the spec has: {names}.")
        return chosen

    def replicates_of(self, seed):
        """Runs per configuration of `seed` (1 when replicate_seeds leaves it out)."""
        if self.replicate_seeds is None or seed in self.replicate_seeds:
            return self.replicates
        return 1

    def planned_runs(self, configurations=None):
        """Every run, seed-major (each seed's arms together, so partial results stay balanced).

        Args:
            configurations: the arms to plan (default: all).
        """
        configurations = self.configurations if configurations is None else configurations
        planned = []
        for seed in self.seeds:
            for replicate in range(1, self.replicates_of(seed) + 1):
                planned += [PlannedRun(c, seed, replicate) for c in configurations]
            if self.ulp_baseline:
                planned += [PlannedRun(c, seed, None, "ulp") for c in configurations]
        return planned

    def run_options(self, run, init_weights):
        """The training options (config class's dict) of one planned run."""
        options = dict(self.train)
        options.update(run.configuration.factors)
        options.update(model=self.model, seed=run.seed, init_weights=str(init_weights))
        return options

    def protocol_dict(self):
        """What every run shares: a run folder made under another spec must agree on it."""
        return {"model": self.model, "train": self.train}

    def to_dict(self):
        return {
            "name": self.name,
            "model": self.model,
            "train": self.train,
            "configurations": [c.to_dict() for c in self.configurations],
            "seeds": list(self.seeds),
            "replicates": self.replicates,
            "replicate_seeds": None if self.replicate_seeds is None else list(self.replicate_seeds),
            "ulp_baseline": self.ulp_baseline,
            "trajectory_points": self.trajectory_points,
            "workers": self.workers,
            "report": dict(self.report),
        }


def load_spec(path):
    """Reads and checks the spec file at `path`.

    Raises:
        SpecError: a missing or unreadable file, bad TOML, or bad content;
            the message names the file and the problem.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: no such spec file.") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(f"{path}: cannot read the spec ({error}).") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{path}: not valid TOML ({error}).") from None
    try:
        return parse_spec(data, default_name=path.stem, base=path.parent)
    except SpecError as error:
        raise SpecError(f"{path}: {error}") from None


def parse_spec(data, default_name="study", base=None):
    """A StudySpec from the spec's dict (what TOML gives).

    Args:
        data: the parsed file.
        default_name: the study's name when the spec has none.
        base: folder that relative data / weights paths in [train] are relative to.
    """
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise SpecError(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                        f"(known: {', '.join(TOP_KEYS)}).")
    model = data.get("model")
    if model not in MODELS:
        raise SpecError(f"`model` must be one of {', '.join(MODELS)}, got {model!r}.")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not _NAME.match(name):
        raise SpecError(f"`name` must be letters, digits, '-', '_', '.', '+', got {name!r}.")
    seeds = _seeds(data.get("seeds", 1))
    replicates = _whole(data, "replicates", 1, minimum=1)
    replicate_seeds = _replicate_seeds(data.get("replicate_seeds"), seeds, replicates)
    trajectory_points = _whole(data, "trajectory_points", 0, minimum=0)
    workers = _whole(data, "workers", 1, minimum=1)
    ulp_baseline = data.get("ulp_baseline", False)
    if not isinstance(ulp_baseline, bool):
        raise SpecError(f"`ulp_baseline` must be true or false, got {ulp_baseline!r}.")
    train = _train_options(model, _table(data, "train"), base)
    defaults = _table(data, "runtime")
    configurations = _configurations(model, _table(data, "configurations"), defaults)
    report = _table(data, "report")
    unknown = sorted(set(report) - set(REPORT_KEYS))
    if unknown:
        raise SpecError(f"[report]: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                        f"(known: {', '.join(REPORT_KEYS)}).")
    return StudySpec(name=name, model=model, train=train, configurations=configurations, seeds=seeds,
                     replicates=replicates, replicate_seeds=replicate_seeds, ulp_baseline=ulp_baseline,
                     trajectory_points=trajectory_points, workers=workers, report=report)


def _table(data, key):
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise SpecError(f"[{key}] must be a table, got {value!r}.")
    return value


def _whole(data, key, default, minimum):
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SpecError(f"`{key}` must be a whole number >= {minimum}, got {value!r}.")
    return value


def _seeds(value):
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise SpecError(f"`seeds` must be >= 1 (a count) or a list of seeds, got {value}.")
        return list(range(value))
    if isinstance(value, list) and value:
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value):
            raise SpecError(f"`seeds` must list whole numbers >= 0, got {value!r}.")
        if len(set(value)) != len(value):
            raise SpecError(f"`seeds` lists a seed twice: {value!r}.")
        return list(value)
    raise SpecError(f"`seeds` must be a count (e.g. 30) or a list of seeds, got {value!r}.")


def _replicate_seeds(value, seeds, replicates):
    """`replicate_seeds` as the list of seeds it names (in `seeds`' order), or None (every seed)."""
    if value is None:
        return None
    if replicates < 2:
        raise SpecError(f"`replicate_seeds` names the seeds that get `replicates` runs, but `replicates` is "
                        f"{replicates}: set `replicates` >= 2, or leave `replicate_seeds` out.")
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= len(seeds):
            raise SpecError(f"`replicate_seeds` as a count must be between 1 and the number of seeds "
                            f"({len(seeds)}), got {value}.")
        return list(seeds[:value])
    if isinstance(value, list) and value:
        if not all(isinstance(s, int) and not isinstance(s, bool) for s in value):
            raise SpecError(f"`replicate_seeds` must list seeds (whole numbers), got {value!r}.")
        if len(set(value)) != len(value):
            raise SpecError(f"`replicate_seeds` lists a seed twice: {value!r}.")
        missing = [s for s in value if s not in seeds]
        if missing:
            raise SpecError(f"`replicate_seeds` names seed{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(map(str, missing))}, not in `seeds` ({seed_list(seeds)}).")
        return [s for s in seeds if s in value]
    raise SpecError(f"`replicate_seeds` must be a count (the first N seeds) or a non-empty list of seeds, "
                    f"got {value!r}.")


def seed_list(seeds, limit=10):
    """Seeds for a message: the first `limit` of them, then "... (N seeds)" when there are more."""
    shown = ", ".join(map(str, seeds[:limit]))
    return shown + (f", ... ({len(seeds)} seeds)" if len(seeds) > limit else "")


def _config_class(model):
    if model == "prednet":
        from prednet_keras.train import TrainConfig

        return TrainConfig
    from prednet_keras.study_train import StudyConfig

    return StudyConfig


def _train_options(model, table, base):
    """[train] checked by the model's config class; returns its resolved dict."""
    options = {key.replace("-", "_"): value for key, value in table.items()}
    owned = sorted(set(options) & set(RUNNER_OWNED))
    if owned:
        raise SpecError(f"[train] may not set {', '.join(owned)}: the study sets "
                        f"{'it' if len(owned) == 1 else 'them'} per run (use `model` and `seeds`).")
    factors = sorted(set(options) & set(ARM_FACTORS[model]))
    if factors:
        raise SpecError(f"[train] sets {', '.join(factors)}, an arm factor: set it per configuration "
                        "(all alike is fine, but then it is not a factor).")
    cls = _config_class(model)
    known = {f.name for f in dataclasses.fields(cls)} - set(RUNNER_OWNED)
    unknown = sorted(set(options) - known)
    if unknown:
        raise SpecError(f"[train]: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for "
                        f"model {model} (known: {', '.join(sorted(known))}).")
    for key in ("data", "val_data"):
        if isinstance(options.get(key), str) and base is not None and not Path(options[key]).is_absolute():
            options[key] = str((Path(base) / options[key]).resolve())
    try:
        config = cls(model=model, **options).resolved()
    except (TypeError, ValueError) as error:
        raise SpecError(f"[train]: {error}") from None
    try:
        config.check_paths()
    except FileNotFoundError as error:
        raise SpecError(f"[train]: {error.strerror}: {error.filename}") from None
    resolved = config.to_dict()
    for key in RUNNER_OWNED:
        resolved.pop(key, None)
    # The arm factors' values come from the configurations.
    for key in ARM_FACTORS[model]:
        resolved.pop(key, None)
    return resolved


def _configurations(model, table, defaults):
    if not table:
        raise SpecError("the spec names no [configurations.NAME] table: a study needs at least one.")
    unknown = sorted(set(defaults) - set(RUNTIME_KEYS))
    if unknown:
        raise SpecError(f"[runtime]: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                        f"(known: {', '.join(RUNTIME_KEYS)}).")
    from prednet_keras.runtime import RuntimeConfig

    out = []
    for name, values in table.items():
        if not _NAME.match(name):
            raise SpecError(f"configuration name {name!r}: use letters, digits, '-', '_', '.', '+'.")
        if not isinstance(values, dict):
            raise SpecError(f"[configurations.{name}] must be a table.")
        allowed = set(RUNTIME_KEYS) | set(ARM_FACTORS[model])
        unknown = sorted(set(values) - allowed)
        if unknown:
            extra = f"; arm factors of {model}: {', '.join(ARM_FACTORS[model])}" if ARM_FACTORS[model] else ""
            raise SpecError(f"[configurations.{name}]: unknown key{'s' if len(unknown) > 1 else ''} "
                            f"{', '.join(unknown)} (runtime: {', '.join(RUNTIME_KEYS)}{extra}).")
        runtime = {"backend": "tensorflow", **defaults, **{k: v for k, v in values.items() if k in RUNTIME_KEYS}}
        try:
            config = RuntimeConfig.from_dict(runtime)
        except (TypeError, ValueError) as error:
            raise SpecError(f"[configurations.{name}]: {error}") from None
        if config.precision != "float32" and model != "prednet":
            raise SpecError(f"[configurations.{name}]: precision {config.precision} is for model prednet only.")
        factors = _factors(model, name, values)
        out.append(Configuration(name=name, runtime=config.to_dict(), factors=factors))
    seen = {}
    for config in out:
        key = (tuple(sorted(config.runtime.items())), tuple(sorted(config.factors.items())))
        if key in seen:
            raise SpecError(f"configurations {seen[key]} and {config.name} are the same arm.")
        seen[key] = config.name
    return out


def _factors(model, name, values):
    factors = {}
    if model == "prednet-chainer":
        tbptt = values.get("tbptt", "chainer")
        if tbptt not in ("chainer", "clean"):
            raise SpecError(f"[configurations.{name}]: tbptt must be 'chainer' or 'clean', got {tbptt!r}.")
        aliasing = values.get("emulate_cpu_aliasing", False)
        if not isinstance(aliasing, bool):
            raise SpecError(f"[configurations.{name}]: emulate_cpu_aliasing must be true or false.")
        factors = {"tbptt": tbptt, "emulate_cpu_aliasing": aliasing}
    return factors
