"""ChainerPredNet against the independent NumPy implementation, and its Keras behaviour."""

import numpy as np
import pytest

import keras
from prednet_keras.layers.chainer import ChainerPredNet

from tests.study_models import numpy_chainer as ref

ATOL = 2e-5

CONFIGS = {
    # name: (stack_sizes, R_stack_sizes, (H, W))
    "one_layer": ((3,), (4,), (6, 10)),
    "two_layers": ((3, 5), (4, 6), (8, 12)),
    "three_layers": ((1, 4, 6), (3, 5, 7), (8, 20)),
}


def case(name, steps=5, batch=2, seed=0):
    stack, R_stack, frame = CONFIGS[name]
    rng = np.random.default_rng(seed)
    w = ref.random_weights(stack, R_stack, 3, frame[0], frame[1], rng)
    frames = rng.random((batch, steps) + frame + (stack[0],)).astype("float32")
    return stack, R_stack, frame, w, frames


def make_layer(stack, R_stack, frame, w, batch=None, **kwargs):
    layer = ChainerPredNet(stack, R_stack_sizes=R_stack, return_sequences=True, **kwargs)
    layer.build((batch, None) + tuple(frame) + (stack[0],))
    ref.assign_to_layer(layer, w)
    return layer


def expected(frames, w, stack, R_stack, mode="prediction"):
    out = []
    for sequence in frames:
        predictions, aligned, errors, _ = ref.run(sequence, w, stack, R_stack)
        out.append({"prediction": predictions, "aligned_prediction": aligned, "error": errors}[mode])
    return np.stack(out)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("mode", ["prediction", "aligned_prediction", "error"])
def test_matches_numpy(name, mode):
    stack, R_stack, frame, w, frames = case(name)
    layer = make_layer(stack, R_stack, frame, w, output_mode=mode)
    got = keras.ops.convert_to_numpy(layer(frames))
    want = expected(frames, w, stack, R_stack, mode)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)


def test_reference_is_discriminating():
    """The comparison above could not pass by accident: outputs move, the upper layers matter,
    and the output gate reading the new cell (a plausible mistake) changes the prediction."""
    stack, R_stack, frame, w, frames = case("three_layers", batch=1)
    predictions, _, _, state = ref.run(frames[0], w, stack, R_stack)
    assert predictions.std() > 1e-2 and not np.allclose(predictions[2], predictions[3])
    assert all(np.abs(p).max() > 1e-3 for p in state[2][1:])
    wrong, _, _, _ = ref.run(frames[0], w, stack, R_stack, new_c_in_output_gate=True)
    assert np.abs(wrong - predictions).max() > 1e-3
    other = dict(w, **{"ConvLSTM2/h_i/b": w["ConvLSTM2/h_i/b"] + 1.0})
    moved, _, _, _ = ref.run(frames[0], other, stack, R_stack)
    assert np.abs(moved - predictions).max() > 1e-4


def test_state_carried_across_a_window_boundary():
    """Two calls chained through return_state/initial_state, and a stateful layer, give the
    NumPy run over all steps at once."""
    stack, R_stack, frame, w, frames = case("three_layers", steps=7)
    want = expected(frames, w, stack, R_stack)
    layer = make_layer(stack, R_stack, frame, w, return_state=True)
    first, *states = layer(frames[:, :3])
    second, *_ = layer(frames[:, 3:], initial_state=states)
    got = np.concatenate([keras.ops.convert_to_numpy(first), keras.ops.convert_to_numpy(second)], axis=1)
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)

    stateful = make_layer(stack, R_stack, frame, w, batch=2, stateful=True)
    parts = [keras.ops.convert_to_numpy(stateful(frames[:, a:b])) for a, b in ((0, 4), (4, 7))]
    np.testing.assert_allclose(np.concatenate(parts, axis=1), want, atol=ATOL, rtol=0)
    stateful.reset_state()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(stateful(frames[:, :4])), parts[0], atol=1e-6)


def test_state_shapes_and_order():
    stack, R_stack, frame, w, frames = case("three_layers", steps=2)
    layer = make_layer(stack, R_stack, frame, w, return_state=True)
    result = layer(frames)
    shapes = layer.compute_output_shape(frames.shape)
    assert [tuple(t.shape) for t in result] == [tuple(s) for s in shapes]
    _, _, _, state = ref.run(frames[0], w, stack, R_stack)
    flat = state[0] + state[1] + state[2]  # h, c, p per layer
    for tensor, want in zip(result[1:], flat):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(tensor)[0], want.transpose(1, 2, 0), atol=ATOL)


