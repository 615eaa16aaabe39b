"""Every source kind read back against the frames the test wrote."""

import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from prednet_keras.data import DataError, FrameDataset, load_frames, open_source
from tests.data.data_builders import (
    numbered_frames,
    panning_scenes,
    write_hickle_v2,
    write_hickle_v5,
    write_pngs,
    write_video,
)


def test_folder_in_natural_order(frames_folder):
    folder, frames = frames_folder
    data = load_frames(folder)
    # frame_10 and frame_11 after frame_9, not after frame_1.
    np.testing.assert_array_equal(data.frames, frames)
    assert set(data.sources.tolist()) == {str(folder)}
    assert data.frame_shape == (12, 16, 3)


def test_folder_of_folders_gives_one_source_each(tmp_path):
    write_pngs(tmp_path / "drives" / "b", numbered_frames(3, first=5))
    write_pngs(tmp_path / "drives" / "a", numbered_frames(4))
    data = load_frames(tmp_path / "drives")
    np.testing.assert_array_equal(data.frames[:4], numbered_frames(4))
    np.testing.assert_array_equal(data.frames[4:], numbered_frames(3, first=5))
    assert [(s.split("/")[-1], a, b) for s, a, b in data.source_runs()] == [("a", 0, 4), ("b", 4, 7)]


def test_grey_frames_keep_one_channel(tmp_path):
    frames = numbered_frames(3, channels=1)
    write_pngs(tmp_path / "grey", frames)
    data = load_frames(tmp_path / "grey")
    np.testing.assert_array_equal(data.frames, frames)


def test_list_files_relative_to_the_list_and_several_lists(tmp_path):
    paths = write_pngs(tmp_path / "frames", numbered_frames(6))
    first = tmp_path / "lists" / "seq1.txt"
    first.parent.mkdir()
    # Relative to the list's folder, a comment, a blank line, an extra column.
    first.write_text("# sequence one\n../frames/frame_2.png 0\n\n../frames/frame_0.png\n")
    second = tmp_path / "seq2.txt"
    second.write_text("\n".join(str(p) for p in paths[3:]) + "\n")
    data = load_frames([first, second])
    expected = numbered_frames(6)[[2, 0, 3, 4, 5]]
    np.testing.assert_array_equal(data.frames, expected)
    assert [(s, a, b) for s, a, b in data.source_runs()] == [(str(first), 0, 2), (str(second), 2, 5)]


def test_list_of_lists_is_several_sequences(tmp_path):
    paths = write_pngs(tmp_path, numbered_frames(4))
    (tmp_path / "a.txt").write_text(f"{paths[0]}\n{paths[1]}\n")
    (tmp_path / "b.txt").write_text(f"{paths[2]}\n{paths[3]}\n")
    (tmp_path / "sequences.txt").write_text("a.txt\nb.txt\n")
    data = load_frames(tmp_path / "sequences.txt")
    assert [(s.split("/")[-1], a, b) for s, a, b in data.source_runs()] == [("a.txt", 0, 2), ("b.txt", 2, 4)]


def test_list_pointing_at_missing_files(tmp_path):
    write_pngs(tmp_path, numbered_frames(1))
    listing = tmp_path / "list.txt"
    listing.write_text("frame_0.png\nmissing_1.png\nmissing_2.png\n")
    with pytest.raises(DataError, match=r"list\.txt: 2 of 3 listed files are missing.*line 2: missing_1\.png"):
        load_frames(listing)


def test_empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no frames here")
    with pytest.raises(DataError, match="empty.*empty folder"):
        load_frames(tmp_path / "empty")


def test_unreadable_frame_names_the_file(tmp_path):
    write_pngs(tmp_path / "clip", numbered_frames(3))
    (tmp_path / "clip" / "frame_3.png").write_bytes(b"this is not a png")
    with pytest.raises(DataError, match=r"frame_3\.png: unreadable image"):
        load_frames(tmp_path / "clip")


def test_mixed_size_frames_name_the_file(tmp_path):
    write_pngs(tmp_path / "clip", numbered_frames(3))
    write_pngs(tmp_path / "clip", numbered_frames(1, height=10), pattern="frame_9.png")
    with pytest.raises(DataError, match=r"frame_9\.png: frame is 10x16x3 but .*frame_0\.png is 12x16x3"):
        load_frames(tmp_path / "clip")
    # Within one sequence a size change is an error even when resizing.
    with pytest.raises(DataError, match="frame_9.png"):
        load_frames(tmp_path / "clip", size=(8, 8))


