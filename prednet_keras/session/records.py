"""Typed records of a run folder: the manifest, its run config (options, runtime) and environment fingerprint.

`Manifest.from_json(text).to_json() == text` for every manifest the package has written: a record keeps
the keys it does not name (`extra`), in their order and with their values, so reading and writing one
changes nothing. The fields the code reads (status, result, runtime.requested/effective, seeds, study,
sessions, ...) are typed attributes; a key absent from a file reads as None and is not
written back unless the code sets it.

Schema version: a manifest's `format_version` (SCHEMA_VERSION, the number folder.py writes). Every manifest
written so far is version 1; the version-1 layout grew by fields added without a version bump, and
`migrate` fills in what an older file implies (see there). A future version 2 adds one step to
`_VERSION_STEPS`; a file newer than this package is refused, never guessed at.

Why the standard `dataclasses` and not attrs or pydantic: the records need named, typed attributes, nested
records and a verbatim round trip, and the round trip decides it. The committed manifests hold the same
record with its keys in different orders (`options` alone comes in seven orders), so any writer that emits
declared fields first and extras after them (pydantic's model_dump with extra="allow", attrs' asdict) would
rewrite them; both would need the same key-order bookkeeping written here, on top of a dependency that every
process, including the GPU machines' bare environments, would have to carry. Validation is not the
records' job either: RuntimeConfig and the recipes validate options where they are made, and a manifest is
a record of what happened that a reader must open even when it is odd. The base class is about 80 lines.

No framework is imported: the CLI reads manifests before a training process starts.
"""

import copy
import dataclasses
import json
from dataclasses import dataclass, field

from prednet_keras.files.diskwrite import json_safe
from prednet_keras.runtime.options import RUNTIME_OPTIONS, recorded_order

__all__ = [
    "RUN_FORMAT",
    "SCHEMA_VERSION",
    "Code",
    "Fingerprint",
    "InitialWeights",
    "Manifest",
    "ManifestError",
    "Options",
    "Record",
    "Result",
    "Resume",
    "Runtime",
    "RuntimeEffective",
    "RuntimeRequested",
    "Seeds",
    "Session",
    "Study",
    "migrate",
]

RUN_FORMAT = "prednet-keras-run"
SCHEMA_VERSION = 1


class ManifestError(ValueError):
    """A manifest of another format, or of a newer version than this package reads."""


def _nested(record_type):
    """Field metadata: the value is a `record_type` (or None)."""
    return {"record": record_type}


def _listed(record_type):
    """Field metadata: the value is a list of `record_type`."""
    return {"records": record_type}


@dataclass
class Record:
    """A JSON object with typed fields; keys it does not name are kept in `extra`.

    Subclasses are dataclasses whose fields default to None. A field's JSON key is its
    name, or `metadata["key"]` where the key is no Python name ("from"). `_keys` is the key order of the
    file a record was read from (None for one made in code: all fields in declaration order, then `extra`).
    """

    extra: dict = field(default_factory=dict, repr=False, kw_only=True)
    _keys: tuple | None = field(default=None, repr=False, compare=False, kw_only=True)

    @classmethod
    def _typed(cls):
        return {f.metadata.get("key", f.name): f for f in dataclasses.fields(cls) if f.name not in ("extra", "_keys")}

    @classmethod
    def from_dict(cls, data):
        """The record of a JSON object (a dict); None stays None. `data` is not changed."""
        if data is None:
            return None
        if not isinstance(data, dict):
            raise ManifestError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
        typed = cls._typed()
        values = {}
        for key, value in data.items():
            if key in typed:
                meta = typed[key].metadata
                if "record" in meta and isinstance(value, dict):
                    value = meta["record"].from_dict(value)
                elif "records" in meta and isinstance(value, list):
                    value = [meta["records"].from_dict(v) if isinstance(v, dict) else v for v in value]
                values[typed[key].name] = value
        extra = {key: value for key, value in data.items() if key not in typed}
        return cls(**values, extra=extra, _keys=tuple(data))

    def to_dict(self):
        """The JSON object: the file's keys in its order, then fields the code set, then new extra keys."""
        typed = self._typed()
        out = {}
        keys = self._keys if self._keys is not None else tuple(typed)
        for key in keys:
            if key in typed:
                out[key] = _dump(getattr(self, typed[key].name))
            elif key in self.extra:
                out[key] = self.extra[key]
        for key, f in typed.items():
            if key not in out and self._keys is not None:
                value = getattr(self, f.name)
                default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
                if value != default:
                    out[key] = _dump(value)
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    def get(self, key, default=None):
        """The value under JSON `key` (typed field or extra) as dict.get gives it: `default` only when the
        key is absent (a null is None); nested records come as records."""
        typed = self._typed()
        if key in typed:
            f = typed[key]
            value = getattr(self, f.name)
            default_value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            present = self._keys is None or key in self._keys or value != default_value
            return value if present else default
        return self.extra.get(key, default)

    def __contains__(self, key):
        return self.get(key, _ABSENT) is not _ABSENT


