"""Pairs of one seed's runs compared through their large files (study/report/seed_pairs.py): prediction
disagreement, weight distance over training, the first update whose loss differs."""

import json
import math

import numpy as np
import pytest

from prednet_keras.session.records import RUN_FORMAT
from prednet_keras.study.report.seed_pairs import PairsError, compare_runs, pairs_file, read_seed_pairs, write_seed_pairs
from prednet_keras.study.spec import parse_spec


def _run(folder, losses, predictions=None, trajectory=None, status="complete"):
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"format": RUN_FORMAT, "format_version": 1, "status": status}))
    rows = ["update,loss"] + [f"{i},{loss!r}" for i, loss in enumerate(losses, start=1)]
    (folder / "history.csv").write_text("\n".join(rows) + "\n")
    if predictions is not None:
        np.savez(folder / "heldout_predictions.npz", **predictions)
    if trajectory is not None:
        steps, values = trajectory
        np.savez(folder / "trajectory.npz", steps=np.asarray(steps), values=np.asarray(values))
    return folder


def test_compare_runs_measures_what_it_says(tmp_path):
    rng = np.random.default_rng(0)
    seq = {"s0": rng.random((4, 2, 2, 3)), "s1": rng.random((2, 2, 2, 3))}
    moved = {"s0": seq["s0"] + 0.1, "s1": seq["s1"].copy()}
    weights = rng.normal(size=(3, 8))
    other = weights.copy()
    other[2] = -weights[2]  # the last snapshot points the other way
    a = _run(tmp_path / "a", [0.5, 0.25, 0.125], moved, ([0, 1, 2], other))
    b = _run(tmp_path / "b", [0.5, 0.25, 0.120], seq, ([0, 1, 2], weights))
    out = compare_runs(a, b)
    assert out["first_differing_update"] == 3 and out["updates"] == [3, 3]
    # 48 of 72 values moved by 0.1: RMS = 0.1 * sqrt(48 / 72).
    assert out["prediction_rms"] == pytest.approx(0.1 * math.sqrt(48 / 72))
    assert out["prediction_rms_per_sequence"] == pytest.approx({"s0": 0.1, "s1": 0.0})
    assert out["prediction_scale"] == pytest.approx(
        math.sqrt((np.sum(seq["s0"] ** 2) + np.sum(seq["s1"] ** 2)) / 72))
    distance = out["weight_distance"]
    assert distance["steps"] == [0, 1, 2]
    assert distance["normalised_l2"][:2] == [0.0, 0.0] and distance["normalised_l2"][2] == pytest.approx(2.0)
    assert distance["cosine_distance"][:2] == pytest.approx([0.0, 0.0]) and distance["cosine_distance"][2] == \
        pytest.approx(2.0)


def test_identical_runs_differ_nowhere(tmp_path):
    seq = {"s0": np.ones((2, 2, 2, 3))}
    a = _run(tmp_path / "a", [0.5, 0.25], seq)
    b = _run(tmp_path / "b", [0.5, 0.25], seq)
    out = compare_runs(a, b)
    assert out["first_differing_update"] is None and out["prediction_rms"] == 0.0
    assert "weight_distance" not in out  # no trajectories: nothing said about weights


def test_what_cannot_be_compared_is_refused(tmp_path):
    a = _run(tmp_path / "a", [0.5], {"s0": np.full((2, 2, 2, 3), np.nan)})
    b = _run(tmp_path / "b", [0.5], {"s0": np.ones((2, 2, 2, 3))})
    with pytest.raises(PairsError, match="NaN or inf"):
        compare_runs(a, b)
    c = _run(tmp_path / "c", [0.5], {"other": np.ones((2, 2, 2, 3))})
    with pytest.raises(PairsError, match="different held-out sequences"):
        compare_runs(b, c)


