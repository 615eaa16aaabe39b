"""Bad input at every data door is refused: one line naming the file, the place and the rule.

Each test injects one real fault into a tiny file, runs `prednet-data` on it
over an earlier output, and checks the exit status, the message, and that
no file changed and none was added (see faults.refused). The rows of the
fault table in docs/reliability.md are these tests.
"""

import gzip
import time
import tracemalloc
import zlib

import h5py
import numpy as np
import pytest

from prednet_keras.data import DataError, load_frames, load_mnist, open_source, prepare
from tests.data.data_builders import numbered_frames, panning_scenes, write_hickle_v2, write_pngs, write_video
from tests.reliability.faults import (
    float_frames,
    idx_file,
    idx_header,
    npy_header,
    png_claiming,
    prepare_refused,
    refused,
    snapshot,
    write_npz_member,
)

TEN_MILLION_FRAMES = (10_000_000, 128, 160, 3)  # 614 GB of uint8, as a header claims it

# Non-finite and out-of-range values: refused, never turned into black pixels.


def test_nan_frame_in_npy(tmp_path):
    np.save(tmp_path / "clip.npy", float_frames(bad=(4, 2, 3, 1)))
    message = prepare_refused(tmp_path, tmp_path / "clip.npy")
    assert f"{tmp_path / 'clip.npy'}: array, frame 4: 1 NaN value (of 240)" in message
    assert "finite floats in [0, 1]" in message


def test_nan_frame_in_npz(tmp_path):
    np.savez(tmp_path / "clip.npz", frames=float_frames(bad=(3, 0, 0, 0)), sources=np.zeros(6, int))
    message = prepare_refused(tmp_path, tmp_path / "clip.npz")
    assert "clip.npz: array 'frames', frame 3: 1 NaN value" in message


def test_inf_frame_in_h5(tmp_path):
    with h5py.File(tmp_path / "clip.h5", "w") as handle:
        handle["X"] = float_frames(bad=(5, 1, 1, 2), value=np.inf)
    message = prepare_refused(tmp_path, tmp_path / "clip.h5")
    assert "clip.h5: dataset '/X', frame 5: 1 inf value" in message


def test_nan_frame_in_hickle(tmp_path):
    write_hickle_v2(tmp_path / "X_train.hkl", float_frames(bad=(2, 7, 9, 0)))
    message = prepare_refused(tmp_path, tmp_path / "X_train.hkl")
    assert "X_train.hkl: dataset '/data_0', frame 2: 1 NaN value" in message


def test_float_frames_in_dataset_file(tmp_path):
    # A dataset file holds uint8 only; one with float frames (NaN or not) is refused whole.
    with h5py.File(tmp_path / "set.h5", "w") as handle:
        handle.attrs["format"] = "prednet-keras-frames"
        handle.attrs["format_version"] = 1
        handle["frames"] = float_frames(bad=(0, 0, 0, 0))
        handle["sources"] = np.array([b"a"] * 6)
    message = prepare_refused(tmp_path, tmp_path / "set.h5")
    assert "set.h5: dataset '/frames' holds float32; a dataset file holds uint8 frames" in message


def test_float_frames_outside_0_1(tmp_path):
    np.savez(tmp_path / "clip.npz", frames=float_frames() * 255)
    message = prepare_refused(tmp_path, tmp_path / "clip.npz")
    assert "clip.npz: array 'frames', frame 0: float values outside [0, 1] (min 0, max" in message


def test_nan_image_in_mnist_npz(tmp_path):
    images = np.zeros((5, 28, 28), np.float32)
    images[3, 14, 14] = np.nan
    labels = np.arange(5, dtype=np.uint8)
    np.savez(tmp_path / "mnist.npz", x_train=images, y_train=labels, x_test=images[:2], y_test=labels[:2])
    message = refused(tmp_path, ["mnist", tmp_path / "mnist.npz"])
    assert "mnist.npz: array 'x_train', image 3: 1 NaN value" in message


def test_nan_image_in_mnist_idx(tmp_path):
    images = np.zeros((4, 28, 28), ">f4")
    images[2, 0, 5] = np.nan
    labels = np.arange(4, dtype=np.uint8)
    folder = tmp_path / "idx"
    folder.mkdir()
    for name, array in (("train-images-idx3-ubyte", images), ("train-labels-idx1-ubyte", labels),
                        ("t10k-images-idx3-ubyte", images[:1]), ("t10k-labels-idx1-ubyte", labels[:1])):
        (folder / name).write_bytes(idx_file(array))
    message = refused(tmp_path, ["mnist", folder])
    assert "train-images-idx3-ubyte, image 2: 1 NaN value" in message


