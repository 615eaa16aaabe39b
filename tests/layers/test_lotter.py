"""The PredNet layer against the independent NumPy implementation, and its Keras behaviour."""

import numpy as np
import pytest

import keras
import prednet_keras
from prednet_keras import PredNet, keras2_hard_sigmoid
from prednet_keras.models.lotter import count_parameters

from tests.layers.numpy_prednet import prednet_reference, random_weights

# Float32 round-off over a few recurrent steps of small convolutions.
ATOL = 2e-5

CONFIGS = {
    # name: (stack_sizes, R_stack_sizes, filter size, (H, W))
    "one_layer": ((3,), (4,), 3, (6, 10)),
    "two_layers": ((3, 5), (4, 6), 3, (8, 12)),
    "three_layers": ((1, 4, 6), (3, 5, 7), 3, (8, 20)),
    "five_by_five": ((2, 4), (3, 4), 5, (12, 8)),
}


def make_layer(stack, R_stack, filt, frame_hw, output_mode, weights, batch=None, **kwargs):
    L = len(stack)
    layer = PredNet(
        stack_sizes=stack,
        R_stack_sizes=R_stack,
        A_filt_sizes=[filt] * (L - 1),
        Ahat_filt_sizes=[filt] * L,
        R_filt_sizes=[filt] * L,
        output_mode=output_mode,
        return_sequences=True,
        **kwargs,
    )
    layer.build((batch, None) + tuple(frame_hw) + (stack[0],))
    set_named_weights(layer, weights)
    return layer


def set_named_weights(layer, weights):
    for conv in layer.cell.conv_layers:
        kernel, bias = weights[conv.name]
        conv.kernel.assign(kernel)
        conv.bias.assign(bias)


def case(name, seed=0, steps=4, batch=2):
    stack, R_stack, filt, frame_hw = CONFIGS[name]
    rng = np.random.default_rng(seed)
    weights = random_weights(stack, R_stack, filt, rng)
    frames = rng.random((batch, steps) + frame_hw + (stack[0],)).astype("float32")
    return stack, R_stack, filt, frame_hw, weights, frames


def layer_modes(L):
    return ["prediction", "error", "all"] + [f"{k}{l}" for l in range(L) for k in ("R", "E", "A", "Ahat")]


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("extrap", [None, 2])
def test_every_output_mode_matches_numpy(name, extrap):
    stack, R_stack, filt, frame_hw, weights, frames = case(name, steps=4)
    for mode in layer_modes(len(stack)):
        layer = make_layer(stack, R_stack, filt, frame_hw, mode, weights, extrap_start_time=extrap)
        got = keras.ops.convert_to_numpy(layer(frames))
        expected = prednet_reference(frames, weights, stack, R_stack, output_mode=mode, extrap_start_time=extrap)
        assert got.shape == expected.shape, mode
        np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0, err_msg=f"{name} {mode} extrap={extrap}")


@pytest.mark.parametrize("mode", ["prediction", "error", "all"])
@pytest.mark.parametrize("extrap", [None, 2])
def test_unrolled_time_loop_computes_the_same(mode, extrap):
    # prednet-train unrolls the loop by default for speed: the same operations per time step.
    stack, R_stack, filt, frame_hw, weights, frames = case("three_layers", steps=4)
    rolled = make_layer(stack, R_stack, filt, frame_hw, mode, weights, extrap_start_time=extrap)
    unrolled = make_layer(stack, R_stack, filt, frame_hw, mode, weights, extrap_start_time=extrap, unroll=True)
    assert unrolled.get_config()["unroll"] is True
    got = keras.ops.convert_to_numpy(unrolled(frames))
    np.testing.assert_allclose(got, keras.ops.convert_to_numpy(rolled(frames)), atol=1e-6, rtol=0)
    expected = prednet_reference(frames, weights, stack, R_stack, output_mode=mode, extrap_start_time=extrap)
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)


def test_reference_is_not_trivially_zero():
    """Guards the comparison above: the reference outputs actually move with the input."""
    stack, R_stack, filt, frame_hw, weights, frames = case("three_layers")
    out = prednet_reference(frames, weights, stack, R_stack, output_mode="prediction")
    assert out[:, 1:].std() > 1e-2
    assert not np.allclose(out[:, 1], out[:, 2])


