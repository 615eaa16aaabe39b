"""Resize-then-centre-crop and crop-with-offset, against hand computations."""

import json

import numpy as np
import pytest
from PIL import Image

from prednet_keras.data import DataError, FrameTransform, detect_scene_cuts, parse_size, resize_crop_geometry
from tests.data.data_builders import numbered_frames, panning_scenes


@pytest.mark.parametrize(
    "source, size, expected",
    [
        # KITTI, as process_kitti.py: height 375 -> 128, width round(1242 * 128 / 375) = 424,
        # crop from int((424 - 160) / 2) = 132.
        ((375, 1242), (128, 160), ((128, 424), (0, 132))),
        # bikes.mp4: 272x640 -> 128 x round(640 * 128 / 272) = 301, left (301 - 160) // 2 = 70.
        ((272, 640), (128, 160), ((128, 301), (0, 70))),
        # carphone (QCIF): narrower than 160/128, so width decides: 160 / 176 scales 144 to 131.
        ((144, 176), (128, 160), ((131, 160), (1, 0))),
        # Already the right size: nothing moves.
        ((128, 160), (128, 160), ((128, 160), (0, 0))),
    ],
)
def test_resize_crop_geometry(source, size, expected):
    assert resize_crop_geometry(*source, size) == expected


def test_resize_crop_pixels_by_hand():
    # 4x8 to 2x2: scale 0.5 gives 2x4 (area filter = means of 2x2 blocks), then
    # the middle two columns (left = (4 - 2) // 2 = 1) are kept.
    frame = np.zeros((4, 8, 1), np.uint8)
    frame[..., 0] = np.repeat(np.repeat(np.array([[4, 8, 12, 16], [20, 24, 28, 32]]), 2, 0), 2, 1)
    frame[0, 2, 0], frame[1, 3, 0] = 6, 10  # block (0, 1): (6 + 8 + 8 + 10) / 4 = 8
    out = FrameTransform((2, 2), interpolation="area")(frame)
    np.testing.assert_array_equal(out[..., 0], [[8, 12], [24, 28]])


def test_bilinear_is_pil_bilinear_then_centre_crop():
    # The original resized with scipy.misc.imresize, i.e. PIL's bilinear filter.
    frame = numbered_frames(1, height=30, width=80)[0]
    expected = np.asarray(Image.fromarray(frame).resize((40, 15), Image.BILINEAR))[:, 12:28]
    np.testing.assert_array_equal(FrameTransform((15, 16))(frame), expected)


def test_crop_with_offset_from_centre():
    frame = numbered_frames(1, height=6, width=8)[0]
    # top = 1 + (6 - 2) // 2 = 3, left = -1 + (8 - 4) // 2 = 1 (Chainer's --offset -1,1 as x,y).
    out = FrameTransform((2, 4), mode="crop", offset=(1, -1))(frame)
    np.testing.assert_array_equal(out, frame[3:5, 1:5])
    np.testing.assert_array_equal(FrameTransform((2, 4), mode="crop")(frame), frame[2:4, 2:6])


def test_crop_outside_the_frame_names_it():
    frame = numbered_frames(1, height=6, width=8)[0]
    with pytest.raises(DataError, match=r"clip/f1\.png: a 2x4 crop at offset 3,0 .* 6x8 frame"):
        FrameTransform((2, 4), mode="crop", offset=(3, 0))(frame, "clip/f1.png")


def test_sizes_parse():
    assert parse_size("128x160") == (128, 160)
    assert parse_size("120,160") == (120, 160)
    assert parse_size((64, 80)) == (64, 80)
    for bad in ("128", "ax160", "0x10", "1x2x3"):
        with pytest.raises(DataError):
            parse_size(bad)


def test_scene_cuts_found_where_scenes_change():
    frames = panning_scenes([12, 9, 14])
    assert detect_scene_cuts(frames) == [12, 21]


def test_scene_cut_settings_take_numpy_numbers_and_refuse_bools():
    from prednet_keras.data.scenes import SceneTracker

    tracker = SceneTracker(threshold=np.float32(0.1), ratio=np.float32(3.0))
    for frame in panning_scenes([12, 9, 14]):
        tracker.add("clip", frame)
    assert tracker.cuts("clip") == [12, 21]
    assert json.loads(json.dumps(tracker.config())) == {"threshold": 0.10000000149011612, "ratio": 3.0, "window": 8}
    with pytest.raises(DataError, match="got True"):
        SceneTracker(threshold=True)


def test_no_cuts_in_one_noisy_panning_shot():
    frames = panning_scenes([30]).astype(int)
    noise = np.random.default_rng(1).integers(-8, 9, frames.shape)
    assert detect_scene_cuts(np.clip(frames + noise, 0, 255).astype(np.uint8)) == []