def test_a_seed_is_written_only_when_all_its_runs_are_complete(tmp_path):
    spec = parse_spec({"model": "prednet-chainer", "seeds": [7, 8], "train": {"protocol": "quick"},
                       "configurations": {"x": {"backend": "jax"}, "y": {"backend": "torch"}}})
    study = tmp_path / "study"
    seq = {"s0": np.ones((2, 2, 2, 3))}
    for config in ("x", "y"):
        _run(study / "runs" / config / "seed-0007-r1", [0.5, 0.25], seq)
    _run(study / "runs" / "x" / "seed-0008-r1", [0.5], seq)
    _run(study / "runs" / "y" / "seed-0008-r1", [0.5], seq, status="running")
    result = write_seed_pairs(study, spec.planned_runs())
    assert result["written"] == [7] and result["incomplete"] == {8: ["y/seed-0008-r1"]}
    record = read_seed_pairs(pairs_file(study, 7))
    assert record["runs"] == ["x/seed-0007-r1", "y/seed-0007-r1"]
    assert [(p["a"], p["b"], p["prediction_rms"]) for p in record["pairs"]] == [
        ("x/seed-0007-r1", "y/seed-0007-r1", 0.0)]
    # Written once: the runs' large files may be gone afterwards.
    for folder in (study / "runs").glob("*/seed-0007-r1"):
        (folder / "heldout_predictions.npz").unlink()
    assert write_seed_pairs(study, spec.planned_runs())["kept"] == [7]
    assert read_seed_pairs(pairs_file(study, 7)) == record


def test_seeds_compared_in_processes_write_the_same_files(tmp_path):
    spec = parse_spec({"model": "prednet-chainer", "seeds": [7, 8, 9], "train": {"protocol": "quick"},
                       "configurations": {"x": {"backend": "jax"}, "y": {"backend": "torch"}}})
    rng = np.random.default_rng(1)
    for study in (tmp_path / "one", tmp_path / "three"):
        for seed in (7, 8, 9):
            for config in ("x", "y"):
                seq = {"s0": rng.random((2, 2, 2, 3))}
                _run(study / "runs" / config / f"seed-{seed:04d}-r1", [0.5, seed / 10], seq,
                     ([0, 1], rng.normal(size=(2, 4))))
        rng = np.random.default_rng(1)  # the second study's runs are the first's
    one = write_seed_pairs(tmp_path / "one", spec.planned_runs())
    three = write_seed_pairs(tmp_path / "three", spec.planned_runs(), workers=3)
    assert one == three and three["written"] == [7, 8, 9]
    for seed in (7, 8, 9):
        record = read_seed_pairs(pairs_file(tmp_path / "three", seed))
        assert record == read_seed_pairs(pairs_file(tmp_path / "one", seed))
        assert record["pairs"][0]["prediction_rms"] > 0


def test_a_portion_of_seeds_and_the_pairs_command(tmp_path):
    """--seeds runs a block of the spec's seeds; `prednet-study pairs` writes the complete seeds and, asked to,
    removes the finished runs of a seed left incomplete."""
    from click.testing import CliRunner

    from prednet_keras.cli.study import main

    spec_path = tmp_path / "spec.toml"
    spec_path.write_text('model = "prednet-chainer"\nseeds = [7, 8, 9]\n[train]\nprotocol = "quick"\n'
                         '[configurations.x]\nbackend = "jax"\n[configurations.y]\nbackend = "torch"\n')
    dry = CliRunner().invoke(main, ["run", str(spec_path), "-o", str(tmp_path / "s"), "--dry-run", "--seeds", "8-9"])
    assert dry.exit_code == 0 and "2 seeds" in dry.output and "= 4 runs" in dry.output, dry.output
    refused = CliRunner().invoke(main, ["run", str(spec_path), "-o", str(tmp_path / "s"), "--dry-run", "--seeds", "6"])
    assert refused.exit_code != 0 and "--seeds names seed 6, not in the spec's seeds (7, 8, 9)" in refused.output
    bad = CliRunner().invoke(main, ["run", str(spec_path), "-o", str(tmp_path / "s"), "--seeds", "9-8"])
    assert bad.exit_code == 2 and "range N-M with N <= M" in bad.output

    study = tmp_path / "s"
    seq = {"s0": np.ones((2, 2, 2, 3))}
    for config in ("x", "y"):
        _run(study / "runs" / config / "seed-0007-r1", [0.5], seq)
    _run(study / "runs" / "x" / "seed-0008-r1", [0.5], seq)
    result = CliRunner().invoke(main, ["pairs", str(spec_path), "-o", str(study), "--remove-incomplete"])
    assert result.exit_code == 0, result.output
    assert "pairs written for 1 seed(s), 0 already there, 2 incomplete" in result.output
    assert "removed 1 finished run(s) of seed(s) 8, left incomplete" in result.output
    assert not (study / "runs" / "x" / "seed-0008-r1").exists()
    assert (study / "runs" / "x" / "seed-0007-r1").is_dir() and pairs_file(study, 7).is_file()