def test_extrapolation_feeds_back_predictions():
    """From extrap_start_time on, the input frames no longer matter."""
    stack, R_stack, filt, frame_hw, weights, frames = case("two_layers", steps=5)
    layer = make_layer(stack, R_stack, filt, frame_hw, "prediction", weights, extrap_start_time=3)
    changed = frames.copy()
    changed[:, 3:] = np.random.default_rng(1).random(changed[:, 3:].shape)
    a = keras.ops.convert_to_numpy(layer(frames))
    b = keras.ops.convert_to_numpy(layer(changed))
    np.testing.assert_array_equal(a, b)
    plain = make_layer(stack, R_stack, filt, frame_hw, "prediction", weights)
    assert not np.allclose(keras.ops.convert_to_numpy(plain(changed))[:, 4], b[:, 4])


def test_return_sequences_false_gives_last_step():
    stack, R_stack, filt, frame_hw, weights, frames = case("two_layers")
    layer = make_layer(stack, R_stack, filt, frame_hw, "prediction", weights)
    layer.return_sequences = False
    expected = prednet_reference(frames, weights, stack, R_stack, output_mode="prediction")[:, -1]
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(frames)), expected, atol=ATOL)


def test_channels_first_is_the_transposed_channels_last():
    stack, R_stack, filt, frame_hw, weights, frames = case("two_layers")
    frames_cf = np.transpose(frames, (0, 1, 4, 2, 3))
    for mode in ("prediction", "all", "E1", "error"):
        last = make_layer(stack, R_stack, filt, frame_hw, mode, weights)
        first = PredNet(**{**last.get_config(), "data_format": "channels_first"})
        first.build(frames_cf.shape)
        set_named_weights(first, weights)
        got = keras.ops.convert_to_numpy(first(frames_cf))
        expected = keras.ops.convert_to_numpy(last(frames))
        if mode == "all":
            h, w = frame_hw
            image = expected[..., : h * w * stack[0]].reshape(expected.shape[:2] + (h, w, stack[0]))
            image = image.transpose(0, 1, 4, 2, 3).reshape(expected.shape[:2] + (-1,))
            expected = np.concatenate([image, expected[..., h * w * stack[0] :]], axis=-1)
        elif expected.ndim == 5:
            expected = expected.transpose(0, 1, 4, 2, 3)
        assert tuple(first.compute_output_shape(frames_cf.shape)) == got.shape
        np.testing.assert_allclose(got, expected, atol=1e-6, err_msg=mode)


def test_legacy_dim_ordering_is_accepted():
    layer = PredNet((3,), (3,), (), (3,), (3,), dim_ordering="th")
    assert layer.data_format == "channels_first"
    with pytest.raises(ValueError, match="dim_ordering"):
        PredNet((3,), (3,), (), (3,), (3,), dim_ordering="xx")


def test_stateful_continues_where_it_stopped():
    stack, R_stack, filt, frame_hw, weights, frames = case("two_layers", steps=6, batch=2)
    layer = make_layer(stack, R_stack, filt, frame_hw, "prediction", weights, batch=2, stateful=True)
    first = keras.ops.convert_to_numpy(layer(frames[:, :3]))
    second = keras.ops.convert_to_numpy(layer(frames[:, 3:]))
    expected = prednet_reference(frames, weights, stack, R_stack, output_mode="prediction")
    np.testing.assert_allclose(np.concatenate([first, second], axis=1), expected, atol=ATOL)
    layer.reset_state()
    again = keras.ops.convert_to_numpy(layer(frames[:, :3]))
    np.testing.assert_allclose(again, first, atol=1e-6)


def test_return_state_shapes_match_compute_output_shape():
    stack, R_stack, filt, frame_hw, weights, frames = case("three_layers")
    layer = make_layer(stack, R_stack, filt, frame_hw, "error", weights, return_state=True, extrap_start_time=2)
    result = layer(frames)
    shapes = layer.compute_output_shape(frames.shape)
    assert len(result) == len(shapes) == 1 + 3 * len(stack) + 2
    for tensor, shape in zip(result, shapes):
        assert tuple(tensor.shape) == tuple(shape)


