"""The study spec: what `prednet-study run` trains, in which configurations, with which seeds.

A spec is a TOML file:

    name = "quick"                    # [default: the file's name]
    model = "autoencoder"             # prednet | prednet-chainer | autoencoder, or a user's Keras
                                      # model: "mypkg.models:small_cnn" or "models.py:small_cnn"
                                      # (a file path is relative to the spec's folder)
    seeds = 3                         # 3 -> seeds 0, 1, 2; or a list [0, 7, 11]
    replicates = 2                    # runs per seed and configuration
    replicate_seeds = [0, 1]          # only these seeds get `replicates` runs, the others one
                                      # [default: all seeds]; a whole number N: the first N seeds
    ulp_baseline = true               # + one run per seed and configuration from the seed's weights
                                      # with one weight nudged by one ulp (the noise floor)
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
    replicates = 3                    # plan keys: this configuration's own replicates,
    replicate_seeds = 1               # replicate_seeds and ulp_baseline (the top-level
    ulp_baseline = false              # values are the default)

    [report]                          # defaults of `prednet-study report` for this study
    margin_sd = 0.5

A configuration sets runtime options (`runtime.RuntimeConfig`'s fields:
backend, device, threads, interop_threads, deterministic, cudnn, tf32, onednn, autotune,
xla, strict, precision; precision other than float32 only for model prednet) and the model kind's arm
factors (for prednet-chainer `tbptt` and `emulate_cpu_aliasing`: training-code switches that the study
compares, so they are part of the configuration, not of the protocol; `model_kinds` says each kind's). Everything else
that defines training goes in [train] and is the same for every run.

A configuration may also set the plan keys `replicates`, `replicate_seeds` and
`ulp_baseline` (the top-level keys' rules), each overriding the top-level value
for that configuration only. They say how many runs the arm gets, not how it
trains: they are no part of what makes two arms differ (`Configuration.plan`,
apart from its runtime and factors). A configuration that sets `replicates`
but not `replicate_seeds` replicates the top-level `replicate_seeds` (every
seed when there are none); one whose `replicates` is 1 replicates no seed.

Every key of every table is checked when the spec is read, before anything
is planned or trained: its type, its range and a cap (spec/rules.py says
each one and why). Names (the study's, the configurations') follow one
rule: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or
digit. A spec that breaks a rule is refused with the file, the table and
key, the rule and the value as written.

This module reads and checks specs; it imports no framework (for model
prednet, [train] is resolved by prednet_keras.session.recipe_training's TrainConfig, which does).
"""

import dataclasses
import fnmatch
import functools
import tomllib
from pathlib import Path

from prednet_keras.files.small_text import SmallTextError, read_small_text
from prednet_keras import model_kinds
from prednet_keras.model_kinds.study_config import names_a_file
from prednet_keras.study.spec import rules as spec_rules
from prednet_keras.study.factors import STUDY_FACTORS, arm_factors
from prednet_keras.study.spec.rules import RuleError

__all__ = ["ARM_FACTORS", "PLAN_KEYS", "Plan", "PlannedRun", "SpecError", "StudySpec", "load_spec", "parse_spec",
           "ready_specs", "resolve_spec_path", "seed_list"]