_ABSENT = object()


def _dump(value):
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list):
        return [_dump(v) for v in value]
    return value


# ------------------------------------------------------------------ the environment fingerprint
@dataclass
class Fingerprint(Record):
    """The machine and software of a process (runtime.fingerprint())."""

    os: dict | None = None
    cpu: dict | None = None
    gpu: dict | None = None
    python: dict | None = None
    packages: dict | None = None
    keras_backend: str | None = None
    imported_frameworks: list | None = None
    blas: dict | None = None
    environment: dict | None = None


@dataclass
class Code(Record):
    """code: the code the run was made with (code_provenance.code_provenance()). source: "git",
    "environment" (PREDNET_SOURCE_COMMIT, a copy of the tree without .git) or "unknown", with the reason
    after it when an environment variable was ignored."""

    commit: str | None = None
    dirty: bool | None = None
    source: str | None = None
    package_sha256: str | None = None
    version: str | None = None

    def describe(self):
        """"commit 6dcfd0d (dirty), package 3f2a9c01b7e4": the commit (short), whether the package's files
        differed from it, and the first 12 hex digits of their checksum; "unknown" for what is not known."""
        commit = self.commit[:7] if self.commit else "unknown"
        dirty = {True: " (dirty)", False: "", None: " (dirty: unknown)"}[self.dirty] if self.commit else ""
        return f"commit {commit}{dirty}, package {self.package_sha256[:12] if self.package_sha256 else 'unknown'}"


# ------------------------------------------------------------------ the run config
class RuntimeRequestedBase(Record):
    """What every runtime.requested record does; its fields come from the options table."""

    def to_config(self):
        """The runtime.RuntimeConfig (validated there); absent fields take its defaults."""
        from prednet_keras.runtime import RuntimeConfig

        names = {f.name for f in dataclasses.fields(RuntimeConfig)}
        return RuntimeConfig.from_dict({k: v for k, v in self.to_dict().items() if k in names})


def runtime_requested_record(options=RUNTIME_OPTIONS):
    """The record of runtime.requested for `options` (runtime/options.py): one field per option, None by
    default (a key a file lacks), in RuntimeConfig's order."""
    fields = [(option.name, option.annotation | None, field(default=None)) for option in recorded_order(options)]
    record = dataclasses.make_dataclass("RuntimeRequested", fields, bases=(RuntimeRequestedBase,), namespace={
        "__doc__": "The RuntimeConfig a run asked for (runtime.RuntimeConfig.to_dict()). precision: None in files "
                   "from before --precision (they ran in float32; see migrate)."})
    record.__module__ = __name__
    return record


RuntimeRequested = runtime_requested_record()


@dataclass
class RuntimeEffective(Record):
    """What the run's process read back (runtime.read_back); every other read-back key stays in `extra`."""

    backend: str | None = None
    keras_version: str | None = None
    backend_version: str | None = None
    device: str | None = None
    threads: int | None = None
    interop_threads: int | None = None
    deterministic: bool | None = None
    cudnn: object = None
    tf32: object = None
    precision: str | None = None
    jit_compile: object = None
    not_available: dict | None = None
    environment: dict | None = None


@dataclass
class Runtime(Record):
    """runtime: what was asked for, and (once the process started) what was in force."""

    requested: RuntimeRequested | None = field(default=None, metadata=_nested(RuntimeRequested))
    effective: RuntimeEffective | None = field(default=None, metadata=_nested(RuntimeEffective))

    @property
    def precision(self):
        """The precision in force: read back when the process recorded it, else asked for, else float32
        (files from before --precision)."""
        return ((self.effective and self.effective.precision) or (self.requested and self.requested.precision)
                or "float32")


