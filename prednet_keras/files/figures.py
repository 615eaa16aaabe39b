"""The PNG charts the project writes: matplotlib figures made without pyplot (no window, no global
figure state, safe in any process) and saved atomically. Matplotlib is imported only when a figure is made.

A title may hold a run's name in any script. DejaVu Sans, matplotlib's font, has no CJK, Arabic or
Devanagari glyphs, and matplotlib warns once per missing character at every draw: a screen of warnings for
one chart. The chart is written all the same (such characters drawn as boxes), so the warnings are dropped.
"""

import contextlib
import io
import warnings

__all__ = ["new_figure", "save_png"]

_MISSING_GLYPH = r"Glyph \d+ .* missing from (current )?font"


def new_figure(width, height, dpi=100):
    """A matplotlib Figure of `width` x `height` inches on the Agg canvas."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=dpi)


@contextlib.contextmanager
def _quiet_about_missing_glyphs():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_MISSING_GLYPH, category=UserWarning)
        yield


def save_png(figure, path, palette=False, tight=True):
    """Lays `figure` out and writes it to `path` as PNG, atomically (diskwrite.write_through_temporary).

    Args:
        tight: apply tight_layout first (False: the figure's own layout stands).
        palette: store a 256-colour palette PNG: a third of the size of matplotlib's RGBA one and the
            same to the eye for charts with few colours (the published reports keep theirs in git).
    """
    from prednet_keras.files.diskwrite import write_through_temporary

    def write(temporary):
        with _quiet_about_missing_glyphs():
            if tight:
                figure.tight_layout()
            if not palette:
                figure.savefig(temporary, format="png")
                return
            buffer = io.BytesIO()
            figure.savefig(buffer, format="png")
        from PIL import Image

        buffer.seek(0)
        with Image.open(buffer) as image:
            image.convert("RGB").quantize(256).save(temporary, format="PNG", optimize=True)

    write_through_temporary(path, write)
