"""Frame geometry: resize keeping the aspect ratio then centre-crop (the
original KITTI preparation), or crop only, at an offset from the centre (the
Chainer PredNet's). Frames stay uint8 here; scaling to [0, 1] happens per batch.
"""

import numpy as np
from PIL import Image

from prednet_keras.data.errors import DataError

MODES = ("resize_crop", "crop")

# The original used scipy.misc.imresize, which was PIL's bilinear filter.
_RESAMPLE = {
    "bilinear": Image.BILINEAR,
    "bicubic": Image.BICUBIC,
    "lanczos": Image.LANCZOS,
    "area": Image.BOX,
    "nearest": Image.NEAREST,
}
INTERPOLATIONS = tuple(_RESAMPLE)


def parse_size(text):
    """Parses "HxW" (also "H,W") into (H, W).

    Args:
        text: the size as a string, or already a pair of ints.

    Returns:
        (height, width) as ints.

    Raises:
        DataError: when it is not two positive integers.
    """
    if isinstance(text, (tuple, list)):
        parts = list(text)
    else:
        parts = str(text).lower().replace(",", "x").split("x")
    try:
        if len(parts) != 2:
            raise ValueError
        height, width = (int(p) for p in parts)
    except (TypeError, ValueError):
        raise DataError(f"size {text!r} is not HxW (for example 128x160)") from None
    if height <= 0 or width <= 0:
        raise DataError(f"size {text!r} must be positive")
    return height, width


def parse_offset(text):
    """Parses "DY,DX" into a pair of ints (negative allowed).

    Args:
        text: the offset as a string, or already a pair of ints.

    Returns:
        (dy, dx) as ints.
    """
    if isinstance(text, (tuple, list)):
        parts = list(text)
    else:
        parts = str(text).split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        return tuple(int(p) for p in parts)
    except (TypeError, ValueError):
        raise DataError(f"offset {text!r} is not DY,DX (for example 0,-12)") from None


def resize_crop_geometry(height, width, size):
    """Where a frame goes in resize_crop mode.

    The frame is scaled by the larger of the two ratios, so that it covers the
    target, then the middle is cut out. For wide frames (KITTI 375x1242 to
    128x160) this is exactly the original's process_im: scale to the target
    height, round the width, and crop from int((width' - W) / 2).

    Args:
        height: source frame height.
        width: source frame width.
        size: target (H, W).

    Returns:
        ((scaled_h, scaled_w), (top, left)).
    """
    target_h, target_w = size
    scale = max(target_h / height, target_w / width)
    scaled_h = max(target_h, int(np.round(height * scale)))
    scaled_w = max(target_w, int(np.round(width * scale)))
    return (scaled_h, scaled_w), ((scaled_h - target_h) // 2, (scaled_w - target_w) // 2)


def _resize(frame, scaled, interpolation):
    scaled_h, scaled_w = scaled
    if frame.shape[:2] == (scaled_h, scaled_w):
        return frame
    resample = _RESAMPLE[interpolation]
    if frame.shape[2] in (1, 3):
        image = Image.fromarray(frame[..., 0] if frame.shape[2] == 1 else frame)
        out = np.asarray(image.resize((scaled_w, scaled_h), resample))
        return out.reshape(scaled_h, scaled_w, frame.shape[2])
    # PIL has no mode for other channel counts: resize each channel alone.
    planes = [
        np.asarray(Image.fromarray(frame[..., c]).resize((scaled_w, scaled_h), resample))
        for c in range(frame.shape[2])
    ]
    return np.stack(planes, axis=-1)


class FrameTransform:
    """Brings frames of any size to one target size.

    Args:
        size: target (H, W), or None to keep frames as they are.
        mode: "resize_crop" (scale to cover, centre crop) or "crop" (cut
            a window of the target size; no scaling).
        offset: (dy, dx) shift of the crop window from the centre, in
            pixels of the scaled frame. The Chainer PredNet's
            `--offset x,y` is offset=(y, x) here.
        interpolation: "bilinear" (the original's), "bicubic", "lanczos",
            "area" or "nearest".
    """

    def __init__(self, size=None, mode="resize_crop", offset=None, interpolation="bilinear"):
        if mode not in MODES:
            raise DataError(f"mode {mode!r} is not one of {', '.join(MODES)}")
        if interpolation not in _RESAMPLE:
            raise DataError(
                f"interpolation {interpolation!r} is not one of {', '.join(_RESAMPLE)}"
            )
        self.size = None if size is None else parse_size(size)
        self.mode = mode
        self.offset = (0, 0) if offset is None else parse_offset(offset)
        self.interpolation = interpolation

    @property
    def identity(self):
        """True when frames pass through untouched (no size given)."""
        return self.size is None

    def is_noop(self, frame_shape):
        """True when frames of this (H, W, ...) shape would pass through unchanged."""
        if self.size is None:
            return True
        return tuple(frame_shape[:2]) == self.size and self.offset == (0, 0)

    def config(self):
        """The settings, for provenance records."""
        return {
            "size": None if self.size is None else list(self.size),
            "mode": self.mode,
            "offset": list(self.offset),
            "interpolation": self.interpolation,
        }

    def __call__(self, frame, where="frame"):
        """Transforms one (h, w, c) uint8 frame.

        Args:
            frame: the frame.
            where: a name for error messages (the file it came from).

        Returns:
            The (H, W, c) uint8 frame.
        """
        if self.size is None:
            return frame
        target_h, target_w = self.size
        height, width = frame.shape[:2]
        if self.mode == "resize_crop":
            scaled, (top, left) = resize_crop_geometry(height, width, self.size)
            frame = _resize(frame, scaled, self.interpolation)
            height, width = scaled
        else:
            top, left = (height - target_h) // 2, (width - target_w) // 2
        top += self.offset[0]
        left += self.offset[1]
        if top < 0 or left < 0 or top + target_h > height or left + target_w > width:
            raise DataError(
                f"{where}: a {target_h}x{target_w} crop at offset {self.offset[0]},{self.offset[1]} "
                f"from the centre does not fit in the {height}x{width} frame"
                + (" (after scaling)" if self.mode == "resize_crop" else "")
            )
        return frame[top : top + target_h, left : left + target_w]