def test_sources_of_different_sizes_need_a_size(tmp_path):
    write_pngs(tmp_path / "a", numbered_frames(2))
    write_pngs(tmp_path / "b", numbered_frames(2, height=24, width=32))
    with pytest.raises(DataError, match="mixed sizes"):
        load_frames([tmp_path / "a", tmp_path / "b"])
    data = load_frames([tmp_path / "a", tmp_path / "b"], size=(6, 8))
    assert data.frames.shape == (4, 6, 8, 3)


def test_unknown_format_and_missing_path(tmp_path):
    odd = tmp_path / "clip.xyz"
    odd.write_bytes(b"\0" * 10)
    with pytest.raises(DataError, match=r"clip\.xyz: unknown format '\.xyz'"):
        load_frames(odd)
    with pytest.raises(DataError, match="no such file or folder"):
        load_frames(tmp_path / "absent.mp4")


def test_lossless_video_frames_exact(tmp_path):
    frames = numbered_frames(7, height=16, width=24)
    path = write_video(tmp_path / "clip.avi", frames)
    source = open_source(path)
    assert source.kind == "video" and source.estimate() == 7
    data = load_frames(path)
    np.testing.assert_array_equal(data.frames, frames)
    assert set(data.sources.tolist()) == {str(path)}


def test_mp4_video_decodes_close_to_what_was_encoded(tmp_path):
    frames = panning_scenes([10], height=48, width=64)
    path = write_video(tmp_path / "clip.mp4", frames, codec="mpeg4", pix_fmt="yuv420p", bit_rate=4_000_000)
    data = load_frames(path)
    assert data.frames.shape == (10, 48, 64, 3)
    assert np.abs(data.frames.astype(int) - frames).mean() < 6  # lossy codec


def test_video_split_at_scene_cuts(tmp_path):
    frames = panning_scenes([12, 9, 14])
    path = write_video(tmp_path / "cuts.mkv", frames)
    data = load_frames(path)
    assert [(s.split("#")[-1], a, b) for s, a, b in data.source_runs()] == [
        ("scene0", 0, 12),
        ("scene1", 12, 21),
        ("scene2", 21, 35),
    ]
    assert data.provenance["scene_cuts"]["cuts"] == {str(path): [12, 21]}
    unsplit = load_frames(path, scene_cuts=False)
    assert len(unsplit.source_runs()) == 1


def test_damaged_video(tmp_path):
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"\x00\x00\x00\x18ftypisom" + b"garbage" * 200)
    with pytest.raises(DataError, match=r"broken\.mp4: not a readable video"):
        load_frames(bad)


def test_unknown_codec(tmp_path):
    path = write_video(tmp_path / "clip.avi", numbered_frames(3, height=16, width=24))
    # Rename the codec in the AVI headers: the container still opens, no decoder fits.
    (tmp_path / "odd.avi").write_bytes(path.read_bytes().replace(b"FFV1", b"ZZZ9"))
    with pytest.raises(DataError, match=r"odd\.avi: unknown video codec"):
        load_frames(tmp_path / "odd.avi")


def test_npz_with_and_without_sources(tmp_path):
    frames = numbered_frames(6)
    np.savez(tmp_path / "plain.npz", frames)
    data = load_frames(tmp_path / "plain.npz")
    np.testing.assert_array_equal(data.frames, frames)
    assert len(data.source_runs()) == 1
    np.savez(tmp_path / "named.npz", frames=frames, sources=np.array(["a"] * 2 + ["b"] * 4))
    data = load_frames(tmp_path / "named.npz")
    assert data.source_runs() == [("a", 0, 2), ("b", 2, 6)]
    np.savez(tmp_path / "float.npz", X=frames / 255.0)
    np.testing.assert_array_equal(load_frames(tmp_path / "float.npz").frames, frames)


def test_npz_with_ambiguous_keys(tmp_path):
    np.savez(tmp_path / "two.npz", first=numbered_frames(2), second=numbered_frames(2))
    with pytest.raises(DataError, match="cannot tell which array holds the frames"):
        load_frames(tmp_path / "two.npz")


def test_h5_arrays_stream_without_copy(tmp_path):
    frames = numbered_frames(5)
    with h5py.File(tmp_path / "arrays.h5", "w") as handle:
        handle["X"] = frames
        handle["sources"] = np.array([b"d1", b"d1", b"d1", b"d2", b"d2"])
    data = load_frames(tmp_path / "arrays.h5", in_memory=False)
    assert isinstance(data.frames, h5py.Dataset)
    np.testing.assert_array_equal(data.frames[()], frames)
    assert data.source_runs() == [("d1", 0, 3), ("d2", 3, 5)]
    data.close()


