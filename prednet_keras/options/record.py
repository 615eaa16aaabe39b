"""The option records of runs and benchmarks: dataclasses that go into manifests and come back."""

import dataclasses

__all__ = ["OptionsRecord"]


class OptionsRecord:
    """Mixin for an options dataclass: a JSON-ready dict and back.

    Tuples become lists in JSON; `from_dict` turns every list back into a
    tuple, so a record read from a manifest equals the one written.
    `WHAT` names the options in the error for unknown keys.
    """

    WHAT = "options"

    def to_dict(self):
        """JSON-ready dict of every field."""
        out = dataclasses.asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out

    @classmethod
    def from_dict(cls, values):
        """The record a to_dict() produced (unknown keys are an error)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"Unknown {cls.WHAT}: {', '.join(unknown)}.")
        values = {key: tuple(value) if isinstance(value, list) else value for key, value in values.items()}
        return cls(**values)
