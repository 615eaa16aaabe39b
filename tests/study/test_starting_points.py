"""The seeds' starting points are made in a child process while the study's runs start: a seed is there once
its seed.json is, a failing or stopped child is an error naming why, and stopping the study stops the child."""

import subprocess
import sys
import tempfile
import time

import pytest

from prednet_keras.study.executors import starting_points
from prednet_keras.study.spec import PlannedRun, load_spec
from prednet_keras.study.executors.starting_points import StartingPointError, StartingPoints

SPEC = """
name = "tiny"
model = "autoencoder"
seeds = 2

[train]
protocol = "quick"
images = {images}

[runtime]
backend = "tensorflow"
device = "cpu"

[configurations.cpu]
"""


def _spec(tmp_path, images=30):
    path = tmp_path / f"tiny-{images}.toml"
    path.write_text(SPEC.format(images=images))
    return load_spec(path)


def _maker(code):
    """A _MakerProcess around `python -c code`, ended."""
    stderr = tempfile.TemporaryFile()
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=stderr)
    process.wait()
    return starting_points._MakerProcess(process, stderr)


def test_a_failed_child_is_reported_by_its_last_line(tmp_path):
    maker = _maker("import sys\nprint('a warning', file=sys.stderr)\n"
                                      "print('ValueError: no such model', file=sys.stderr)\nsys.exit(1)")
    points = StartingPoints(tmp_path, {}, maker, [0])
    with pytest.raises(StartingPointError, match="initial weights failed: ValueError: no such model$"):
        points.get(0)


def test_a_killed_child_is_reported_as_killed(tmp_path):
    maker = _maker("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    with pytest.raises(StartingPointError, match=r"failed: the process making them ended \(killed by signal 9\)$"):
        StartingPoints(tmp_path, {}, maker, [0]).get(0)


def test_a_child_that_ends_without_writing_a_seed_is_an_error(tmp_path):
    maker = _maker("pass")
    with pytest.raises(StartingPointError, match="seed 3 was not written"):
        StartingPoints(tmp_path, {}, maker, [3]).wait()


def test_weights_made_again_must_match_their_record(tmp_path):
    """A packed study keeps seed.json, not the weights: made again, they must have the recorded checksum."""
    import json

    folder = starting_points.seed_folder(tmp_path, 3)
    folder.mkdir(parents=True)
    (folder / starting_points.SEED_RECORD).write_text(json.dumps({"seed": 3, "checksum": "b" * 64}))
    points = StartingPoints(tmp_path, {}, _maker("pass"), [3], expected={3: {"seed": 3, "checksum": "a" * 64}})
    with pytest.raises(StartingPointError, match="made again have checksum b+, not the recorded a+"):
        points.get(3)


# Slow: each starts TensorFlow in a child process.
@pytest.mark.slow
def test_seeds_come_as_they_are_written_and_closing_stops_the_child(tmp_path):
    spec = _spec(tmp_path)
    study = tmp_path / "study"
    # Far more seeds than the child writes before the first one is taken.
    runs = [PlannedRun(spec.configurations[0], seed, 1) for seed in range(1000)]
    with starting_points.start(spec, study, runs, "tensorflow") as points:
        deadline = time.time() + 120
        while points.get(0) is None:
            assert time.time() < deadline, "seed 0 never appeared"
            time.sleep(0.05)
        record = points.get(0)
        child = points._child.process
        assert child.poll() is None, "the child had already written every seed"
    assert child.poll() is not None, "leaving the context did not stop the child"
    assert record["seed"] == 0 and record["protocol"] == spec.protocol_dict()
    assert not starting_points.seed_folder(study, 999).joinpath(starting_points.SEED_RECORD).exists()
    # What was written is kept and reused: no child for seeds already there, the same record.
    with starting_points.start(spec, study, runs[:1], "tensorflow") as again:
        assert again._child is None and again.wait() == {0: record}
    with pytest.raises(StartingPointError, match="other training options"):
        starting_points.start(_spec(tmp_path, images=40), study, runs[:1], "tensorflow")
    # A record whose weights are gone (a packed study keeps seed.json only) is made again, as recorded;
    # until then the seed is not there (the first GPU portion of docs/study/device started runs without it).
    (starting_points.seed_folder(study, 0) / starting_points.WEIGHTS).unlink()
    with starting_points.start(spec, study, runs[:1], "tensorflow") as again:
        assert again._child is not None and again.get(0) is None
        remade = again.wait()[0]
    assert remade["checksum"] == record["checksum"]
    assert starting_points.weights_path(study, 0).is_file()


def test_a_seeds_ulp_weights_differ_in_the_one_weight_its_record_names(tmp_path, monkeypatch):
    import keras
    import numpy as np

    from prednet_keras.models import starting_point

    def tiny(model, options):
        inputs = keras.Input((6,))
        return keras.Model(inputs, keras.layers.Dense(3, name="dense")(keras.layers.Dense(4, name="hidden")(inputs)))

    monkeypatch.setattr(starting_points, "build_model", tiny)
    starting_points._make({"model": "tiny", "train": {}, "seeds": [0, 1], "ulp": [1], "study_dir": str(tmp_path),
                           "protocol": {"model": "tiny"}})
    # Seed 0 has no 1-ulp run: no file, no record of one.
    plain = starting_points.read_seed_record(tmp_path, 0)
    assert "ulp_change" not in plain and not starting_points.weights_path(tmp_path, 0, "ulp").exists()
    record = starting_points.read_seed_record(tmp_path, 1)
    weights, _ = starting_point.read_initial_weights(starting_points.weights_path(tmp_path, 1))
    nudged, info = starting_point.read_initial_weights(starting_points.weights_path(tmp_path, 1, "ulp"))
    assert info["checksum"] == record["ulp_checksum"] != record["checksum"]
    change = record["ulp_change"]
    assert change == starting_point.nudge_by_ulp(weights, 1)[1]
    for key in weights:
        differing = np.flatnonzero(nudged[key] != weights[key]).tolist()
        assert differing == ([change["index"]] if key == change["key"] else [])
    before = weights[change["key"]].reshape(-1)[change["index"]]
    assert nudged[change["key"]].reshape(-1)[change["index"]] == np.nextafter(before, np.float32(np.inf))
