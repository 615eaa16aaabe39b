"""prednet-train --repeat's audit (study/report/repeats.py) on real run folders: the study's determinism audit
decides, one repeat differing in one loss is caught, repeat.json says which."""

import json
import shutil
from pathlib import Path

from prednet_keras.study.report.repeats import audit_repeats

RUN = Path(__file__).resolve().parents[2] / "docs" / "benchmarks" / "h200-perf-2026-12-04" / "quality-float32"


def _repeats(tmp_path, count):
    folders = []
    for number in range(1, count + 1):
        folder = tmp_path / f"repeat-{number}"
        shutil.copytree(RUN, folder)
        folders.append(folder)
    return folders


def test_identical_repeats(tmp_path):
    folders = _repeats(tmp_path, 3)
    audit = audit_repeats(tmp_path, folders, deterministic_requested=True)
    assert audit["bit_identical"] is True and audit["repeats"] == 3
    assert all(r["identical_to_first"] for r in audit["runs"])
    written = json.loads((tmp_path / "repeat.json").read_text())
    assert written == {k: v for k, v in audit.items() if k != "path"}
    assert audit["path"] == str(tmp_path / "repeat.json")
    manifest = json.loads((RUN / "manifest.json").read_text())
    assert {r["weights_checksum"] for r in audit["runs"]} == {manifest["result"]["weights_checksum"]}


def test_one_loss_changed_is_caught(tmp_path):
    folders = _repeats(tmp_path, 3)
    history = folders[2] / "history.csv"
    lines = history.read_text().splitlines()
    fields = lines[-1].split(",")
    header = lines[0].split(",")
    loss = header.index("loss")
    fields[loss] = repr(float(fields[loss]) * (1 + 1e-7))  # the last digits of one loss
    history.write_text("\n".join(lines[:-1] + [",".join(fields)]) + "\n")
    audit = audit_repeats(tmp_path, folders, deterministic_requested=False)
    assert audit["bit_identical"] is False and audit["deterministic_requested"] is False
    assert [r["identical_to_first"] for r in audit["runs"]] == [True, True, False]
    # The weights agree; the loss curve does not.
    runs = audit["runs"]
    assert runs[2]["weights_checksum"] == runs[0]["weights_checksum"]
    assert runs[2]["curve_checksum"] != runs[0]["curve_checksum"]
