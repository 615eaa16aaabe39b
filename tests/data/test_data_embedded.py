"""The embedded real-video splits: what data/README.md says they are."""

import itertools

import numpy as np
import pytest

from prednet_keras.data import (
    DataError,
    SequenceGenerator,
    data_dir,
    embedded,
    embedded_clips,
    embedded_dataset,
    open_dataset,
    open_source,
)
from prednet_keras.data.sources import sha256_of


@pytest.fixture(scope="module")
def splits():
    return {split: open_dataset(embedded_dataset(split)) for split in ("train", "val", "test")}


def test_split_contents(splits):
    runs = {split: [(s, b - a) for s, a, b in data.source_runs()] for split, data in splits.items()}
    assert runs["train"] == [
        ("bikes.mp4#scene0", 30),
        ("bikes.mp4#scene1", 46),
        ("bikes.mp4#scene2", 61),
        ("bikes.mp4#scene4", 55),
        ("bikes.mp4#scene5", 8),
    ]
    assert runs["val"] == [("bikes.mp4#scene3", 50)]
    assert runs["test"] == [("carphone_pristine.mp4", 120)]
    for data in splits.values():
        assert data.frame_shape == (128, 160, 3) and data.frames.dtype == np.uint8


def test_test_clip_is_held_out(splits):
    train_inputs = {i["sha256"] for i in splits["train"].provenance["inputs"]}
    test_inputs = {i["sha256"] for i in splits["test"].provenance["inputs"]}
    assert not train_inputs & test_inputs
    assert not set(splits["train"].sources) & set(splits["val"].sources)


def test_frames_are_real_video(splits):
    frames = splits["train"].frames.astype(np.float32)
    # Consecutive frames within a scene are close; the whole set is not flat.
    within = np.abs(frames[1:30] - frames[:29]).mean()
    assert 1 < within < 20
    assert frames.std() > 30


def test_sequence_counts(splits):
    assert SequenceGenerator(splits["train"], nt=10).N_sequences == 21 + 37 + 52 + 46
    assert SequenceGenerator(splits["val"], nt=10).N_sequences == 41
    assert SequenceGenerator(splits["test"], nt=10, sequence_start_mode="unique").N_sequences == 12


def test_missing_data_folder_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv(embedded.ENV_VAR, str(tmp_path))
    with pytest.raises(DataError, match="video_train.h5: embedded file missing"):
        embedded_dataset("train")
    monkeypatch.setenv(embedded.ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match="does not exist"):
        embedded_dataset("test")
    with pytest.raises(DataError, match="split 'dev'"):
        embedded_dataset("dev")


def test_extra_clips_are_the_recorded_files_and_decode():
    readme = (data_dir() / "README.md").read_text()
    # (width, height) and the frame count the container declares, as data/README.md lists them.
    expected = {"vtest.avi": ((768, 576), 795), "box.mp4": ((640, 480), 456), "cup.mp4": ((640, 480), 217)}
    paths = embedded_clips()
    assert [p.name for p in paths] == list(embedded.CLIPS) == list(expected)
    for path in paths:
        digest = sha256_of(path)
        assert digest == embedded.CLIPS[path.name] and digest in readme
        source = open_source(path)
        (width, height), frames = expected[path.name]
        assert source.kind == "video" and source.size == (height, width) and source.estimate() == frames
        ((label, run),) = source.runs()
        first = [frame for frame, _ in itertools.islice(run, 3)]
        run.close()
        assert len(first) == 3 and all(f.shape == (height, width, 3) and f.dtype == np.uint8 for f in first)
        assert first[0].std() > 20  # a real picture, not a blank frame
