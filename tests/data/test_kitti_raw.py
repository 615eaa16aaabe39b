"""prednet-data kitti --raw: a folder of raw drives in KITTI's layout prepared as process_kitti.py prepared it
(camera image_03, 128 rows keeping the aspect then the middle 160 columns, bilinear; its categories and its
held-out recordings), found afterwards by name."""

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from prednet_keras.cli.data import main as data_main
from prednet_keras.data import kitti, open_dataset
from prednet_keras.data.kitti_raw import find_drives, split_drives
from tests.kitti_files import RAW_DRIVES, write_raw_drives


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    return kitti.kitti_folder(raw=True)


def process_im(frame, size=(128, 160)):
    """process_kitti.py's process_im, written out: scale to 128 rows (width rounded), crop the middle."""
    width = int(np.round(size[0] / frame.shape[0] * frame.shape[1]))
    scaled = np.asarray(Image.fromarray(frame).resize((width, size[0]), Image.BILINEAR))
    left = int((width - size[1]) / 2)
    return scaled[:, left:left + size[1]]


def prepare(raw):
    return CliRunner().invoke(data_main, ["kitti", "--raw", str(raw), "-q"], catch_exceptions=False)


def test_raw_drives_prepared_as_process_kitti_did(tmp_path, cache):
    frames = write_raw_drives(tmp_path / "raw")
    result = prepare(tmp_path / "raw")
    assert result.exit_code == 0, result.output
    assert "(left out, as process_kitti.py did: campus)" in result.output
    assert "train 6 frames (2 recordings" in result.output and "prednet-train --data kitti-raw" in result.output
    expected = {"train": ["city-2011_09_26_drive_0001_sync", "residential-2011_09_26_drive_0019_sync"],
                "val": ["city-2011_09_26_drive_0005_sync"],
                "test": ["city-2011_09_26_drive_0104_sync", "residential-2011_09_26_drive_0079_sync",
                         "road-2011_09_26_drive_0070_sync"]}
    for split, recordings in expected.items():
        data = open_dataset(cache / f"kitti_{split}.h5")
        assert [run[0] for run in data.source_runs()] == recordings
        drives = [name.split("-", 1)[1] for name in recordings]
        want = np.stack([process_im(frame) for drive in drives for frame in frames[drive]])
        np.testing.assert_array_equal(data.frames, want)  # image_03 only, in file-name order, resized as there
    # Checksums recorded, and the files found by name (kitti: the authors' files are not there).
    assert kitti.resolve_data("kitti-raw", "val") == str(cache / "kitti_val.h5")
    assert kitti.training_data("kitti", None) == (str(cache / "kitti_train.h5"), str(cache / "kitti_val.h5"))
    assert kitti.name_of(cache / "kitti_test.h5") == "kitti-raw"
    again = prepare(tmp_path / "raw")
    assert again.exit_code == 1 and "already prepared; not overwritten (pass --overwrite" in again.output


def test_kittis_own_layout_uses_every_drive(tmp_path):
    write_raw_drives(tmp_path / "raw", frames=1, by_category=False)
    drives, notes = find_drives(tmp_path / "raw")
    assert "every drive found is used" in notes[0]
    splits = split_drives(drives)
    # The held-out drives' categories are known; the others' are not, and all of them train.
    assert [d.source for d in splits["test"]] == ["city-2011_09_26_drive_0104_sync",
                                                   "residential-2011_09_26_drive_0079_sync",
                                                   "road-2011_09_26_drive_0070_sync"]
    assert sorted(d.source for d in splits["train"]) == ["2011_09_26_drive_0001_sync", "2011_09_26_drive_0019_sync",
                                                         "2011_09_28_drive_0016_sync"]


def test_a_missing_held_out_recording_or_no_drive_is_refused(tmp_path, cache):
    drives = {category: tuple(d for d in names if d != "2011_09_26_drive_0079_sync")
              for category, names in RAW_DRIVES.items()}
    write_raw_drives(tmp_path / "raw", frames=1, drives=drives)
    result = prepare(tmp_path / "raw")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip().splitlines()[-1] == (
        "Error: the raw drives lack 2011_09_26_drive_0079_sync, which process_kitti.py holds out for validation "
        "and testing; download them too, so that the split is the authors'.")
    assert not cache.exists() or not list(cache.glob("*.h5"))
    (tmp_path / "empty").mkdir()
    result = prepare(tmp_path / "empty")
    assert result.exit_code == 1 and "no KITTI raw drive found" in result.output.strip().splitlines()[-1]
