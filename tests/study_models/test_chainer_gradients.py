"""The training step's gradients against finite differences of an independently written NumPy loss.

Two windows of one sequence (bprop 3: a first window of 2 steps, padded in front,
then one of 3 steps), weights unchanged in between (the gradients are recorded,
not applied), so the losses below are functions of the weights alone:

- clean:    window 2's loss with the state carried from window 1 held constant;
- chainer:  the same, except that the upper predictions p_l (l >= 1) carried from
            window 1 are recomputed from the weights, p_l = relu(ConvP_l(h_l)) with
            h_l constant: the graph of p_l survives into the next window, as in Chainer;
- aliasing: every step's MSE is taken against the window's last frame.
"""

import numpy as np
import pytest

from prednet_keras.models.chainer_protocol import ChainerPredNetTrainer

from tests.study_models import numpy_chainer as ref
from tests.study_models.helpers import GradientRecorder, chainer_layout_gradients

STACK, R_STACK, FRAME, BPROP = (2, 3, 4), (3, 3, 5), (8, 12), 3
EPS = 1e-6


@pytest.fixture(scope="module")
def setting():
    rng = np.random.default_rng(5)
    w = ref.random_weights(STACK, R_STACK, 3, FRAME[0], FRAME[1], rng)
    frames = rng.random((2 * BPROP,) + FRAME + (STACK[0],)).astype("float32")
    return w, frames


@pytest.fixture(scope="module")
def recorded(setting):
    """(mode, aliasing) -> (logged, [window-1 gradients, window-2 gradients]), computed once."""
    cache = {}

    def get(mode, aliasing):
        if (mode, aliasing) not in cache:
            cache[mode, aliasing] = keras_gradients(mode, aliasing, *setting)
        return cache[mode, aliasing]

    return get


def keras_gradients(mode, aliasing, w, frames):
    recorder = GradientRecorder()
    trainer = ChainerPredNetTrainer(
        FRAME + (STACK[0],), dict(stack_sizes=STACK, R_stack_sizes=R_STACK), bprop=BPROP,
        tbptt=mode, emulate_cpu_aliasing=aliasing, optimizer=recorder, run_eagerly=True,
    )
    ref.assign_to_layer(trainer.layer, w)
    logged = []
    grads = []
    for window, first in ((frames[0:BPROP], True), (frames[BPROP - 1 : 2 * BPROP], False)):
        logged.append(trainer.update(window, first))
        grads.append(chainer_layout_gradients(trainer.layer, recorder.gradients()))
    return logged, grads


def window_loss(w, frames, state, aliasing):
    """Sum over the window's steps of MSE(p_0, next frame) (or the last frame, aliased)."""
    total = 0.0
    chw = [f.transpose(2, 0, 1).astype(np.float64) for f in frames]
    for t in range(len(frames) - 1):
        state, _ = ref.step(chw[t], state, w)
        total += ref.mse(state[2][0], chw[-1] if aliasing else chw[t + 1])
    return total


def numpy_losses(w, frames, mode, aliasing):
    """(window-1 loss, window-2 loss) as functions of the weights (dicts of float64 arrays)."""
    base = {k: v.astype(np.float64) for k, v in w.items()}
    zero = ref.zero_state(STACK, R_STACK, *FRAME)
    first = frames[0:BPROP]
    second = frames[BPROP - 1 : 2 * BPROP]

    # The state window 1 leaves, computed once with the unperturbed weights.
    state = zero
    for t in range(BPROP - 1):
        state, _ = ref.step(first[t].transpose(2, 0, 1).astype(np.float64), state, base)

    def loss1(weights):
        return window_loss(weights, first, zero, aliasing)

    def loss2(weights):
        h, c, p = state
        if mode == "chainer":
            p = [p[0]] + [ref.relu(ref.conv(h[l], weights[f"ConvP{l}/W"], weights[f"ConvP{l}/b"]))
                          for l in range(1, len(p))]
        return window_loss(weights, second, (h, c, p), aliasing)

    return base, loss1, loss2


def directional_check(loss, base, grads, rng, label):
    """For every weight array: the gradient along a random unit direction vs a central difference."""
    failures = []
    for key in sorted(base):
        direction = rng.standard_normal(base[key].shape)
        direction /= np.linalg.norm(direction)
        plus = dict(base, **{key: base[key] + EPS * direction})
        minus = dict(base, **{key: base[key] - EPS * direction})
        numeric = (loss(plus) - loss(minus)) / (2 * EPS)
        analytic = float(np.sum(grads[key].astype(np.float64) * direction))
        if abs(numeric - analytic) > 2e-5 + 2e-3 * abs(numeric):
            failures.append(f"{label} {key}: finite difference {numeric:.6g}, gradient {analytic:.6g}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    "mode, aliasing", [("clean", False), ("chainer", False), ("chainer", True), ("clean", True)]
)
def test_gradients_match_finite_differences(setting, recorded, mode, aliasing):
    w, frames = setting
    logged, grads = recorded(mode, aliasing)
    base, loss1, loss2 = numpy_losses(w, frames, mode, aliasing)
    rng = np.random.default_rng(0)
    directional_check(loss1, base, grads[0], rng, "window 1")
    directional_check(loss2, base, grads[1], rng, "window 2")
    # The logged values are the true MSEs of each window's last frame, in every mode.
    chw = [f.transpose(2, 0, 1).astype(np.float64) for f in frames]
    state = ref.zero_state(STACK, R_STACK, *FRAME)
    true_last = []
    for t in range(2 * BPROP - 1):
        state, _ = ref.step(chw[t], state, base)
        if t + 1 in (BPROP - 1, 2 * BPROP - 1):
            true_last.append(ref.mse(state[2][0], chw[t + 1]))
    np.testing.assert_allclose([m for m, _ in logged], true_last, rtol=1e-5)


def test_the_modes_differ_where_they_should(recorded):
    """chainer vs clean: window 1 alike; in window 2 only ConvP_l (l >= 1) differ, and by a lot.
    Aliasing changes the gradients of every layer."""
    clean = recorded("clean", False)[1]
    chainer = recorded("chainer", False)[1]
    aliased = recorded("clean", True)[1][1]
    quirk = {f"ConvP{l}/{p}" for l in range(1, len(STACK)) for p in "Wb"}
    for key in clean[1]:
        np.testing.assert_array_equal(chainer[0][key], clean[0][key])
        difference = np.abs(chainer[1][key] - clean[1][key]).max()
        if key in quirk:
            assert difference > 0.2 * np.abs(clean[1][key]).max(), key
        else:
            assert difference == 0.0, key
    clean = clean[1]
    assert np.abs(aliased["ConvP0/W"] - clean["ConvP0/W"]).max() > 1e-4
    assert np.abs(aliased["ConvA1/W"] - clean["ConvA1/W"]).max() > 1e-5
