"""Charts: a run named in any script draws its loss curve without a screen of font warnings (issue 39), and the
file is a real PNG, written whole."""

import warnings

from PIL import Image

from prednet_keras.files.figures import new_figure, save_png
from prednet_keras.session.history import draw_loss

ROWS = [{"kind": "step", "epoch": 1, "step": s, "global_step": s, "loss": 1.0 / s, "val_loss": None} for s in (1, 2)]
ROWS += [{"kind": "epoch", "epoch": 1, "step": 2, "global_step": 2, "loss": 0.7, "val_loss": 0.8}]


def test_a_title_in_any_script_draws_without_warnings(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph's UserWarning would fail here
        draw_loss(ROWS, tmp_path / "loss.png", title="実験 تجربة प्रयोग run-1")
        figure = new_figure(3, 2)
        figure.subplots().set_title("ラン")
        save_png(figure, tmp_path / "palette.png", palette=True)
    with Image.open(tmp_path / "loss.png") as image:
        assert image.size == (700, 420)
    with Image.open(tmp_path / "palette.png") as image:
        assert image.mode == "P" and image.size == (300, 200)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loss.png", "palette.png"]  # no temporary left


def test_other_warnings_still_show(tmp_path):
    figure = new_figure(3, 2)
    axes = figure.subplots()
    axes.plot([1, 2], [1, 2], label="_hidden")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        axes.legend()  # "No artists with labels found": matplotlib's own warning, not silenced
        save_png(figure, tmp_path / "x.png")
    assert any("No artists with labels" in str(w.message) for w in caught)
