"""The Chainer PredNet's training protocol: main.py's windows, logged values, state reset, presets."""

import numpy as np
import pytest

import keras
from prednet_keras.models.chainer_protocol import ChainerPredNetTrainer, plan_windows, train_chainer_prednet
from prednet_keras.formats.chainer import save_chainer_npz
from prednet_keras.models.protocols import (
    PRESETS,
    ChainerProtocol,
    chainer_adam,
    protocol_metric,
    protocol_preset,
)

from tests.study_models import numpy_chainer as ref


def main_py_updates(lengths, period, bprop):
    """main.py's training loop with the model calls taken out: (sequence, i, count) per update."""
    updates = []
    count = 0
    seq = 0
    while count < period:
        for i in range(1, lengths[seq]):
            if (i + 1) % bprop == 0:
                updates.append((seq, i, count))
            count += 1
            if count >= period:
                break
        seq = (seq + 1) % len(lengths)
    return updates


def test_paper_preset_is_the_study():
    paper = protocol_preset("prednet-chainer", "paper")
    assert (paper.period, paper.bprop, paper.metric_updates) == (5000, 20, 50)
    assert (paper.lr, paper.beta_1, paper.beta_2, paper.epsilon) == (1e-3, 0.9, 0.999, 1e-8)
    ae = protocol_preset("autoencoder", "paper")
    assert (ae.metric_images, ae.epsilon) == (1000, 1e-8)
    assert set(PRESETS["prednet-chainer"]) == set(PRESETS["autoencoder"]) == {"paper", "quick"}
    with pytest.raises(ValueError, match="Unknown protocol 'fast'"):
        protocol_preset("autoencoder", "fast")
    with pytest.raises(ValueError, match="positive integer"):
        ChainerProtocol(bprop=0)
    adam = chainer_adam()
    assert adam.epsilon == 1e-8 and keras.optimizers.Adam().epsilon == 1e-7


def test_5000_frames_make_250_updates():
    windows, frames = plan_windows([6000], 5000, 20)
    assert frames == 5000 and len(windows) == 250
    assert [w.steps for w in windows] == [19] + [20] * 249
    assert windows[0].frame_slice == slice(0, 20) and windows[0].starts_sequence
    assert windows[1].frame_slice == slice(19, 40) and not windows[1].starts_sequence
    assert windows[-1].last_step == 4999 and windows[-1].frames_before == 4998
    # The last 50 logged values cover the last 1000 frames.
    assert sum(w.steps for w in windows[-50:]) == 1000


@pytest.mark.parametrize("lengths, period, bprop", [
    ([30, 46, 61, 55, 8], 5000, 20),  # the embedded video's scenes
    ([21, 20, 19, 40, 2], 333, 20),
    ([9, 7], 31, 4),
    ([5], 12, 1),
])
def test_windows_are_main_py_updates(lengths, period, bprop):
    windows, frames = plan_windows(lengths, period, bprop)
    assert frames == period
    assert [(w.sequence, w.last_step, w.frames_before) for w in windows] == main_py_updates(lengths, period, bprop)
    for previous, window in zip(windows, windows[1:]):
        if window.sequence == previous.sequence and not window.starts_sequence:
            assert window.first_step == previous.last_step + 1
    trained = sum(w.steps for w in windows)
    assert trained < frames or bprop == 1  # frames after a sequence's last update are never trained on


def test_bad_sequences():
    with pytest.raises(ValueError, match="single frame"):
        plan_windows([1, 1], 10, 3)
    with pytest.raises(ValueError, match="empty"):
        plan_windows([5, 0], 10, 3)
    with pytest.raises(ValueError, match="No update would happen"):
        train_chainer_prednet([np.zeros((5, 8, 8, 3), "float32")], model_config={"stack_sizes": (3, 4)}, protocol="quick")
    with pytest.raises(ValueError, match="one size"):
        train_chainer_prednet([np.zeros((5, 8, 8, 3)), np.zeros((5, 8, 16, 3))], protocol="quick")


def test_protocol_metric():
    metric = protocol_metric(list(range(100)), 50, "updates")
    assert metric["value"] == np.mean(range(50, 100)) and metric["count"] == 50
    assert metric["name"] == "mean_last_50_updates"
    assert protocol_metric([1.0, 3.0], 50, "updates")["count"] == 2


