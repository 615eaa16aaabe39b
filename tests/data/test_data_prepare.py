"""prepare() and the prednet-data command: files written whole or not at all."""

import json

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from prednet_keras.cli.data import main
from prednet_keras.data import DataError, describe, load_frames, open_dataset, prepare
from tests.data.data_builders import panning_scenes, write_video


def test_prepare_round_trip(tmp_path, frames_folder):
    folder, frames = frames_folder
    video = write_video(tmp_path / "cuts.avi", panning_scenes([11, 10], height=24, width=32))
    out = prepare([folder, video], tmp_path / "set.h5", size=(6, 8), command="test")
    data = open_dataset(out)
    expected = load_frames([folder, video], size=(6, 8))
    np.testing.assert_array_equal(data.frames, expected.frames)
    assert [(s, a, b) for s, a, b in data.source_runs()] == [
        (str(folder), 0, 12),
        (f"{video}#scene0", 12, 23),
        (f"{video}#scene1", 23, 33),
    ]
    provenance = data.provenance
    assert provenance["command"] == "test"
    assert provenance["transform"] == {
        "size": [6, 8], "mode": "resize_crop", "offset": [0, 0], "interpolation": "bilinear"
    }
    assert provenance["scene_cuts"]["cuts"] == {str(video): [11]}
    assert [i["kind"] for i in provenance["inputs"]] == ["frames", "video"]
    assert len(provenance["inputs"][1]["sha256"]) == 64
    with h5py.File(out, "r") as handle:
        assert handle["frames"].dtype == np.uint8
        assert handle["frames"].chunks == (1, 6, 8, 3)
        assert handle.attrs["format"] == "prednet-keras-frames"
    assert describe(out)["frames"] == 33


def test_existing_file_is_never_overwritten(tmp_path, frames_folder):
    folder, _ = frames_folder
    out = tmp_path / "set.h5"
    out.write_bytes(b"precious")
    with pytest.raises(DataError, match="already exists; not overwritten"):
        prepare(folder, out, size=(6, 8))
    assert out.read_bytes() == b"precious"
    prepare(folder, out, size=(6, 8), overwrite=True)
    assert len(open_dataset(out)) == 12


def test_failure_leaves_nothing_behind(tmp_path, frames_folder):
    folder, _ = frames_folder
    (folder / "frame_99.png").write_bytes(b"broken")
    with pytest.raises(DataError, match=r"frame_99\.png: unreadable image"):
        prepare(folder, tmp_path / "set.h5", size=(6, 8))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip"]


def test_crop_mode_with_offset(tmp_path, frames_folder):
    folder, frames = frames_folder
    out = prepare(folder, tmp_path / "crop.h5", size=(4, 4), mode="crop", offset=(2, -3))
    # top = 2 + (12 - 4) // 2 = 6, left = -3 + (16 - 4) // 2 = 3.
    np.testing.assert_array_equal(open_dataset(out).frames, frames[:, 6:10, 3:7])


def test_open_dataset_rejects_other_files(tmp_path):
    with h5py.File(tmp_path / "plain.h5", "w") as handle:
        handle["X"] = np.zeros((2, 2, 2, 3), np.uint8)
    with pytest.raises(DataError, match="not a prednet-keras dataset"):
        open_dataset(tmp_path / "plain.h5")
    (tmp_path / "text.h5").write_text("hello")
    with pytest.raises(DataError, match="not a readable HDF5 file"):
        open_dataset(tmp_path / "text.h5")


def test_cli_prepare_and_info(tmp_path, frames_folder):
    folder, _ = frames_folder
    out = tmp_path / "cli.h5"
    runner = CliRunner()
    result = runner.invoke(main, ["prepare", str(folder), "-o", str(out), "--size", "6x8", "-q"])
    assert result.exit_code == 0, result.output
    assert "12 frames of 6x8x3" in result.output
    result = runner.invoke(main, ["info", str(out), "--nt", "5"])
    assert result.exit_code == 0, result.output
    assert "nt=5 sequences: 8 ('all' starts), 2 ('unique')" in result.output
    info = json.loads(runner.invoke(main, ["info", str(out), "--json"]).output)
    assert info["frames"] == 12 and info["provenance"]["command"].startswith("prednet-data")


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["prepare", "{tmp}/nothing", "-o", "{tmp}/x.h5"], "nothing: no such file or folder"),
        (["prepare", "{tmp}/clip", "-o", "{tmp}/clip/frame_0.png"], "frame_0.png: already exists"),
        (["prepare", "{tmp}/clip", "-o", "{tmp}/x.h5", "--size", "big"], "Invalid value for '--size'"),
        (["prepare", "{tmp}/clip", "-o", "{tmp}/x.h5", "--size", "4x4", "--mode", "crop", "--offset", "9,0"],
         "does not fit"),
        (["info", "{tmp}/clip/frame_0.png"], "not a readable HDF5 file"),
    ],
)
def test_cli_errors_without_traceback(tmp_path, frames_folder, arguments, message):
    arguments = [a.format(tmp=tmp_path) for a in arguments]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "x.h5").exists()
    assert (tmp_path / "clip" / "frame_0.png").stat().st_size > 8  # untouched