@dataclass
class Options(Record):
    """options: the training options (recipe's TrainConfig or the study's StudyConfig, to_dict()). The
    fields read across kinds are typed; the rest of either kind stays in `extra`."""

    model: str | None = None
    protocol: str | None = None
    epochs: int | None = None
    steps_per_epoch: int | None = None
    batch_size: int | None = None
    nt: int | None = None
    size: object = None
    data: object = None
    seed: int | None = None
    init_weights: object = None


# ------------------------------------------------------------------ the manifest's parts
@dataclass
class Session(Record):
    """One process that trained the run (a resume adds one)."""

    started: str | None = None
    pid: int | None = None
    backend: str | None = None
    effective: RuntimeEffective | None = field(default=None, metadata=_nested(RuntimeEffective))
    fingerprint: Fingerprint | None = field(default=None, metadata=_nested(Fingerprint))
    start_epoch: int | None = None
    jit_compile: object = None
    seconds: float | None = None
    ended: str | None = None
    end_epoch: int | None = None
    status: str | None = None


@dataclass
class Resume(Record):
    """One `prednet-train --resume` of the run (resumes: one per resume, in order): its command, when, where
    it continued (after_epoch for Lotter's recipe, after_update for a protocol counted in updates) and the
    code it ran (`code`, absent in resumes from before it was recorded). code_changed: true when that code's
    package checksum differed from the code the run had last trained with and the resume went on anyway
    (--resume-with-changed-code); absent otherwise."""

    command: list | None = None
    time: str | None = None
    after_epoch: int | None = None
    after_update: int | None = None
    code: Code | None = field(default=None, metadata=_nested(Code))
    code_changed: bool | None = None


@dataclass
class InitialWeights(Record):
    """initial_weights: the starting point's file, where it came from, its seed and checksum."""

    file: str | None = None
    from_: str | None = field(default=None, metadata={"key": "from"})
    seed: int | None = None
    checksum: str | None = None


@dataclass
class Seeds(Record):
    """seeds: the run's seed and what was drawn from it."""

    seed: int | None = None
    initial_weights: object = None
    data_order: object = None
    data_order_checksum: str | None = None


@dataclass
class Study(Record):
    """study: which configuration and replicate of which study this run is."""

    name: str | None = None
    configuration: str | None = None
    replicate: int | None = None
    perturbation: object = None
    settings: dict | None = None
    trajectory_points: object = None
    seed_checksum: str | None = None
    executor: dict | None = None


@dataclass
class Result(Record):
    """result: the outcome. prednet-train runs record epochs and losses, study runs their protocol's
    measures (kept in `extra`); both record weights_checksum (the final weights)."""

    epochs_completed: int | None = None
    best_epoch: int | None = None
    best_val_loss: float | None = None
    best_loss: float | None = None
    final_loss: float | None = None
    final_val_loss: float | None = None
    train_seconds: float | None = None
    weights_checksum: str | None = None
    model_weights_checksum: str | None = None
    backend: str | None = None
    parameters: int | None = None
    updates: int | None = None


