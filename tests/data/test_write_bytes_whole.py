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
