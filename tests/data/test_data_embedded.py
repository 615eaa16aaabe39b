"""The embedded real-video splits and MNIST: what data/README.md says they are, found inside the package."""

from pathlib import Path

import lzma
import shutil

import h5py
import numpy as np
import pytest

import prednet_keras
from prednet_keras.data import DataError, SequenceGenerator, describe, embedded_dataset, load_frames, open_dataset
from prednet_keras.data.source_base import sha256_of
from prednet_keras.data import dataset_checksum

README = Path(__file__).resolve().parents[2] / "data" / "README.md"
# dataset_checksum of each split as the gzipped video_SPLIT.h5 files held it (main at 291a870, before they
# became .h5.xz): runs record it, and the study groups runs by it, so the frames and sources must not change.
CHECKSUMS = {
    "train": "sha256:bce6f0c4a0365f5f0fee02d4af71bf3eb79706444ade4b074888473871f2e4d3",
    "val": "sha256:4021252f3bb87e44fe0444a510397d1c89bb97ff81557aabc8936afea3cd1b67",
    "test": "sha256:cd482f543b0549a01f8746fd2311581c4ec03391b05c4d68c4bc9cdfbcdde4b5",
}


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


def test_frames_and_sources_are_those_the_runs_recorded(splits):
    for split, data in splits.items():
        assert dataset_checksum(data) == CHECKSUMS[split]
        assert data.frames.dtype == np.uint8 and data.sources.dtype.kind == "U"
        # Read as a source (what prednet-train --data and the recipe do): the same arrays and provenance.
        loaded = load_frames(embedded_dataset(split), size=(128, 160))
        assert dataset_checksum(loaded) == CHECKSUMS[split]
        assert loaded.provenance == data.provenance and loaded.provenance["split"] == split


def test_files_are_xz_compressed_dataset_files(splits, tmp_path):
    """`xz -d` gives an ordinary dataset file, which any HDF5 reader opens; the readers here take both."""
    for split, data in splits.items():
        path = embedded_dataset(split)
        assert path.name == f"video_{split}.h5.xz"
        plain = tmp_path / path.stem
        plain.write_bytes(lzma.decompress(path.read_bytes()))
        with h5py.File(plain, "r") as handle:
            np.testing.assert_array_equal(handle["frames"][()], data.frames)
        unpacked = open_dataset(plain)
        assert dataset_checksum(unpacked) == CHECKSUMS[split] and unpacked.provenance == data.provenance
        assert describe(path)["compression"] == "xz" and describe(plain)["compression"] == "none"
        with open_dataset(path, in_memory=False) as streamed:
            np.testing.assert_array_equal(streamed.frames[3:5], data.frames[3:5])


def test_a_damaged_xz_file_is_refused(tmp_path):
    truncated = tmp_path / "video.h5.xz"
    truncated.write_bytes(embedded_dataset("val").read_bytes()[:100_000])
    with pytest.raises(DataError, match="truncated .xz file"):
        open_dataset(truncated)
    garbage = tmp_path / "garbage.h5.xz"
    garbage.write_bytes(b"not xz at all" * 100)
    with pytest.raises(DataError, match="damaged .xz file"):
        load_frames(garbage)


def test_an_xz_bomb_is_refused_before_it_is_unpacked_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("PREDNET_MAX_UNPACKED", "1M")
    path = tmp_path / "big.h5.xz"
    shutil.copyfile(embedded_dataset("val"), path)
    with pytest.raises(DataError, match="PREDNET_MAX_UNPACKED"):
        open_dataset(path)


def test_a_file_unpacked_before_obeys_the_limits_and_its_changes(tmp_path, monkeypatch):
    path = tmp_path / "video.h5.xz"
    shutil.copyfile(embedded_dataset("val"), path)
    assert len(open_dataset(path)) == 50
    monkeypatch.setenv("PREDNET_MAX_UNPACKED", "1M")
    with pytest.raises(DataError, match="PREDNET_MAX_UNPACKED"):
        open_dataset(path)
    monkeypatch.delenv("PREDNET_MAX_UNPACKED")
    path.unlink()
    shutil.copyfile(embedded_dataset("test"), path)  # another file under the same name
    assert len(open_dataset(path)) == 120


def test_a_dataset_file_is_not_written_under_an_xz_name(tmp_path):
    from prednet_keras.data.dataset import DatasetWriter

    with pytest.raises(DataError, match=r"written as HDF5; name it \.h5"):
        DatasetWriter(tmp_path / "clip.h5.xz")
    assert list(tmp_path.iterdir()) == []
