"""Comparing recomputed statistics with recorded ones: exact, except floats to a relative 1e-12."""

import pytest

REL = 1e-12


def assert_close(got, want, where=""):
    """got equals want (nested dicts and lists), floats within REL (relative); `where` names the first miss."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), where
        for key in want:
            assert_close(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert isinstance(got, (int, float)), where
        assert got == pytest.approx(want, rel=REL, abs=1e-300), where
    else:
        assert got == want, where
