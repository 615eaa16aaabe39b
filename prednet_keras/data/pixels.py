"""The rule for pixel values, the same at every door that takes arrays.

Frames are stored as uint8 (0-255) and scaled to [0, 1] per batch. Other
dtypes are accepted only where the conversion loses nothing the user meant:

  - uint8: as it is;
  - bool: False, True -> 0, 255;
  - integers: values 0-255;
  - floats: finite values in [0, 1] (PredNet's own scale), times 255, rounded.

NaN and inf are refused rather than converted: numpy casts NaN to 0, so a
frame with NaN pixels used to become (partly) black and training went on
with invented data. Floats in [0, 255] are refused too rather than guessed:
a dark frame on that scale cannot be told from a [0, 1] frame.
"""

import numpy as np

from prednet_keras.data.errors import DataError

RULE = "frames must be uint8 (0-255), integers in 0-255, or finite floats in [0, 1]"


def _refuse(where, problem):
    raise DataError(f"{where}: {problem}; {RULE}")


def _check_floats(array, where):
    finite = np.isfinite(array)
    if not finite.all():
        bad = array[~finite]
        kinds = [name for name, present in (("NaN", np.isnan(bad).any()), ("inf", np.isinf(bad).any())) if present]
        _refuse(where, f"{bad.size} {' and '.join(kinds)} value{'s' if bad.size != 1 else ''} (of {array.size})")
    low, high = float(array.min(initial=0.0)), float(array.max(initial=0.0))
    if low < 0.0 or high > 1.0:
        _refuse(where, f"float values outside [0, 1] (min {low:g}, max {high:g})")


def to_uint8(frame, where):
    """One frame (or any array of pixels) as uint8, by the rule above.

    Args:
        frame: the array.
        where: the file, the array or dataset in it, and the frame, for
            the error message.

    Raises:
        DataError: values the rule does not accept, naming `where`.
    """
    frame = np.asarray(frame)
    if frame.dtype == np.uint8:
        return frame
    if frame.dtype == bool:
        return frame.astype(np.uint8) * 255
    if np.issubdtype(frame.dtype, np.floating):
        _check_floats(frame, where)
        return np.rint(frame * 255.0).astype(np.uint8)
    if np.issubdtype(frame.dtype, np.integer):
        if frame.size and (frame.min() < 0 or frame.max() > 255):
            _refuse(where, f"{frame.dtype} values outside 0-255 (min {frame.min()}, max {frame.max()})")
        return frame.astype(np.uint8)
    _refuse(where, f"values of dtype {frame.dtype}")


def stack_to_uint8(array, where, item="frame"):
    """A whole stack (N, ...) as uint8; an error names the first bad item.

    For arrays already in memory (MNIST): checks everything at once, then
    converts.

    Args:
        array: the stack.
        where: the file and the array in it.
        item: what one entry along the first axis is called.
    """
    array = np.asarray(array)
    if array.dtype == np.uint8:
        return array
    try:
        return to_uint8(array, where)
    except DataError:
        # Find the first offending entry, so the message points at it.
        for index in range(len(array)):
            to_uint8(array[index], f"{where}, {item} {index}")
        raise