@pytest.mark.parametrize("writer", [write_hickle_v2, write_hickle_v5])
def test_kitti_hickle_pairs(tmp_path, writer):
    frames = numbered_frames(6)
    sources = ["city-2011_09_26_drive_0001_sync"] * 4 + ["road-2011_09_26_drive_0015_sync"] * 2
    writer(tmp_path / "X_train.hkl", frames)
    writer(tmp_path / "sources_train.hkl", sources)
    data = load_frames(tmp_path / "X_train.hkl", in_memory=False)
    assert isinstance(data.frames, h5py.Dataset)  # 2.5 GB of KITTI stays on disk
    np.testing.assert_array_equal(data.frames[()], frames)
    assert data.source_runs() == [(sources[0], 0, 4), (sources[4], 4, 6)]
    data.close()
    resized = load_frames(tmp_path / "X_train.hkl", size=(6, 8))
    assert resized.frames.shape == (6, 6, 8, 3)
    assert resized.source_runs() == [(sources[0], 0, 4), (sources[4], 4, 6)]


def test_hickle_layouts_we_cannot_read(tmp_path):
    with h5py.File(tmp_path / "X_pickled.hkl", "w") as handle:
        handle.create_dataset("data_0", data=[b"\x80\x04pickle"]).attrs["type"] = [b"pickle"]
    with pytest.raises(DataError, match="hickle stored this object pickled"):
        load_frames(tmp_path / "X_pickled.hkl")
    with h5py.File(tmp_path / "X_other.hkl", "w") as handle:
        handle["something"] = np.zeros(3)
    with pytest.raises(DataError, match="not a hickle layout"):
        load_frames(tmp_path / "X_other.hkl")
    write_hickle_v2(tmp_path / "sources_x.hkl", ["a"])
    with pytest.raises(DataError, match="this is a sources file"):
        load_frames(tmp_path / "sources_x.hkl")


def test_in_memory_dataset_round_trip():
    frames = numbered_frames(4)
    data = FrameDataset(frames[..., 0], sources=[1, 1, 2, 2])
    assert data.frame_shape == (12, 16, 1)
    assert data.source_runs() == [(1, 0, 2), (2, 2, 4)]
    assert load_frames(data) is data
    with pytest.raises(DataError, match="uint8"):
        FrameDataset(frames.astype(np.float32))
    with pytest.raises(DataError, match="3 source ids for 4 frames"):
        FrameDataset(frames, sources=[0, 0, 0])


@pytest.fixture
def without_pyav(monkeypatch):
    """Video decoding as on a machine with OpenCV but no PyAV (the GPU machine)."""
    pytest.importorskip("cv2")
    monkeypatch.setitem(sys.modules, "av", None)


# The first 48 frames of OpenCV's sample cup.mp4 (Debian opencv-doc 4.6.0+dfsg-12), cut without re-encoding:
# a real h264 stream as cameras write them.
REAL_H264_CLIP = Path(__file__).parent / "fixtures" / "cup-first-48.mp4"


def test_opencv_fallback_decodes_the_same_frames_as_pyav(tmp_path, monkeypatch):
    clip = REAL_H264_CLIP
    with_pyav = load_frames(clip, size=(64, 80), mode="resize_crop", scene_cuts=False)
    lossless = write_video(tmp_path / "clip.avi", numbered_frames(5, height=16, width=24))
    pyav_record = open_source(clip).describe(hash_files=False)

    monkeypatch.setitem(sys.modules, "av", None)
    pytest.importorskip("cv2")
    source = open_source(clip)
    record = source.describe(hash_files=False)
    assert record["decoder"].startswith("opencv") and pyav_record["decoder"].startswith("pyav")
    assert (record["size"], record["fps"], source.estimate()) == (pyav_record["size"], pyav_record["fps"], 48)
    assert record["codec"] == pyav_record["codec"] == "h264" and len(with_pyav) == 48
    with_opencv = load_frames(clip, size=(64, 80), mode="resize_crop", scene_cuts=False)
    np.testing.assert_array_equal(with_opencv.frames, with_pyav.frames)
    np.testing.assert_array_equal(load_frames(lossless).frames, numbered_frames(5, height=16, width=24))


def test_opencv_fallback_errors(tmp_path, without_pyav):
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"\x00\x00\x00\x18ftypisom" + b"garbage" * 200)
    with pytest.raises(DataError, match=r"broken\.mp4: not a readable video"):
        load_frames(bad)


def test_no_video_decoder_is_a_clear_error(tmp_path, monkeypatch):
    path = write_video(tmp_path / "clip.avi", numbered_frames(3, height=16, width=24))
    monkeypatch.setitem(sys.modules, "av", None)
    monkeypatch.setitem(sys.modules, "cv2", None)
    with pytest.raises(DataError, match="decoding video needs PyAV"):
        load_frames(path)
