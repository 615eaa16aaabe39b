"""data.write_bytes_whole: an output written whole or not at all, an existing one replaced only when asked."""

import pytest

from prednet_keras.data import DataError, write_bytes_whole


def test_written_whole_and_an_existing_file_kept_unless_overwrite(tmp_path):
    output = tmp_path / "out.bin"
    write_bytes_whole(output, b"first")
    assert output.read_bytes() == b"first"
    with pytest.raises(DataError, match="already exists; not overwritten"):
        write_bytes_whole(output, b"second")
    assert output.read_bytes() == b"first"
    write_bytes_whole(output, b"second", overwrite=True)
    assert output.read_bytes() == b"second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]  # no temporary file left


def test_a_missing_folder_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(DataError, match="output folder does not exist"):
        write_bytes_whole(tmp_path / "no-such-folder" / "out.bin", b"x")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(TypeError):
        write_bytes_whole(tmp_path / "out.bin", object())  # not bytes: the write fails
    assert list(tmp_path.iterdir()) == []


def test_write_xz_dataset_reads_back_the_same_frames_and_refuses_what_it_must(tmp_path):
    import lzma

    import numpy as np

    from prednet_keras import data

    frames = np.random.default_rng(1).integers(0, 256, size=(5, 6, 8, 3), dtype=np.uint8)
    dataset = data.FrameDataset(frames, ["a", "a", "b", "b", "b"], {"made": "here"})
    output = data.write_xz_dataset(tmp_path / "clips.h5.xz", dataset)
    with data.open_dataset(output) as written:
        assert data.dataset_checksum(written) == data.dataset_checksum(dataset)
        assert written.provenance == {"made": "here"}
    assert lzma.decompress(output.read_bytes())[:8] == b"\x89HDF\r\n\x1a\n"  # the whole file, xz over HDF5
    before = output.read_bytes()
    with pytest.raises(data.DataError, match="exists"):
        data.write_xz_dataset(output, dataset)
    assert output.read_bytes() == before
    with pytest.raises(data.DataError, match="writes NAME.h5.xz"):
        data.write_xz_dataset(tmp_path / "clips.xz", dataset)
