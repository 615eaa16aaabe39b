"""Issue 10's bar: every number in a published report is recomputed from the committed raw runs.

Each committed report.json names its inputs (the studies' runs.tar.xz archives) and options; building the
report again from those runs must give the same configurations, seeds, values, verdicts and statistics (the
creation time aside). The determinism tables of docs/determinism.md are recomputed from their archives too.
"""

import json
from pathlib import Path

import pytest

from prednet_keras.runs import _json_safe
from prednet_keras.study.report import ReportOptions, build_report, make_report

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = sorted(p.relative_to(ROOT) for p in (ROOT / "docs").glob("**/report/report.json"))


def _comparable(report):
    """The report's numbers and verdicts, without what depends on when or where it was made."""
    out = {"runs_used": report["runs_used"], "warnings": report["warnings"], "protocols": []}
    for section in report["protocols"]:
        out["protocols"].append({
            "metric": section["metric"],
            "configurations": [
                {k: c[k] for k in ("id", "name", "seeds", "values", "summary", "determinism")}
                for c in section["configurations"]
            ],
            "comparisons": section["comparisons"],
            "starting_points": section["starting_points"],
        })
    return json.loads(json.dumps(_json_safe(out)))  # as report.json holds it: NaN written as null


def test_every_published_report_is_found():
    names = {str(p.parent.parent) for p in PUBLISHED}
    assert {"docs/study/retraction", "docs/study/chainer-configurations", "docs/study/lotter-prednet",
            "docs/study/autoencoder", "docs/study/chainer-combined"} <= names


@pytest.mark.parametrize("path", PUBLISHED, ids=str)
def test_published_report_is_recomputed_from_the_committed_runs(path, monkeypatch):
    monkeypatch.chdir(ROOT)  # report.json records its inputs relative to the repository root
    published = json.loads(path.read_text())
    options = ReportOptions(**{**published["options"], "plots": False})
    report, _ = build_report(published["inputs"], options)
    assert _comparable(report) == _comparable(published)


@pytest.mark.parametrize("path", PUBLISHED, ids=str)
def test_published_report_regenerates_byte_identical(path, monkeypatch, tmp_path):
    """Every file of a published report (report.md, report.json, the plots) is made again, byte for byte,
    from its committed runs: only the creation time is taken from the published report.json."""
    import time

    monkeypatch.chdir(ROOT)
    published = json.loads(path.read_text())
    created = published["created"]
    monkeypatch.setattr(time, "strftime", lambda fmt, *args: created)
    make_report(published["inputs"], tmp_path, ReportOptions(**published["options"]))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(published["files"])
    for name in published["files"]:
        assert (tmp_path / name).read_bytes() == (path.parent / name).read_bytes(), name


@pytest.mark.parametrize("model", ["autoencoder", "prednet"])
def test_published_determinism_table_is_recomputed_from_the_committed_runs(model):
    import runpy

    script = runpy.run_path(str(ROOT / "scripts" / "determinism_table.py"))
    folder = ROOT / "docs" / "determinism" / model
    rows = json.loads(json.dumps(script["table"](folder)))
    assert rows == json.loads((folder / "table.json").read_text())
    assert script["markdown"](rows) == (folder / "table.md").read_text().rstrip("\n")
