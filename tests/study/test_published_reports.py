"""Issue 10's bar: every number in a published report is recomputed from the committed raw runs.

Each committed report.json names its inputs (the studies' runs.tar.xz archives) and options; building the
report again from those runs must give the same configurations, seeds, values, verdicts and statistics (the
creation time aside). The determinism tables of docs/determinism.md are recomputed from their archives too.
"""

import json
from pathlib import Path

import pytest

from prednet_keras.study.report import ReportOptions, make_report

from .close import assert_close

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = sorted(p.relative_to(ROOT) for p in (ROOT / "docs").glob("**/report/report.json"))


def test_every_published_report_is_found():
    names = {str(p.parent.parent) for p in PUBLISHED}
    assert {"docs/study/retraction", "docs/study/chainer-configurations", "docs/study/lotter-prednet",
            "docs/study/autoencoder", "docs/study/chainer-combined"} <= names


@pytest.mark.parametrize("path", PUBLISHED, ids=str)
def test_published_report_is_made_again_from_the_committed_runs(path, monkeypatch, tmp_path):
    """Every file of a published report is made again from its committed runs, the creation time taken from
    the published report.json: report.md and the plots byte for byte; report.json with every value equal,
    floats to a relative 1e-12 (the t-tests come from SciPy since the reports were made, which rounds
    some last digits otherwise: up to 6.4e-15, none of them printed in report.md)."""
    import time

    monkeypatch.chdir(ROOT)  # report.json records its inputs relative to the repository root
    published = json.loads(path.read_text())
    created = published["created"]
    monkeypatch.setattr(time, "strftime", lambda fmt, *args: created)
    make_report(published["inputs"], tmp_path, ReportOptions(**published["options"]))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(published["files"])
    for name in published["files"]:
        if name != "report.json":
            assert (tmp_path / name).read_bytes() == (path.parent / name).read_bytes(), name
    assert_close(json.loads((tmp_path / "report.json").read_text()), published, "report.json")


@pytest.mark.parametrize("model", ["autoencoder", "prednet"])
def test_published_determinism_table_is_recomputed_from_the_committed_runs(model):
    import runpy

    script = runpy.run_path(str(ROOT / "scripts" / "determinism_table.py"))
    folder = ROOT / "docs" / "determinism" / model
    rows = json.loads(json.dumps(script["table"](folder)))
    assert rows == json.loads((folder / "table.json").read_text())
    assert script["markdown"](rows) == (folder / "table.md").read_text().rstrip("\n")
