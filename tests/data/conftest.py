"""Fixtures for the data tests (the builders are in data_builders.py)."""

import pytest

from tests.data.data_builders import numbered_frames, write_pngs


@pytest.fixture
def frames_folder(tmp_path):
    """A folder of 12 numbered PNG frames with unpadded names (frame_0 ... frame_11)."""
    frames = numbered_frames(12)
    write_pngs(tmp_path / "clip", frames)
    return tmp_path / "clip", frames