@pytest.mark.parametrize("unroll", [False, True], ids=["rolled", "unrolled"])
def test_logged_values_carry_state_and_reset_per_sequence(unroll, tmp_path):
    """Weights held still (SGD, lr 0): each logged value is the MSE of the window's last frame,
    computed by NumPy from the sequence's start (state carried over the windows before it,
    reset at each sequence); a cycle through the sequences repeats the same values. The window's
    time loop rolled or unrolled (padded first windows included) computes the same equations."""
    rng = np.random.default_rng(2)
    sequences = [(rng.random((n, 8, 8, 3)) * 255).astype(np.uint8) for n in (9, 7)]
    records = []
    result = train_chainer_prednet(
        sequences,
        model_config=dict(stack_sizes=(3, 4)),
        protocol=ChainerProtocol("t", period=31, bprop=4, metric_updates=3),
        optimizer=keras.optimizers.SGD(learning_rate=0.0), on_update=records.append, seed=4, unroll=unroll,
    )
    assert result.summary["unroll"] is unroll
    assert result.records == records and len(records) == 7
    assert [(r["sequence"], r["frame"], r["frames_seen"], r["steps"]) for r in records] == [
        (0, 3, 3, 3), (0, 7, 7, 4), (1, 3, 11, 3), (0, 3, 17, 3), (0, 7, 21, 4), (1, 3, 25, 3), (0, 3, 31, 3)]
    assert result.summary["frames_seen"] == 31 and result.summary["frames_trained"] == 23
    assert result.metric["value"] == pytest.approx(np.mean([r["loss"] for r in records[-3:]]))

    save_chainer_npz(result.model, tmp_path / "w.npz")
    with np.load(tmp_path / "w.npz") as saved:
        w = {k[len("predictor/"):]: saved[k].astype(np.float64) for k in saved.files}
    for record in records:
        frames = sequences[record["sequence"]].astype(np.float64) / 255
        state = ref.zero_state((3, 4), (3, 4), 8, 8)
        window_loss = 0.0
        for t in range(record["frame"]):
            state, _ = ref.step(frames[t].transpose(2, 0, 1), state, w)
            if t >= record["frame"] - record["steps"]:
                window_loss += ref.mse(state[2][0], frames[t + 1].transpose(2, 0, 1))
        last = ref.mse(state[2][0], frames[record["frame"]].transpose(2, 0, 1))
        assert record["loss"] == pytest.approx(last, rel=1e-5)
        assert record["window_loss"] == pytest.approx(window_loss, rel=1e-5)
    assert [r["loss"] for r in records[3:6]] == [r["loss"] for r in records[:3]]


@pytest.mark.slow  # two compilations of the window; the fast loop checks both forms against NumPy above
def test_unrolled_window_trains_as_the_rolled_one():
    """Adam on, three windows (the first padded): unrolling the window's time loop changes how it is compiled,
    not what is trained; losses and weights agree to float32 round-off."""
    video = moving_bars(12, size=8)
    protocol = ChainerProtocol("t", period=11, bprop=4, metric_updates=2)
    results = {unroll: train_chainer_prednet([video], model_config=dict(stack_sizes=(3, 4)), protocol=protocol,
                                             seed=3, unroll=unroll) for unroll in (False, True)}
    rolled, unrolled = results[False], results[True]
    assert len(rolled.records) == len(unrolled.records) == 3
    for a, b in zip(rolled.records, unrolled.records):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
        assert b["window_loss"] == pytest.approx(a["window_loss"], rel=1e-5)
    assert rolled.records[-1]["loss"] != rolled.records[0]["loss"]  # the weights did change
    for a, b in zip(rolled.model.get_weights(), unrolled.model.get_weights()):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)


def moving_bars(count, size=8, seed=0):
    """A learnable video: vertical bars drifting one pixel per frame."""
    x = np.arange(size)
    rows = [0.5 + 0.5 * np.sin(2 * np.pi * (x - t) / size) for t in range(count)]
    frames = [np.tile(row[None, :, None], (size, 1, 3)) for row in rows]
    return (np.stack(frames) * 255).astype(np.uint8)


def test_paper_protocol_on_a_tiny_model(tmp_path):
    """The paper preset end to end on a tiny model (one layer, 4x4 frames): 5000 frames -> 250
    updates, the metric over the last 50 logged values, a lower loss at the end, a prediction
    model that saves and loads."""
    video = moving_bars(5001, size=4)
    result = train_chainer_prednet([video], model_config=dict(stack_sizes=(3,)), protocol="paper", seed=1)
    assert len(result.records) == 250 and result.summary["updates"] == 250
    assert result.summary["frames_seen"] == 5000 and result.summary["frames_trained"] == 4999
    assert [r["frame"] for r in result.records[:2]] == [19, 39] and result.records[-1]["frame"] == 4999
    assert result.metric["name"] == "mean_last_50_updates" and result.metric["count"] == 50
    assert result.metric["value"] == pytest.approx(np.mean(result.logged[-50:]))
    assert result.metric["value"] < 0.5 * np.mean(result.logged[:10])
    assert result.summary["initial_weights"]["from"] == "seed"

    path = tmp_path / "model.keras"
    result.model.save(path)
    loaded = keras.saving.load_model(path)
    frames = video[:6][np.newaxis].astype("float32") / 255
    np.testing.assert_allclose(loaded.predict(frames, verbose=0), result.model.predict(frames, verbose=0), atol=1e-6)


