"""Issue 39: an output folder that could not be written ended in a raw OSError traceback, in evaluation only after
the computing was done. Output folders are checked before the work starts."""

import os

import pytest

from prednet_keras.files.diskwrite import NotWritableError, require_writable_folder


def test_a_folder_under_a_file_or_a_read_only_folder_is_refused_before_anything_is_made(tmp_path, monkeypatch):
    require_writable_folder(tmp_path / "new" / "deeper")  # can be made: no complaint, nothing made yet
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "afile").write_text("x")
    with pytest.raises(NotWritableError, match=r"afile/eval cannot be made: .*afile is a file, not a folder\."):
        require_writable_folder(tmp_path / "afile" / "eval")
    # A read-only folder (root may write anywhere but a read-only mount: access(2) is what is asked).
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path) == str(tmp_path) else real_access(path, mode))
    with pytest.raises(NotWritableError, match=r"/out cannot be written: .* is read-only or not writable by this user\."):
        require_writable_folder(tmp_path / "out")
