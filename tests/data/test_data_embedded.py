"""The embedded real-video splits and MNIST: what data/README.md says they are, found inside the package."""

from pathlib import Path

import numpy as np
import pytest

import prednet_keras
from prednet_keras.data import DataError, SequenceGenerator, embedded_dataset, open_dataset
from prednet_keras.data.source_base import sha256_of

README = Path(__file__).resolve().parents[2] / "data" / "README.md"


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


def test_files_live_in_the_package_and_are_the_documented_ones():
    package = Path(prednet_keras.__file__).resolve().parent
    readme = README.read_text()
    for split in ("train", "val", "test"):
        path = prednet_keras.datasets.embedded_video_path(split)
        assert path.resolve().parent == package / "data" / "files"
        assert sha256_of(path) in readme
    with pytest.raises(DataError, match="split 'dev'"):
        embedded_dataset("dev")


def test_public_api_gives_the_splits(splits):
    video = prednet_keras.datasets.embedded_video("val")
    np.testing.assert_array_equal(video.frames, splits["val"].frames)
    (x_train, y_train), (x_test, y_test) = prednet_keras.datasets.load_mnist()
    assert x_train.shape == (60000, 28, 28) and x_test.shape == (10000, 28, 28)
    assert y_train[:5].tolist() == [5, 0, 4, 1, 9]