# Training switches a configuration may set (per model kind): the study's own factors (factors.arm_factors: the
# kind's, from model_kinds, and any comparable factor of the table that is one of the kind's training options).
ARM_FACTORS = {kind.name: tuple(arm_factors(kind)) for kind in model_kinds.kinds()}
RUNTIME_KEYS = tuple(spec_rules.RUNTIME_RULES)
# Training options that identify a run rather than the protocol: set by the runner.
RUNNER_OWNED = ("model", "seed", "init_weights")
REPORT_KEYS = tuple(spec_rules.REPORT_RULES)
# Keys a configuration shares with the top level: how many runs it gets, never how it trains.
PLAN_KEYS = ("replicates", "replicate_seeds", "ulp_baseline")
TOP_KEYS = tuple(spec_rules.TOP_RULES) + ("train", "runtime", "configurations", "report")
# The specs shipped with the package: `prednet-study run quick`.
READY_SPECS = Path(__file__).parent.parent / "specs"


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
class Plan:
    """How many runs of each seed one configuration gets.

    Attributes:
        replicates: runs of each seed of replicate_seeds (every other seed runs once).
        replicate_seeds: the seeds that get `replicates` runs, in the order of
            the spec's seeds (a tuple); None: every seed.
        ulp_baseline: whether each seed also gets a run from its weights with
            one weight nudged by one ulp.
    """

    replicates: int = 1
    replicate_seeds: tuple | None = None
    ulp_baseline: bool = False

    @functools.cached_property
    def _replicated(self):
        # A set: with thousands of seeds, looking each up in the tuple would take quadratic time.
        return None if self.replicate_seeds is None else frozenset(self.replicate_seeds)

    def replicates_of(self, seed):
        """Runs of `seed` from its own weights (1 when replicate_seeds leaves it out)."""
        return self.replicates if self._replicated is None or seed in self._replicated else 1

    def run_count(self, seeds):
        """Runs of all `seeds` (the spec's), the 1-ulp runs included."""
        # Only the replicated seeds among `seeds` (a portion of a study, --seeds, has fewer than the spec).
        replicated = len(seeds) if self._replicated is None else len(self._replicated.intersection(seeds))
        return len(seeds) + replicated * (self.replicates - 1) + (len(seeds) if self.ulp_baseline else 0)

    def to_dict(self):
        return {"replicates": self.replicates,
                "replicate_seeds": None if self.replicate_seeds is None else list(self.replicate_seeds),
                "ulp_baseline": self.ulp_baseline}


