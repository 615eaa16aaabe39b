"""What a run prints while it trains (session.display) and its loss plot never failing a run (session.history)."""

import re

import pytest

from prednet_keras import backends
from prednet_keras.session.history import draw_loss, update_rows
from prednet_keras.session.display import FirstStep, UpdateProgress, duration_text, is_terminal


def test_update_progress_lines(capsys):
    progress = UpdateProgress("autoencoder (dense)", total=10, every=4)
    progress.start()
    for number in range(1, 11):
        progress({"update": number, "loss": 1.0 / number})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Compiling the update step (done by the first update")
    assert re.fullmatch(r"  first update done in \d+\.\d s \(compilation included\)", lines[1])
    shown = [line for line in lines if ": loss " in line]
    # Every 4th update and the last; the time left on all but the last.
    assert [line.split(":")[0] for line in shown] == [
        "autoencoder (dense) update 4/10", "autoencoder (dense) update 8/10", "autoencoder (dense) update 10/10"]
    assert "loss 0.25 (" in shown[0] and "left)" in shown[0] and "left)" in shown[1] and "left" not in shown[2]
    assert len(lines) == 5


def test_first_step_says_once(capsys):
    step = FirstStep("validation step", "validation", "first validation")
    step.begin("\n")
    step.end()
    step.begin()
    step.end()
    out = capsys.readouterr().out
    assert out.count("Compiling the validation step (done by the first validation") == 1
    assert out.startswith("\nCompiling") and out.count("first validation done in") == 1


def test_eager_steps_are_not_announced(capsys):
    # An eager step (torch without torch.compile) compiles nothing: no "Compiling" line, no first-step time.
    step = FirstStep("training step", "training step", "first step", compiles=False)
    step.begin()
    step.end()
    progress = UpdateProgress("prednet-chainer", total=2, every=1, compiles=False)
    progress.start()
    progress({"update": 1, "loss": 0.5})
    progress({"update": 2, "loss": 0.25})
    lines = capsys.readouterr().out.splitlines()
    assert step.done and [line.split(":")[0] for line in lines] == [
        "prednet-chainer update 1/2", "prednet-chainer update 2/2"]


@pytest.mark.parametrize("backend, jit_compile, compiles", [
    ("tensorflow", False, True), ("tensorflow", "auto", True), ("jax", "auto", True), ("jax", False, False),
    ("torch", "auto", False), ("torch", False, False), ("torch", True, True)])
def test_which_steps_compile(backend, jit_compile, compiles):
    # As Keras' trainers do: tf.function traces every step; JAX jits and torch compiles only with jit_compile.
    assert backends.named(backend).steps_compile(jit_compile) is compiles


@pytest.mark.parametrize("seconds, text", [(4.25, "4.2 s"), (65, "1 min 05 s"), (3725, "1 h 02 min")])
def test_duration_text(seconds, text):
    assert duration_text(seconds) == text


def test_is_terminal_of_odd_streams(tmp_path):
    with open(tmp_path / "log", "w") as handle:
        assert not is_terminal(handle)
    closed = open(tmp_path / "log")
    closed.close()
    assert not is_terminal(closed) and not is_terminal(object())


def test_loss_plot_failure_is_a_warning(tmp_path, capsys):
    rows = update_rows([{"update": 1, "loss": 0.5}, {"update": 2, "loss": 0.25}])
    assert draw_loss(rows, tmp_path / "loss.png", title="run")
    assert (tmp_path / "loss.png").read_bytes()[:4] == b"\x89PNG"
    # A file where the folder should be (as a full disk, an OSError): a warning, no exception.
    (tmp_path / "not-a-folder").write_text("x")
    assert not draw_loss(rows, tmp_path / "not-a-folder" / "loss.png")
    assert "warning: loss.png not drawn (" in capsys.readouterr().out
    assert (tmp_path / "not-a-folder").read_text() == "x"
