"""The seeds' starting points are made in a child process while the study's runs start: a seed is there once
its seed.json is, a failing or stopped child is an error naming why, and stopping the study stops the child."""

import subprocess
import sys
import tempfile
import time

import pytest

from prednet_keras.study import starting_points
from prednet_keras.study.spec import load_spec
from prednet_keras.study.starting_points import StartingPointError, StartingPoints

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


# Slow: each starts TensorFlow in a child process.
@pytest.mark.slow
def test_seeds_come_as_they_are_written_and_closing_stops_the_child(tmp_path):
    spec = _spec(tmp_path)
    study = tmp_path / "study"
    seeds = list(range(1000))  # far more than the child writes before the first one is taken
    with starting_points.start(spec, study, seeds, "tensorflow") as points:
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
    with starting_points.start(spec, study, [0], "tensorflow") as again:
        assert again._child is None and again.wait() == {0: record}
    with pytest.raises(StartingPointError, match="other training options"):
        starting_points.start(_spec(tmp_path, images=40), study, [0], "tensorflow")
