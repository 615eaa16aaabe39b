"""The device study's published status (docs/study/device/README.md) recomputed from its records: which runs
exist, and the determinism check (each deterministic arm's seeds 100 and 101 run twice). A sentence whose
number drifts from the records fails here."""

import csv
import hashlib
import io
import json
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from prednet_keras.runtime.code_provenance import package_sha256
from prednet_keras.study.report.confirmatory_report import load_plan
from prednet_keras.study.report.seed_pairs import pairs_file, read_seed_pairs
from prednet_keras.study.spec import load_spec

STUDY = Path(__file__).resolve().parents[2] / "docs" / "study" / "device"
README = (STUDY / "README.md").read_text()
ROOT_README = (STUDY.parents[2] / "README.md").read_text()


def _manifests(study=STUDY):
    """{configuration/run: manifest} of the runs packed in a study folder's runs.tar.xz."""
    with tarfile.open(study / "runs.tar.xz") as tar:
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
    assert seeds == list(range(100, 135))
    expected = {run.key for run in planned if run.seed in seeds}
    assert set(manifests) == expected and len(expected) == 621
    # Clean committed code, or code the plan knows by its package checksum (portion 5: see the deviations).
    known = dict(load_plan(STUDY / "confirmatory-plan.toml").code_checksums)
    assert all(m["status"] == "complete" and (m["code"]["dirty"] is False or m["code"]["package_sha256"] in known)
               for m in manifests.values())
    assert sum(m["code"]["dirty"] is not False for m in manifests.values()) == 42
    assert all(pairs_file(STUDY, seed).is_file() for seed in seeds)
    assert f"{len(expected)} runs of seeds 100-134" in README
    assert f"35 fresh seeds (100-134), {len(expected)} runs" in ROOT_README


def test_the_code_the_plan_knows_by_its_checksum_is_that_commits_package(tmp_path):
    """Recomputed from git: the package folder of each commit in the plan's code_checksums has that checksum."""
    root = STUDY.parents[2]
    for checksum, commit in load_plan(STUDY / "confirmatory-plan.toml").code_checksums:
        try:
            archive = subprocess.run(["git", "-C", str(root), "archive", commit, "prednet_keras"],
                                     capture_output=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            pytest.skip("not a git checkout with the study's history")
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp_path / commit, filter="data")
        assert package_sha256(tmp_path / commit / "prednet_keras") == checksum


def test_the_repeatable_arms_repeat_bit_for_bit():
    """Amendment 1's arms, seeds 100 and 101: the weights' checksums (manifest) and the loss curves
    (history.csv) of r2 equal r1's. Their pairs were not computed (the earlier runs' large files were gone)."""
    manifests = _manifests()
    def curve_digest(data):
        # The losses only (the seconds column is a timing), as a digest: a failure must not display a loss
        # value (preregistration.md: no interim looks).
        rows = list(csv.DictReader(io.StringIO(data.decode())))
        return hashlib.sha256(",".join(row["loss"] for row in rows).encode()).hexdigest() if rows else None

    with tarfile.open(STUDY / "runs.tar.xz") as tar:
        curves = {member.name.split("/", 1)[1].rsplit("/", 1)[0]: curve_digest(tar.extractfile(member).read())
                  for member in tar.getmembers() if member.name.endswith("/history.csv")}
    for arm in ("jax-gpu-repeatable", "jax-gpu-repeatable-tf32", "jax-gpu-repeatable-cpu-path"):
        for seed in (100, 101):
            first, second = (f"{arm}/seed-{seed:04d}-r{r}" for r in (1, 2))
            assert manifests[first]["runtime"]["effective"]["autotune"] is False
            assert manifests[first]["result"]["weights_checksum"] == manifests[second]["result"]["weights_checksum"]
            assert curves[first] and curves[first] == curves[second]
    assert "| `jax-gpu-repeatable`, `-tf32`, `-cpu-path` (the three above with autotuning off; Amendment 1) | identical" \
        in README


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