def test_frame_size_is_fixed_by_the_peepholes():
    stack, R_stack, frame, w, frames = case("two_layers")
    layer = make_layer(stack, R_stack, frame, w)
    with pytest.raises(ValueError, match=r"made for 8x12 frames .*per pixel.*cannot run on 8x16"):
        layer(np.zeros((1, 2, 8, 16, 3), "float32"))
    with pytest.raises(ValueError, match=r"made for 8x12 frames"):
        ChainerPredNet(stack, frame_size=(8, 12))(np.zeros((1, 2, 16, 12, 3), "float32"))
    with pytest.raises(ValueError, match=r"W=9 not divisible by 2\*\*1"):
        ChainerPredNet(stack)(np.zeros((1, 2, 8, 9, 3), "float32"))
    with pytest.raises(ValueError, match="needs the frame size"):
        ChainerPredNet(stack).build((None, None, None, None, 3))
    with pytest.raises(ValueError, match="1 channels but stack_sizes\\[0\\] is 3"):
        ChainerPredNet(stack)(np.zeros((1, 2, 8, 12, 1), "float32"))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(R_stack_sizes=(3,)), "len\\(R_stack_sizes\\) must be 2"),
        (dict(filter_size=4), "odd"),
        (dict(output_mode="next"), "Unknown output_mode"),
        (dict(frame_size=(8,)), "\\(H, W\\)"),
        (dict(stack_sizes=(3, 0)), "positive integers"),
    ],
)
def test_bad_arguments(kwargs, message):
    args = dict(stack_sizes=(3, 4))
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ChainerPredNet(**args)


def test_study_configuration():
    """The study's model: (3, 48, 96, 192), 3x3, 120x160 frames; parameters counted from the
    original's links (convs, biases of ConvA/ConvP/h_*, per-pixel peepholes)."""
    layer = ChainerPredNet()
    layer.build((1, None, 120, 160, 3))
    C = [3, 48, 96, 192]
    expected_count = 0
    for l in range(4):
        if l:
            expected_count += 9 * 2 * C[l - 1] * C[l] + C[l]
        expected_count += 9 * C[l] * C[l] + C[l]
        inputs = 2 * C[l] + (C[l + 1] if l < 3 else 0)
        expected_count += 4 * (9 * inputs * C[l] + 9 * C[l] * C[l] + C[l])
        expected_count += 3 * C[l] * (120 >> l) * (160 >> l)
    assert layer.count_params() == expected_count
    assert layer.frame_size == (120, 160) and layer.stack_sizes == C
    names = [sub.name for sub in layer.weight_layers]
    assert names[:4] == ["ConvP0", "ConvLSTM0_x_i0", "ConvLSTM0_x_i1", "ConvLSTM0_h_i"]
    assert "ConvA3" in names and "ConvLSTM3_x_i1" not in names and "ConvLSTM3_c_o" in names


def test_config_round_trip_and_keras_file(tmp_path):
    stack, R_stack, frame, w, frames = case("two_layers")
    layer = make_layer(stack, R_stack, frame, w, output_mode="aligned_prediction", name="study")
    config = layer.get_config()
    assert ChainerPredNet.from_config(config).get_config() == config
    for key, value in {"stack_sizes": [3, 5], "R_stack_sizes": [4, 6], "filter_size": 3, "frame_size": [8, 12],
                       "output_mode": "aligned_prediction", "return_sequences": True, "name": "study"}.items():
        assert config[key] == value, key
    inputs = keras.Input((None,) + frame + (3,))
    model = keras.Model(inputs, layer(inputs))
    path = tmp_path / "chainer.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded.predict(frames, verbose=0), model.predict(frames, verbose=0), atol=1e-6)
    want = expected(frames, w, stack, R_stack, "aligned_prediction")
    np.testing.assert_allclose(loaded.predict(frames, verbose=0), want, atol=ATOL)


def test_prediction_model_in_another_output_mode():
    """aligned_prediction is prediction shifted by one step (zeros first): output t vs frame t."""
    from prednet_keras.layers.chainer import chainer_prediction_model

    stack, R_stack, frame, w, frames = case("two_layers")
    inputs = keras.Input((None,) + frame + (3,))
    model = keras.Model(inputs, make_layer(stack, R_stack, frame, w)(inputs))
    aligned = chainer_prediction_model(model, nt=5)
    assert aligned.layers[-1].output_mode == "aligned_prediction" and aligned.inputs[0].shape[1] == 5
    nxt = keras.ops.convert_to_numpy(model(frames))
    got = keras.ops.convert_to_numpy(aligned(frames))
    np.testing.assert_array_equal(got[:, 0], 0.0)
    np.testing.assert_allclose(got[:, 1:], nxt[:, :-1], atol=1e-6)