def test_trainer_input_checks():
    trainer = ChainerPredNetTrainer((8, 8, 3), dict(stack_sizes=(3, 4)), bprop=4, run_eagerly=True)
    with pytest.raises(ValueError, match="Only the first window"):
        trainer.window_inputs(np.zeros((4, 8, 8, 3)), starts_sequence=False)
    with pytest.raises(ValueError, match="1 to 4 steps"):
        trainer.window_inputs(np.zeros((6, 8, 8, 3)), starts_sequence=False)
    with pytest.raises(ValueError, match="the model is for"):
        trainer.window_inputs(np.zeros((5, 8, 16, 3)), starts_sequence=True)
    inputs = trainer.window_inputs(np.ones((4, 8, 8, 3)), starts_sequence=True)
    assert inputs["frames"].shape == (1, 5, 8, 8, 3) and inputs["valid"].tolist() == [[0, 1, 1, 1]]
    assert inputs["frames"][0, 0].max() == 0 and inputs["reset"].tolist() == [[1.0]]


def test_sequences_from_a_frame_dataset():
    """A FrameDataset's source runs are main.py's sequences: none crosses a scene cut."""
    from prednet_keras.data import FrameDataset
    from prednet_keras.models.chainer_protocol import chainer_sequences

    frames = np.arange(10 * 4 * 4 * 3, dtype=np.uint32).reshape(10, 4, 4, 3).astype(np.uint8)
    dataset = FrameDataset(frames, sources=["a"] * 4 + ["b"] * 6)
    sequences = chainer_sequences(dataset)
    assert [len(s) for s in sequences] == [4, 6]
    window = plan_windows([4, 6], 9, 3)[0][-1]
    assert window.sequence == 1 and window.frame_slice == slice(2, 6)
    np.testing.assert_array_equal(sequences[1].read(window.frame_slice), frames[6:10].astype(np.float32) / 255)


def test_heldout_errors_are_the_numpy_next_frame_errors(tmp_path):
    """The held-out score of a trained model: per sequence, from the zero state, the mean over its T-1
    predictions of the per-frame MSE against the next frame, as the NumPy equations compute it."""
    from prednet_keras.models.chainer_protocol import heldout_errors

    rng = np.random.default_rng(5)
    train = [(rng.random((9, 8, 8, 3)) * 255).astype(np.uint8)]
    heldout = [(rng.random((n, 8, 8, 3)) * 255).astype(np.uint8) for n in (6, 2)]
    result = train_chainer_prednet(train, model_config=dict(stack_sizes=(3, 4)),
                                   protocol=ChainerProtocol("t", period=8, bprop=4, metric_updates=1), seed=1)
    errors, predictions = heldout_errors(result.model, heldout)
    assert [p.shape for p in predictions] == [(5, 8, 8, 3), (1, 8, 8, 3)]

    save_chainer_npz(result.model, tmp_path / "w.npz")
    with np.load(tmp_path / "w.npz") as saved:
        w = {k[len("predictor/"):]: saved[k].astype(np.float64) for k in saved.files}
    for frames, error in zip(heldout, errors):
        frames = frames.astype(np.float64) / 255
        state = ref.zero_state((3, 4), (3, 4), 8, 8)
        expected = []
        for t in range(len(frames) - 1):
            state, _ = ref.step(frames[t].transpose(2, 0, 1), state, w)
            expected.append(ref.mse(state[2][0], frames[t + 1].transpose(2, 0, 1)))
        assert error == pytest.approx(np.mean(expected), rel=1e-5)


def test_heldout_errors_refuse_what_cannot_be_scored():
    from prednet_keras.models.chainer_protocol import heldout_errors

    class Broken:
        def predict_on_batch(self, frames):
            return np.full(frames.shape, np.nan, np.float32)

    with pytest.raises(ValueError, match="sequence 0: the model predicts NaN or inf"):
        heldout_errors(Broken(), [np.zeros((3, 8, 8, 3), np.uint8)])
    with pytest.raises(ValueError, match=r"sequence 0 has 1 frame\(s\)"):
        heldout_errors(Broken(), [np.zeros((1, 8, 8, 3), np.uint8), np.zeros((3, 8, 8, 3), np.uint8)])