@dataclass
class Manifest(Record):
    """manifest.json of a run folder (see folder.py for when each part is written)."""

    format: str | None = None
    format_version: int | None = None
    name: str | None = None
    created: str | None = None
    command: list | None = None
    cwd: str | None = None
    prednet_keras_version: str | None = None
    code: Code | None = field(default=None, metadata=_nested(Code))
    status: str | None = None
    options: Options | None = field(default=None, metadata=_nested(Options))
    runtime: Runtime | None = field(default=None, metadata=_nested(Runtime))
    study: Study | None = field(default=None, metadata=_nested(Study))
    schedule: dict | None = None
    fingerprint: Fingerprint | None = field(default=None, metadata=_nested(Fingerprint))
    sessions: list | None = field(default=None, metadata=_listed(Session))
    data: dict | None = None
    initial_weights: InitialWeights | None = field(default=None, metadata=_nested(InitialWeights))
    seeds: Seeds | None = field(default=None, metadata=_nested(Seeds))
    protocol: dict | None = None
    metric: dict | None = None
    model: dict | None = None
    resumes: list | None = field(default=None, metadata=_listed(Resume))
    result: Result | None = field(default=None, metadata=_nested(Result))

    @classmethod
    def from_json(cls, text):
        """The manifest of a manifest.json's text (any format_version; see migrate for older layouts)."""
        return cls.from_dict(json.loads(text))

    def to_json(self):
        """The text folder.RunFolder.write_manifest writes (diskwrite.atomic_write_json, indented)."""
        return json.dumps(json_safe(self.to_dict()), sort_keys=False, indent=2) + "\n"

    @classmethod
    def coerce(cls, manifest):
        """A Manifest of a Manifest or a manifest dict (callers still passing dicts)."""
        return manifest if isinstance(manifest, Manifest) else cls.from_dict(manifest)

    def migrated(self):
        """This manifest in the current layout (see migrate); this one is not changed."""
        return Manifest.from_dict(migrate(self.to_dict()))

    # Typed answers to the questions the readers ask, each with its one default.
    @property
    def complete(self):
        return self.status == "complete"

    @property
    def requested(self):
        """runtime.requested (an empty record when absent)."""
        return (self.runtime and self.runtime.requested) or RuntimeRequested()

    @property
    def effective(self):
        """runtime.effective (None before the run's process started)."""
        return self.runtime.effective if self.runtime else None

    @property
    def precision(self):
        """The precision the run trained in: runtime.requested.precision, float32 where a file predates it."""
        return self.requested.precision or "float32"

    @property
    def model_kind(self):
        """options.model, or None."""
        return self.options.model if self.options else None

    @property
    def epochs(self):
        """options.epochs, 0 when absent."""
        return int((self.options and self.options.epochs) or 0)

    @property
    def last_code(self):
        """The code the run last trained with: the latest resume's that recorded one, else the run's own
        `code`; None when neither is recorded (runs from before the code record)."""
        for resume in reversed(self.resumes or []):
            if isinstance(resume, Resume) and resume.code is not None:
                return resume.code
        return self.code

    @property
    def epochs_completed(self):
        """result.epochs_completed, or None when not recorded."""
        return self.result.epochs_completed if self.result else None


# ------------------------------------------------------------------ migration
# Within version 1, fields were added without a version bump; what an older file implies for each:
#   runtime.requested.precision, runtime.effective.precision (--precision): absent = "float32", the only
#     precision there was.
#   result.model_weights_checksum (model.keras's own checksum): absent in older complete runs; it is NOT
#     invented here (model.keras may hold the best epoch, not the final weights): folder.RunFolder
#     .recorded_model_checksum says which checksum an older run's model.keras is checked against.
#   study.executor (--executor ray): absent = the local executor, which records none.
#   code (the commit and files the run was made with): absent = not recorded (runs made before it was);
#     never invented here: today's checkout is not the code an older run ran.
#   resumes[].code, resumes[].code_changed (the code each --resume ran): absent in resumes made before they
#     were recorded: not known, never invented.
_FILLS = (
    (("runtime", "requested"), "precision", "float32"),
    (("runtime", "effective"), "precision", "float32"),
)

# format_version N -> N + 1, each a function of a dict that returns the next version's dict. None yet.
_VERSION_STEPS = {}


def migrate(data):
    """A manifest dict of any version this package reads, in the current schema; `data` is not changed.

    Steps each older format_version up (`_VERSION_STEPS`), then fills in what an older version-1 file
    implies (`_FILLS`) where the key is absent, appended after the keys already there. Idempotent: a
    current manifest comes back equal.

    Raises:
        ManifestError: another format, or a format_version newer than SCHEMA_VERSION.
    """
    if not isinstance(data, dict) or data.get("format") != RUN_FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ManifestError(f"not a prednet-keras run manifest (format {found!r}, expected {RUN_FORMAT!r})")
    data = copy.deepcopy(data)
    version = int(data.get("format_version") or 1)
    if version > SCHEMA_VERSION:
        raise ManifestError(f"format_version {version}; this prednet-keras reads up to {SCHEMA_VERSION}")
    while version < SCHEMA_VERSION:
        data = _VERSION_STEPS[version](data)
        version += 1
        data["format_version"] = version
    for path, key, value in _FILLS:
        parent = data
        for part in path:
            parent = parent.get(part) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and key not in parent:
            parent[key] = value
    return data