# Truncated inputs and headers that claim more than the file holds: refused
# from metadata, before anything is allocated or written.


@pytest.mark.parametrize("container", ["mkv", "avi"])
def test_truncated_video(tmp_path, container):
    # Matroska ends early without an error; AVI fails mid-decode. Both are refused.
    clip = write_video(tmp_path / f"clip.{container}", panning_scenes([20], height=24, width=32))
    whole = clip.read_bytes()
    clip.write_bytes(whole[: len(whole) // 2])
    message = prepare_refused(tmp_path, clip)
    assert f"clip.{container}: truncated or damaged: " in message


@pytest.mark.parametrize("door", ["folder", "list"])
def test_truncated_image(tmp_path, door):
    noise = np.random.default_rng(0).integers(0, 256, (4, 12, 16, 3), dtype=np.uint8)  # no run to compress
    paths = write_pngs(tmp_path / "clip", noise)
    whole = paths[2].read_bytes()
    paths[2].write_bytes(whole[: len(whole) // 2])
    source = tmp_path / "clip"
    if door == "list":
        source = tmp_path / "frames.txt"
        source.write_text("".join(f"clip/{p.name}\n" for p in paths))
    message = prepare_refused(tmp_path, source)
    assert "frame_2.png: unreadable image (image file is truncated" in message


def test_image_header_claiming_900_megapixels(tmp_path):
    (tmp_path / "clip").mkdir()
    (tmp_path / "clip" / "frame_0.png").write_bytes(png_claiming(30000, 30000))
    message = prepare_refused(tmp_path, tmp_path / "clip")
    assert "frame_0.png: refused before decoding: Image size (900000000 pixels) exceeds limit" in message


def test_h5_claiming_ten_million_frames(tmp_path):
    with h5py.File(tmp_path / "claim.h5", "w") as handle:
        handle.create_dataset("X", shape=TEN_MILLION_FRAMES, dtype=np.uint8, chunks=(1, 128, 160, 3))
    assert (tmp_path / "claim.h5").stat().st_size < 16_000
    started = time.perf_counter()
    message = prepare_refused(tmp_path, tmp_path / "claim.h5")
    assert time.perf_counter() - started < 5
    assert "claim.h5: dataset '/X': declares shape (10000000, 128, 160, 3) but stores only 0 of its" in message


def test_dataset_file_claiming_ten_million_frames(tmp_path):
    # The report's case: a 2 KB file that claimed 10 million frames left 13.6 GB of temp files.
    with h5py.File(tmp_path / "set.h5", "w") as handle:
        handle.attrs["format"] = "prednet-keras-frames"
        handle.attrs["format_version"] = 1
        handle.create_dataset("frames", shape=TEN_MILLION_FRAMES, dtype=np.uint8)
        handle.create_dataset("sources", shape=(10_000_000,), dtype=h5py.string_dtype())
    assert (tmp_path / "set.h5").stat().st_size < 8_000
    message = prepare_refused(tmp_path, tmp_path / "set.h5")
    assert "set.h5: dataset '/frames': declares shape (10000000, 128, 160, 3) (572.2 GiB) but stores 0 bytes" in message


def test_truncated_dataset_file(tmp_path):
    np.save(tmp_path / "frames.npy", numbered_frames(8))
    whole = prepare(tmp_path / "frames.npy", tmp_path / "whole.h5", None)
    data = whole.read_bytes()
    (tmp_path / "cut.h5").write_bytes(data[: len(data) // 2])
    whole.unlink()
    message = prepare_refused(tmp_path, tmp_path / "cut.h5")
    assert "cut.h5: truncated HDF5 file (it holds" in message


def test_hickle_claiming_ten_million_frames(tmp_path):
    with h5py.File(tmp_path / "X_train.hkl", "w") as handle:
        handle.create_dataset("data_0", shape=TEN_MILLION_FRAMES, dtype=np.uint8).attrs["type"] = [b"ndarray"]
    message = prepare_refused(tmp_path, tmp_path / "X_train.hkl")
    assert "X_train.hkl: dataset '/data_0': declares shape (10000000, 128, 160, 3)" in message


def test_npy_header_claiming_ten_million_frames(tmp_path):
    (tmp_path / "claim.npy").write_bytes(npy_header(TEN_MILLION_FRAMES) + bytes(100))
    message = prepare_refused(tmp_path, tmp_path / "claim.npy")
    assert "claim.npy: header declares shape (10000000, 128, 160, 3) of uint8 (572.2 GiB) but 100 bytes" in message


def test_npz_member_header_claiming_ten_million_frames(tmp_path):
    write_npz_member(tmp_path / "claim.npz", "frames", npy_header(TEN_MILLION_FRAMES), payload=bytes(100))
    message = prepare_refused(tmp_path, tmp_path / "claim.npz")
    assert "claim.npz: array 'frames': header declares shape (10000000, 128, 160, 3)" in message


def test_truncated_npz(tmp_path):
    np.savez(tmp_path / "whole.npz", frames=numbered_frames(6))
    data = (tmp_path / "whole.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    (tmp_path / "whole.npz").unlink()
    message = prepare_refused(tmp_path, tmp_path / "cut.npz")
    assert "cut.npz: truncated or damaged .npz (zip) file" in message


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gz"])
def test_idx_header_claiming_ten_million_images(tmp_path, packed):
    folder = tmp_path / "idx"
    folder.mkdir()
    files = {
        "train-images-idx3-ubyte": idx_header((10_000_000, 28, 28)) + bytes(100),
        "train-labels-idx1-ubyte": idx_file(np.zeros(1, np.uint8)),
        "t10k-images-idx3-ubyte": idx_file(np.zeros((1, 28, 28), np.uint8)),
        "t10k-labels-idx1-ubyte": idx_file(np.zeros(1, np.uint8)),
    }
    for name, data in files.items():
        (folder / (name + (".gz" if packed else ""))).write_bytes(gzip.compress(data) if packed else data)
    message = refused(tmp_path, ["mnist", folder])
    if packed:
        # 7.3 GiB is over the in-memory limit; the check is made before unpacking.
        assert "train-images-idx3-ubyte.gz: IDX data: unpacks to 7.3 GiB, more than the 4.0 GiB allowed" in message
    else:
        assert "train-images-idx3-ubyte: IDX header says (10000000, 28, 28) (7840000000 bytes of data) but the " \
               "file holds 100 bytes" in message


# Zip bombs: refused from the zip directory, before anything is unpacked.


def test_npz_bomb_over_the_size_limit(tmp_path):
    write_npz_member(tmp_path / "bomb.npz", "frames", npy_header((1024, 128, 128, 1)), zeros=1024 * 128 * 128)
    assert (tmp_path / "bomb.npz").stat().st_size < 40_000
    message = prepare_refused(tmp_path, tmp_path / "bomb.npz", env={"PREDNET_MAX_UNPACKED": "1M"})
    assert ("bomb.npz: array 'frames': unpacks to 16.0 MiB, more than the 1.0 MiB allowed "
            "(PREDNET_MAX_UNPACKED); refused before unpacking") in message


def test_npz_bomb_over_the_ratio_limit(tmp_path):
    # 80 MiB of zeros in ~80 KB: under the 4 GiB limit, but 1000 to 1.
    write_npz_member(tmp_path / "bomb.npz", "frames", npy_header((80, 1024, 1024, 1)), zeros=80 << 20)
    assert (tmp_path / "bomb.npz").stat().st_size < 100_000
    message = prepare_refused(tmp_path, tmp_path / "bomb.npz")
    assert "bomb.npz: array 'frames': " in message and "more than the 200 to 1 allowed" in message
    tracemalloc.start()
    try:
        with pytest.raises(DataError, match="refused before unpacking"):
            open_source(tmp_path / "bomb.npz")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # nothing was unpacked


def test_mnist_npz_bomb(tmp_path, monkeypatch):
    labels = np.zeros(20000, np.uint8)
    others = {"y_train": labels, "x_test": np.zeros((1, 28, 28), np.uint8), "y_test": labels[:1]}
    write_npz_member(tmp_path / "mnist.npz", "x_train", npy_header((20000, 28, 28)), zeros=20000 * 28 * 28,
                     others=others)
    monkeypatch.setenv("PREDNET_MAX_UNPACKED", "1M")
    with pytest.raises(DataError, match=r"mnist\.npz: array 'x_train': unpacks to 15\.0 MiB, more than"):
        load_mnist(tmp_path / "mnist.npz")


def test_gzipped_idx_bomb(tmp_path):
    folder = tmp_path / "idx"
    folder.mkdir()
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                 "t10k-labels-idx1-ubyte"):
        images = "images" in name
        array = np.zeros((20000, 28, 28) if images else 20000, np.uint8)
        (folder / (name + ".gz")).write_bytes(gzip.compress(idx_file(array), 9))
    message = refused(tmp_path, ["mnist", folder], env={"PREDNET_MAX_UNPACKED": "1M"})
    assert "train-images-idx3-ubyte.gz: IDX data: unpacks to 15.0 MiB, more than the 1.0 MiB allowed" in message


def test_compressed_h5_bomb(tmp_path):
    # Every chunk stored, each 1 MiB of zeros deflated to ~1 KB: 1000 to 1.
    packed = zlib.compress(bytes(1 << 20), 9)
    with h5py.File(tmp_path / "bomb.h5", "w") as handle:
        frames = handle.create_dataset(
            "X", shape=(80, 1024, 1024, 1), dtype=np.uint8, chunks=(1, 1024, 1024, 1), compression="gzip"
        )
        for i in range(80):
            frames.id.write_direct_chunk((i, 0, 0, 0), packed)
    assert (tmp_path / "bomb.h5").stat().st_size < 100_000
    message = prepare_refused(tmp_path, tmp_path / "bomb.h5")
    assert "bomb.h5: dataset '/X': " in message and "more than the 200 to 1 allowed" in message


def test_good_inputs_still_pass(tmp_path):
    # The same doors accept what they always did: floats in [0, 1], uint8, integer 0-255.
    frames = numbered_frames(6)
    np.savez(tmp_path / "f.npz", frames=frames / 255.0)
    np.save(tmp_path / "i.npy", frames.astype(np.int32))
    for name in ("f.npz", "i.npy"):
        np.testing.assert_array_equal(load_frames(tmp_path / name).frames, frames)


def test_nan_frame_through_prednet_train_data(tmp_path):
    # prednet-train --data loads frames with load_training_data in its worker,
    # which prints a DataError as one line and exits 1 (a fresh worker takes
    # ~10-20 s to import a backend, so the door itself is tested here).
    from prednet_keras.options.recipe import TrainConfig
    from prednet_keras.session.training_data import load_training_data

    np.savez(tmp_path / "clip.npz", frames=float_frames(count=30, bad=(7, 3, 3, 1), value=np.inf))
    before = snapshot(tmp_path)
    config = TrainConfig(data=str(tmp_path / "clip.npz"), epochs=1).resolved()
    with pytest.raises(DataError, match=r"clip\.npz: array 'frames', frame 7: 1 inf value \(of 240\)"):
        load_training_data(config)
    assert snapshot(tmp_path) == before


def test_held_out_part_shorter_than_a_sequence_names_the_part(tmp_path):
    # 30 frames, the last 0.1 held out: 3 validation frames. The sequences' own check would call them
    # "clip.npy: 3 frames", as if the file held 3; the part and the file's count are named instead.
    from prednet_keras.options.recipe import TrainConfig
    from prednet_keras.session.training_data import load_training_data

    np.save(tmp_path / "clip.npy", numbered_frames(30))
    config = TrainConfig(data=str(tmp_path / "clip.npy"), epochs=1, nt=10).resolved()
    with pytest.raises(ValueError, match=r"clip\.npy \(last 0\.1 of frames\): 3 of the file's 30 frames, "
                                         r"fewer than nt=10; give --val-data"):
        load_training_data(config)
    train, val, _ = load_training_data(TrainConfig(data=str(tmp_path / "clip.npy"), epochs=1, nt=3).resolved())
    assert (len(train), len(val)) == (27, 3)


@pytest.mark.parametrize("option, value, said", [
    ("--cut-threshold", "nan", "the cut threshold (--cut-threshold) must be a frame difference from 0 to 1, got nan"),
    ("--cut-ratio", "nan", "the cut ratio (--cut-ratio) must be a finite number of at least 1"),
    ("--cut-ratio", "inf", "(times the nearby frames' median difference), got inf"),
])
def test_scene_cut_settings_that_are_no_numbers_are_refused(tmp_path, option, value, said):
    # Click's ranges (0-1, at least 1) let NaN through, every comparison with it being false.
    np.save(tmp_path / "clip.npy", numbered_frames(6))
    assert said in prepare_refused(tmp_path, tmp_path / "clip.npy", option, value)
