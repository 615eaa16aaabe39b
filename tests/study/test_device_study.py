"""The device study's published status (docs/study/device/README.md) recomputed from its records: which runs
exist, and the determinism check (each deterministic arm's seeds 100 and 101 run twice). A sentence whose
number drifts from the records fails here."""

import json
import re
import tarfile
from pathlib import Path

import pytest

from prednet_keras.study.seed_pairs import pairs_file, read_seed_pairs
from prednet_keras.study.spec import load_spec

STUDY = Path(__file__).resolve().parents[2] / "docs" / "study" / "device"
README = (STUDY / "README.md").read_text()


def _manifests():
    with tarfile.open(STUDY / "runs.tar.xz") as tar:
        return {member.name.split("/", 1)[1].rsplit("/", 1)[0]: json.load(tar.extractfile(member))
                for member in tar.getmembers() if member.name.endswith("/manifest.json")}


def _repeat(arm, seed):
    """(first differing update, prediction RMS) of the arm's r2 against its r1, from the seed's pairs."""
    record = read_seed_pairs(pairs_file(STUDY, seed))
    a, b = f"{arm}/seed-{seed:04d}-r1", f"{arm}/seed-{seed:04d}-r2"
    (pair,) = [p for p in record["pairs"] if {p["a"], p["b"]} == {a, b}]
    return pair["first_differing_update"], pair["prediction_rms"]


def test_every_kept_seed_has_all_its_planned_runs_complete_and_its_pairs():
    manifests = _manifests()
    planned = load_spec(STUDY / "spec.toml", check_paths=False).planned_runs()
    seeds = sorted({int(key.split("/seed-")[1][:4]) for key in manifests})
    assert seeds == list(range(100, 109))
    expected = {run.key for run in planned if run.seed in seeds}
    assert set(manifests) == expected and len(expected) == 137
    assert all(m["status"] == "complete" and m["code"]["dirty"] is False for m in manifests.values())
    assert all(pairs_file(STUDY, seed).is_file() for seed in seeds)
    assert f"{len(expected)} runs of seeds 100-108" in README


def _row(arm):
    (line,) = [line for line in README.splitlines() if line.startswith(f"| `{arm}`")]
    return line


@pytest.mark.parametrize("arm", ["jax-gpu", "jax-gpu-cpu-path", "jax-gpu-nondeterministic"])
def test_the_repeats_that_differ_differ_as_the_readme_says(arm):
    cells = _row(arm).split("|")[2:4]
    for seed, cell in zip((100, 101), cells):
        update, rms = _repeat(arm, seed)
        said = re.search(r"differ from update (\d+)\**; (?:held-out predictions RMS )?([0-9.]+)", cell)
        assert said, cell
        assert int(said.group(1)) == update
        assert float(said.group(2)) == pytest.approx(rms, rel=5e-3)


@pytest.mark.parametrize("arm", ["jax-gpu-tf32", "jax-cpu", "jax-cpu-cpu-path", "torch-gpu", "torch-gpu-cpu-path",
                                 "torch-cpu", "torch-cpu-cpu-path", "torch-cpu-2-threads"])
def test_the_repeats_said_identical_are_bit_identical(arm):
    manifests = _manifests()
    for seed in (100, 101):
        assert _repeat(arm, seed) == (None, 0.0)
        first, second = (manifests[f"{arm}/seed-{seed:04d}-r{r}"]["result"]["weights_checksum"] for r in (1, 2))
        assert first == second
    assert f"`{arm}`" in README
