"""The device study's secondary part at full size (docs/study/device-full/), planned before its first run:
the spec, the analysis plan, the README and the GPU script agree with each other."""

import re
from pathlib import Path

from prednet_keras.study.report.confirmatory_report import load_plan
from prednet_keras.study.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
FULL = ROOT / "docs" / "study" / "device-full"
README = " ".join((FULL / "README.md").read_text().split())
SCRIPT = (ROOT / "scripts" / "device" / "device_study.sh").read_text()


def test_the_spec_plans_the_readme_s_runs():
    spec = load_spec(FULL / "spec.toml", check_paths=False)
    assert spec.seeds == list(range(100, 130))
    runs = spec.planned_runs()
    assert f"{len(runs)} runs in all" in README and len(runs) == 154
    assert f"{len(runs)} runs instead of 186" in load_plan(FULL / "confirmatory-plan.toml").deviations[0]
    arms = {run.key.split("/")[0] for run in runs}
    assert arms == {"jax-gpu-tf32", "jax-gpu", "jax-gpu-tf32-cpu-path"}
    assert all(f"`{arm}`" in README for arm in arms)
    # Amendment 1: every arm JAX on the GPU, float32, deterministic ops with XLA's autotuning (its default).
    for configuration in spec.configurations:
        runtime = configuration.runtime
        assert (runtime["backend"], runtime["device"], runtime["precision"]) == ("jax", "gpu", "float32")
        assert runtime["deterministic"] is True and runtime["autotune"] is None, configuration.name
    # TF32 off does not repeat with autotuning: every seed of it runs twice; the others' seeds 100 and 101 only.
    twice = {run.key.split("/")[0] for run in runs if run.key.endswith("-r2")}
    assert sum(run.key.startswith("jax-gpu/") and run.key.endswith("-r2") for run in runs) == 30
    assert twice == arms
    assert spec.train["protocol"] == "paper" and spec.train["size"] == [120, 160]


def test_the_analysis_plan_names_arms_the_spec_runs():
    spec = load_spec(FULL / "spec.toml", check_paths=False)
    plan = load_plan(FULL / "confirmatory-plan.toml")
    names = {configuration.name for configuration in spec.configurations}
    for contrast in (*plan.hypotheses, *plan.floors):
        for arm in (contrast.arm, contrast.reference):
            assert arm.split("/")[0] in names, arm
    assert [h.name for h in plan.hypotheses] == ["H3-full", "H4-full"]
    assert plan.family_size == 4 and plan.noise_floor == "tf32-off-rerun" and plan.require_provenance
    # Amendment 1, written before any run was kept.
    assert len(plan.deviations) == 1 and plan.deviations[0].startswith("2026-12-06, Amendment 1")


def test_every_planned_run_is_in_complete_clean_on_the_h100_with_its_seeds_pairs():
    from prednet_keras.study.report.seed_pairs import pairs_file, read_seed_pairs

    from .test_device_study import _manifests

    planned = load_spec(FULL / "spec.toml", check_paths=False).planned_runs()
    manifests = _manifests(FULL)
    assert set(manifests) == {run.key for run in planned}
    for key, manifest in manifests.items():
        effective = manifest["runtime"]["effective"]
        assert manifest["status"] == "complete" and manifest["code"]["dirty"] is False, key
        assert effective["devices"] == ["gpu:0 NVIDIA H100 80GB HBM3"] and effective["deterministic"], key
        assert effective["autotune"] is True and effective["tf32"] is manifest["runtime"]["requested"]["tf32"], key
        assert manifest["result"]["updates"] == 205, key
    for seed in range(100, 130):
        record = read_seed_pairs(pairs_file(FULL, seed))
        assert record["runs"] == sorted(run.key for run in planned if run.seed == seed)


def test_the_script_checks_the_held_out_frames_the_readme_names():
    spec = load_spec(FULL / "spec.toml", check_paths=False)
    held_out = Path(spec.train["heldout_data"])
    assert held_out.parts[-3:] == ("data", "study", "box-cup-120x160.h5")
    (checksum,) = re.findall(r"`(sha256:[0-9a-f]{64})`", README)
    entry = re.search(r'"device-full": \[\("held-out", "([^"]+)", \(120, 160\),\s*"(sha256:[0-9a-f]{64})"\)\]', SCRIPT)
    assert entry and entry.group(1) == "data/study/box-cup-120x160.h5" and entry.group(2) == checksum
    assert f"-o {entry.group(1)}" in README  # the command that makes it


def test_held_out_frames_travel_as_xz_and_come_back_with_the_same_checksum(tmp_path):
    """scripts/device/xz_frames.py: pack writes NAME.h5.xz with the same frames (checksum), unpack restores a
    plain NAME.h5 that gives it again and refuses to overwrite one."""
    import subprocess
    import sys

    import numpy as np

    from prednet_keras import data

    frames = np.random.default_rng(0).integers(0, 256, size=(6, 8, 10, 3), dtype=np.uint8)
    source = data.write_dataset(tmp_path / "clips.h5", data.FrameDataset(frames, ["a"] * 3 + ["b"] * 3),
                                compression="gzip")
    with data.open_dataset(source) as dataset:
        expected = data.dataset_checksum(dataset)
    script = [sys.executable, str(ROOT / "scripts" / "device" / "xz_frames.py")]
    packed = subprocess.run(script + ["pack", str(source)], capture_output=True, text=True, check=True)
    assert expected in packed.stdout
    moved = tmp_path / "carried"
    moved.mkdir()
    (tmp_path / "clips.h5.xz").rename(moved / "clips.h5.xz")
    unpacked = subprocess.run(script + ["unpack", str(moved / "clips.h5.xz")], capture_output=True, text=True,
                              check=True)
    assert expected in unpacked.stdout
    with data.open_dataset(moved / "clips.h5") as dataset:
        assert data.dataset_checksum(dataset) == expected
    before = (moved / "clips.h5").read_bytes()
    again = subprocess.run(script + ["unpack", str(moved / "clips.h5.xz")], capture_output=True, text=True)
    assert again.returncode == 1 and "not overwritten" in again.stderr
    assert (moved / "clips.h5").read_bytes() == before
    assert "xz_frames.py unpack" in SCRIPT