@dataclasses.dataclass(frozen=True)
class Configuration:
    """One arm of the study.

    Attributes:
        name: the spec's name of the arm.
        runtime: RuntimeConfig fields (dict, complete after defaults).
        factors: arm factors (training switches) the arm sets.
        plan: its runs per seed (the spec's plan keys); not part of what the arm is.
    """

    name: str
    runtime: dict
    factors: dict
    plan: Plan = Plan()

    def runtime_config(self):
        from prednet_keras.runtime import RuntimeConfig

        return RuntimeConfig.from_dict(self.runtime)

    def to_dict(self):
        return {"name": self.name, "runtime": dict(self.runtime), "factors": dict(self.factors),
                "plan": self.plan.to_dict()}


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    """One training run of the study.

    Attributes:
        configuration: the Configuration.
        seed: seed of the initial weights and the data order.
        replicate: 1, 2, ... (a re-run of the same seed and configuration), or
            None for the 1-ulp baseline run.
        perturbation: None, or "ulp" (started from the seed's weights with one
            weight nudged by one ulp).
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
        model: "prednet", "prednet-chainer", "autoencoder", or a user's model ("module:function", or
            "/absolute/file.py:function": a relative file path in the spec is made absolute).
        train: the training options shared by every run (resolved: the
            model's config class's to_dict() without the runner-owned fields).
        configurations: the arms, in the spec's order.
        seeds: the seeds, in order.
        replicates: the top-level `replicates`: runs per seed (of the seeds in
            replicate_seeds; every other seed runs once) of a configuration
            that sets none.
        replicate_seeds: the top-level `replicate_seeds`: the seeds that get
            `replicates` runs, in the order of `seeds`; None: every seed.
        ulp_baseline: the top-level `ulp_baseline`: whether each seed of a
            configuration that sets none gets a 1-ulp run.
        (Each configuration's own values are its `plan`.)
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

    def with_seeds(self, chosen):
        """This spec with only the seeds in `chosen` (in the spec's order): one portion of a study.

        Raises:
            SpecError: a chosen seed that the spec does not have.
        """
        known = set(self.seeds)
        unknown = [seed for seed in chosen if seed not in known]
        if unknown:
            raise SpecError(f"--seeds names seed{'s' if len(unknown) > 1 else ''} {seed_list(unknown)}, not in the "
                            f"spec's seeds ({seed_list(self.seeds)}).")
        chosen = set(chosen)
        return dataclasses.replace(self, seeds=[seed for seed in self.seeds if seed in chosen])

    def select(self, patterns):
        """The configurations whose names match any of the glob `patterns` (all when none)."""
        if not patterns:
            return list(self.configurations)
        chosen = [c for c in self.configurations if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]
        if not chosen:
            names = ", ".join(c.name for c in self.configurations)
            raise SpecError(f"No configuration matches {', '.join(patterns)}; the spec has: {names}.")
        return chosen

    def replicates_of(self, seed, configuration):
        """Runs of `seed` in the configuration named `configuration` (its plan's; 1 when its
        replicate_seeds leaves the seed out)."""
        return self.configuration(configuration).plan.replicates_of(seed)

    def planned_runs(self, configurations=None):
        """Every run, seed-major (each seed's arms together, so partial results stay balanced): of each seed,
        the first runs of every arm, then the second runs of the arms that replicate it, ..., then the 1-ulp
        runs; each arm as its plan says.

        Args:
            configurations: the arms to plan (default: all).
        """
        configurations = self.configurations if configurations is None else configurations
        planned = []
        for seed in self.seeds:
            runs = [(c, c.plan.replicates_of(seed)) for c in configurations]
            for replicate in range(1, max((n for _, n in runs), default=0) + 1):
                planned += [PlannedRun(c, seed, replicate) for c, n in runs if n >= replicate]
            planned += [PlannedRun(c, seed, None, "ulp") for c in configurations if c.plan.ulp_baseline]
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


def load_spec(path, check_paths=True):
    """Reads and checks the spec file at `path`.

    Args:
        path: the spec file.
        check_paths: refuse a [train] data or weights file that does not exist (every command does; a
            reader that only plans, such as a test of a committed study whose training frames are made by
            a documented command and not committed, may leave it out).

    Raises:
        SpecError: a missing or unreadable file, bad TOML, or bad content;
            the message names the file and the problem.
    """
    path = Path(path)
    text = _read_spec(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{path}: not valid TOML ({error}).") from None
    except RecursionError:
        raise SpecError(f"{path}: not valid TOML (arrays or tables nested too deeply).") from None
    try:
        return parse_spec(data, default_name=path.stem, base=path.parent, check_paths=check_paths)
    except SpecError as error:
        raise SpecError(f"{path}: {error}") from None


def _read_spec(path):
    """The spec file's text; a device, a FIFO, a folder or a file larger than any spec is refused unread."""
    try:
        return read_small_text(path, "spec", spec_rules.MAX_SPEC_BYTES)
    except SmallTextError as error:
        raise SpecError(str(error)) from None


def parse_spec(data, default_name="study", base=None, check_paths=True, factors=STUDY_FACTORS):
    """A StudySpec from the spec's dict (what TOML gives).

    Args:
        data: the parsed file.
        default_name: the study's name when the spec has none.
        base: folder that relative data / weights paths in [train] are relative to.
        check_paths: see load_spec.
        factors: the study factors (factors.STUDY_FACTORS): which keys a configuration sets besides its runtime.
    """
    _check_keys(None, data, TOP_KEYS)
    for key, rule in spec_rules.TOP_RULES.items():
        if key in data:
            _check(None, key, data[key], rule)
    if "model" not in data:
        raise SpecError(f"model: missing; must be {spec_rules.TOP_RULES['model'].text}.")
    kind = model_kinds.get(data["model"])
    model = kind.canonical(base)
    name = data.get("name", default_name)
    if "name" not in data:
        try:
            spec_rules.NAME.check(name)
        except RuleError as error:
            raise SpecError(f"name: the spec's file name is its name when it sets none, and {error}; "
                            "set `name` in the spec.") from None
    seeds = _seeds(data.get("seeds", 1))
    replicates = data.get("replicates", 1)
    replicate_seeds = _replicate_seeds(None, data.get("replicate_seeds"), seeds, replicates)
    trajectory_points = data.get("trajectory_points", 0)
    workers = data.get("workers", 1)
    ulp_baseline = data.get("ulp_baseline", False)
    tables = {key: _table(data, key) for key in ("train", "runtime", "configurations", "report")}
    # The cheap checks first: a plan too large is refused before [train]'s options are resolved.
    configurations_table = tables["configurations"]
    _check_configuration_count(len(configurations_table))
    default_plan = Plan(replicates, None if replicate_seeds is None else tuple(replicate_seeds), ulp_baseline)
    plans = _plans(configurations_table, seeds, default_plan)
    _check_plan_size(seeds, plans)
    arms = arm_factors(kind, factors)
    train, arm_defaults = _train_options(model, tables["train"], base, check_paths, arms)
    configurations = _configurations(model, configurations_table, tables["runtime"], plans, factors, arm_defaults)
    report = tables["report"]
    _check_keys("report", report, REPORT_KEYS)
    for key, value in report.items():
        _check("report", key, value, spec_rules.REPORT_RULES[key])
    return StudySpec(name=name, model=model, train=train, configurations=configurations, seeds=seeds,
                     replicates=replicates, replicate_seeds=replicate_seeds, ulp_baseline=ulp_baseline,
                     trajectory_points=trajectory_points, workers=workers, report=dict(report))


def _place(table, key):
    """Where a key is, as the message says it: `seeds`, `[report] margin`."""
    return key if table is None else f"[{table}] {key}"


def _check(table, key, value, rule):
    """`value` by `rule`, or SpecError naming the place, the rule and the value."""
    try:
        return rule.check(value)
    except RuleError as error:
        raise SpecError(f"{_place(table, key)}: {error}.") from None


def _check_keys(table, values, known):
    unknown = sorted(set(values) - set(known))
    if unknown:
        where = "" if table is None else f"[{table}]: "
        raise SpecError(f"{where}unknown key{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(spec_rules.shown(k)[1:-1] for k in unknown)} (known: {', '.join(known)}).")


def _table(data, key):
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise SpecError(f"[{key}] must be a table, got {spec_rules.shown(value)} ({spec_rules.describe(value)}).")
    return value


def _seeds(value):
    """The seeds a checked `seeds` names: a count N is 0 .. N-1."""
    if isinstance(value, int):
        return list(range(value))
    if len(set(value)) != len(value):
        raise SpecError(f"seeds: lists a seed twice: {spec_rules.shown(value)}.")
    return list(value)


def _replicate_seeds(table, value, seeds, replicates):
    """`replicate_seeds` of `table` (None: the top level) as the list of seeds it names (in `seeds`' order),
    or None (every seed)."""
    if value is None:
        return None
    place = _place(table, "replicate_seeds")
    if replicates < 2:
        raise SpecError(f"{place}: names the seeds that get `replicates` runs, but `replicates` is "
                        f"{replicates}: set `replicates` >= 2, or leave `replicate_seeds` out.")
    if isinstance(value, int):
        if value > len(seeds):
            raise SpecError(f"{place}: as a count must be between 1 and the number of seeds "
                            f"({len(seeds)}), got {value}.")
        return list(seeds[:value])
    if len(set(value)) != len(value):
        raise SpecError(f"{place}: lists a seed twice: {spec_rules.shown(value)}.")
    known = set(seeds)
    missing = [s for s in value if s not in known]
    if missing:
        raise SpecError(f"{place}: names seed{'s' if len(missing) > 1 else ''} "
                        f"{seed_list(missing)}, not in `seeds` ({seed_list(seeds)}).")
    chosen = set(value)
    return [s for s in seeds if s in chosen]


def _plans(table, seeds, default):
    """{name: Plan} of every [configurations.NAME] (its name and table checked first): its plan keys checked,
    `default` (the top-level keys' Plan) for those it leaves out."""
    plans = {}
    for name, values in table.items():
        try:
            spec_rules.NAME.check(name)
        except RuleError as error:
            raise SpecError(f"[configurations.{spec_rules.shown(name)}]: the name {error}.") from None
        place = f"configurations.{name}"
        if not isinstance(values, dict):
            raise SpecError(f"[{place}] must be a table, got {spec_rules.shown(values)} "
                            f"({spec_rules.describe(values)}).")
        for key in PLAN_KEYS:
            if key in values:
                _check(place, key, values[key], spec_rules.TOP_RULES[key])
        replicates = values.get("replicates", default.replicates)
        if "replicate_seeds" in values:
            chosen = tuple(_replicate_seeds(place, values["replicate_seeds"], seeds, replicates))
        else:
            # The top level's replicate_seeds mean nothing to a configuration that replicates no seed.
            chosen = default.replicate_seeds if replicates > 1 else None
        plans[name] = Plan(replicates, chosen, values.get("ulp_baseline", default.ulp_baseline))
    return plans


def _check_configuration_count(configurations):
    if configurations > spec_rules.MAX_CONFIGURATIONS:
        raise SpecError(f"[configurations]: {configurations:,} configurations; at most "
                        f"{spec_rules.MAX_CONFIGURATIONS} (each is compared with every other in the report).")


def _check_plan_size(seeds, plans):
    """Refuses a plan over the caps, from the counts alone (nothing is planned)."""
    counts = [plan.run_count(seeds) for plan in plans.values()]
    total = sum(counts)
    if total > spec_rules.MAX_RUNS:
        arms = f"{len(counts)} configuration{'s' if len(counts) != 1 else ''}"
        each = (f"{counts[0]:,} per configuration x {arms}" if min(counts) == max(counts) else
                f"{min(counts):,} to {max(counts):,} per configuration, {arms}")
        raise SpecError(f"the plan has {total:,} runs ({each}); at most {spec_rules.MAX_RUNS:,} (each run is a "
                        "training process and a run folder): fewer seeds, replicates or configurations.")


def seed_list(seeds, limit=10):
    """Seeds for a message: the first `limit` of them, then "... (N seeds)" when there are more."""
    shown = ", ".join(map(str, seeds[:limit]))
    return shown + (f", ... ({len(seeds)} seeds)" if len(seeds) > limit else "")


def _train_options(model, table, base, check_paths, arms):
    """[train] checked key by key, then by the model's config class; returns its resolved dict without the arm
    factors (`arms`: factors.arm_factors), and their values there (each configuration's default)."""
    options = {key.replace("-", "_"): value for key, value in table.items()}
    owned = sorted(set(options) & set(RUNNER_OWNED))
    if owned:
        raise SpecError(f"[train] may not set {', '.join(owned)}: the study sets "
                        f"{'it' if len(owned) == 1 else 'them'} per run (use `model` and `seeds`).")
    kind = model_kinds.get(model)
    set_here = sorted(set(options) & set(arms))
    if set_here:
        raise SpecError(f"[train] sets {', '.join(set_here)}, an arm factor: set it per configuration "
                        "(all alike is fine, but then it is not a factor).")
    cls = kind.config_class()
    known = {f.name for f in dataclasses.fields(cls)} - set(RUNNER_OWNED)
    unknown = sorted(set(options) - known)
    if unknown:
        raise SpecError(f"[train]: unknown option{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(spec_rules.shown(k)[1:-1] for k in unknown)} for "
                        f"model {model} (known: {', '.join(sorted(known))}).")
    rules = spec_rules.train_rules(model)
    for key, value in options.items():
        _check("train", key, value, rules[key])
    for key in ("data", "val_data", "heldout_data"):
        value = options.get(key)
        if isinstance(value, str) and names_a_file(key, value) and base is not None \
                and not Path(value).is_absolute():
            options[key] = str((Path(base) / value).resolve())
    try:
        config = cls(model=model, **options).resolved()
    except (TypeError, ValueError) as error:
        raise SpecError(f"[train]: {error}") from None
    try:
        if check_paths:
            config.check_paths()
    except FileNotFoundError as error:
        raise SpecError(f"[train]: {error.strerror}: {error.filename}") from None
    resolved = config.to_dict()
    for key in RUNNER_OWNED:
        resolved.pop(key, None)
    # The arm factors' values come from the configurations.
    defaults = {key: resolved.pop(key, None) for key in arms}
    return resolved, defaults


def _configurations(model, table, defaults, plans, factors, arm_defaults):
    """The Configurations of [configurations] (`plans`: theirs, from _plans, which checked the names and
    tables), over the [runtime] `defaults`; the arm factors (factors.arm_factors of `factors`) default to
    their StudyFactor's default, else to their value in [train] (`arm_defaults`)."""
    if not table:
        raise SpecError("the spec names no [configurations.NAME] table: a study needs at least one.")
    _check_keys("runtime", defaults, RUNTIME_KEYS)
    for key, value in defaults.items():
        _check("runtime", key, value, spec_rules.RUNTIME_RULES[key])
    from prednet_keras.runtime import RuntimeConfig

    kind = model_kinds.get(model)
    arms = arm_factors(kind, factors)
    factor_rules = spec_rules.factor_rules(model, factors)
    out = []
    for name, values in table.items():
        place = f"configurations.{name}"
        allowed = set(RUNTIME_KEYS) | set(arms) | set(PLAN_KEYS)
        unknown = sorted(set(values) - allowed)
        if unknown:
            extra = f"; arm factors of {model}: {', '.join(arms)}" if arms else ""
            raise SpecError(f"[{place}]: unknown key{'s' if len(unknown) > 1 else ''} "
                            f"{', '.join(spec_rules.shown(k)[1:-1] for k in unknown)} "
                            f"(runtime: {', '.join(RUNTIME_KEYS)}{extra}; plan: {', '.join(PLAN_KEYS)}).")
        for key, value in values.items():
            if key not in PLAN_KEYS:
                _check(place, key, value, spec_rules.RUNTIME_RULES.get(key) or factor_rules[key])
        runtime = {"backend": "tensorflow", **defaults, **{k: v for k, v in values.items() if k in RUNTIME_KEYS}}
        try:
            config = RuntimeConfig.from_dict(runtime)
        except (TypeError, ValueError) as error:
            raise SpecError(f"[{place}]: {error}") from None
        if config.precision != "float32" and not kind.precision_modes:
            raise SpecError(f"[{place}]: precision {config.precision} is for model prednet only.")
        arm = {key: values.get(key, f.default if f.default is not None else arm_defaults.get(key))
               for key, f in arms.items()}
        out.append(Configuration(name=name, runtime=config.to_dict(), factors=arm, plan=plans[name]))
    seen, folded = {}, {}
    for config in out:
        key = (tuple(sorted(config.runtime.items())), tuple(sorted(config.factors.items())))
        if key in seen:
            raise SpecError(f"configurations {seen[key]} and {config.name} are the same arm.")
        seen[key] = config.name
        # runs/<name>/ is a folder: two names that differ only in case are one folder on macOS and Windows.
        if config.name.lower() in folded:
            raise SpecError(f"configurations {folded[config.name.lower()]} and {config.name} differ only in case; "
                            "their folders would be one on a case-insensitive file system.")
        folded[config.name.lower()] = config.name
    return out
