"""prednet-data prepare's progress bar ends on the frames read, not on the containers' estimate."""

from prednet_keras.data.prepare import _Bar


def test_a_finished_bar_shows_the_frames_read_not_the_estimate(capsys):
    # A video's container estimated 456 frames and 455 were decoded: the bar
    # must not end at "455/456 frames", as if one had been lost.
    with _Bar(True, 456) as bar:
        bar.describe("clip.mp4")
        for _ in range(455):
            bar.advance()
    shown = capsys.readouterr().err
    assert "455/455 frames" in shown and "/456" not in shown
