"""Numbers that docs/benchmarks.md and a record's README state, recomputed from the record's raw JSON: a
sentence that drifts from its record fails here."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "docs" / "benchmarks.md"


def _inductor_cache_processes():
    record = ROOT / "docs" / "benchmarks" / "h100-inductor-cache-2026-12-06"
    trains = [json.loads((record / f"process-{i}.json").read_text())["results"][0]["train"] for i in (1, 2, 3)]
    return record, trains


@pytest.mark.parametrize("where", ["docs/benchmarks.md", "record README"])
def test_the_inductor_cache_figures_are_the_records(where):
    record, trains = _inductor_cache_processes()
    text = " ".join((BENCHMARKS if where == "docs/benchmarks.md" else record / "README.md").read_text().split())
    first = [f"{t['warmup_seconds'][0]:.1f} s" for t in trains]
    fps = [f"{t['fps']:,.0f}" for t in trains]
    caches = [t["torch_inductor_cache"] for t in trains]
    # The first process compiled every graph into the empty cache; the later ones loaded all of them.
    assert caches[0]["hits"] == 0 and all(c["hits"] == caches[0]["misses"] and c["misses"] == 0 for c in caches[1:])
    if where == "docs/benchmarks.md":
        assert f"**{first[0]}** with the empty cache ({caches[0]['misses']} graphs compiled)" in text
        assert f"**{first[1]} and {first[2]}** in the next two (all {caches[1]['hits']} loaded)" in text
        assert f"at {fps[0]}, {fps[1]} and {fps[2]} frames/s" in text
    else:
        for i, (seconds, rate, cache) in enumerate(zip(first, fps, caches, strict=True), 1):
            assert f"| {seconds} | {cache['hits']} / {cache['misses']} | {rate} |" in text, i