def test_keras2_hard_sigmoid_is_not_keras3s():
    x = np.linspace(-4, 4, 17).astype("float32")
    got = keras.ops.convert_to_numpy(keras2_hard_sigmoid(x))
    np.testing.assert_allclose(got, np.clip(0.2 * x + 0.5, 0, 1), atol=1e-7)
    keras3 = keras.ops.convert_to_numpy(keras.activations.hard_sigmoid(x))
    assert not np.allclose(got, keras3)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(keras2_hard_sigmoid))
    assert restored is keras2_hard_sigmoid


def test_kitti_configuration_parameter_count_and_weight_order():
    layer = PredNet(**prednet_keras.kitti_prednet_kwargs())
    layer.build((None, 10, 128, 160, 3))
    assert count_parameters(layer) == 6_915_948
    names = [w.path.split("/")[-2] + "/" + w.path.split("/")[-1] for w in layer.weights]
    assert len(names) == 46
    expected = [
        f"layer_{kind}_{l}/{part}"
        for kind in ("a", "ahat", "c", "f", "i", "o")
        for l in range(3 if kind == "a" else 4)
        for part in ("kernel", "bias")
    ]
    assert names == expected
    assert tuple(layer.cell.convs["i"][1].kernel.shape) == (3, 3, 2 * 48 + 48 + 96, 48)


def test_get_config_round_trip_covers_every_argument():
    layer = PredNet(
        stack_sizes=(3, 8),
        R_stack_sizes=(5, 9),
        A_filt_sizes=(3,),
        Ahat_filt_sizes=(3, 5),
        R_filt_sizes=((3, 3), (1, 3)),
        pixel_max=2.0,
        error_activation="tanh",
        A_activation="sigmoid",
        LSTM_activation="relu",
        LSTM_inner_activation="sigmoid",
        output_mode="Ahat1",
        extrap_start_time=4,
        data_format="channels_first",
        return_sequences=True,
        return_state=False,
        go_backwards=False,
        stateful=False,
        unroll=True,
        name="custom",
    )
    config = layer.get_config()
    clone = PredNet.from_config(config)
    assert clone.get_config() == config
    for key, value in {
        "stack_sizes": [3, 8],
        "R_filt_sizes": [[3, 3], [1, 3]],
        "pixel_max": 2.0,
        "error_activation": "tanh",
        "LSTM_inner_activation": "sigmoid",
        "output_mode": "Ahat1",
        "extrap_start_time": 4,
        "data_format": "channels_first",
        "return_sequences": True,
        "unroll": True,
        "name": "custom",
    }.items():
        assert config[key] == value, key


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(R_stack_sizes=(3,)), "len\\(R_stack_sizes\\) must be 2"),
        (dict(A_filt_sizes=(3, 3)), "len\\(A_filt_sizes\\) must be 1"),
        (dict(Ahat_filt_sizes=(3,)), "len\\(Ahat_filt_sizes\\) must be 2"),
        (dict(R_filt_sizes=(3, 3, 3)), "len\\(R_filt_sizes\\) must be 2"),
        (dict(output_mode="R2"), "Unknown output_mode 'R2'"),
        (dict(output_mode="predictions"), "Unknown output_mode"),
        (dict(extrap_start_time=0), "extrap_start_time"),
        (dict(R_filt_sizes=(3, (3, 3, 3))), "pair of ints"),
        (dict(data_format="NHWC"), "data_format"),
    ],
)
def test_bad_arguments_get_clear_errors(kwargs, message):
    args = dict(stack_sizes=(3, 4), R_stack_sizes=(3, 4), A_filt_sizes=(3,), Ahat_filt_sizes=(3, 3), R_filt_sizes=(3, 3))
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        PredNet(**args)


def test_frame_size_not_divisible_is_explained():
    layer = PredNet(**prednet_keras.kitti_prednet_kwargs())
    with pytest.raises(ValueError, match=r"120x161.*W=161 not divisible by 2\*\*3 = 8.*W=160 or 168"):
        layer(np.zeros((1, 2, 120, 161, 3), "float32"))


def test_channel_mismatch_is_explained():
    layer = PredNet(**prednet_keras.kitti_prednet_kwargs())
    with pytest.raises(ValueError, match="1 channels but stack_sizes\\[0\\] is 3"):
        layer(np.zeros((1, 2, 16, 16, 1), "float32"))
