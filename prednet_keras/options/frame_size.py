"""The frame sizes a PredNet of N layers takes: each layer halves the frame.

Its own module, without a framework, so that options (a study spec's [train])
can be checked without importing Keras.
"""

__all__ = ["check_frame_size"]


def check_frame_size(height, width, nb_layers):
    """Raises a clear error unless H and W are divisible by 2**(nb_layers-1)."""
    factor = 2 ** (nb_layers - 1)
    bad = [f"{n}={v}" for n, v in (("H", height), ("W", width)) if v is not None and v % factor]
    if bad:
        suggestion = ", ".join(
            f"{n}={v - v % factor} or {v - v % factor + factor}"
            for n, v in (("H", height), ("W", width))
            if v is not None and v % factor
        )
        raise ValueError(
            f"Frame size {height}x{width} (H x W) does not suit a {nb_layers}-layer PredNet: "
            f"{', '.join(bad)} not divisible by 2**{nb_layers - 1} = {factor}, because each layer "
            f"halves the frame. Resize or crop the frames (e.g. {suggestion})."
        )
