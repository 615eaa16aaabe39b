"""PredNet under a mixed dtype policy: bfloat16 convolutions, float32 everything else."""

import numpy as np
import pytest

import keras
import prednet_keras
from prednet_keras import PredNet

from tests.layers.numpy_prednet import prednet_reference, random_weights
from tests.layers.test_lotter import set_named_weights

STACK, R_STACK, FILT, FRAME = (3, 4, 6), (3, 5, 6), 3, (8, 12)
KWARGS = dict(stack_sizes=STACK, R_stack_sizes=R_STACK, A_filt_sizes=[FILT] * 2, Ahat_filt_sizes=[FILT] * 3,
              R_filt_sizes=[FILT] * 3)


def _dtype(x):
    return keras.backend.standardize_dtype(x.dtype)


def _case(seed=0, steps=4, batch=2):
    rng = np.random.default_rng(seed)
    weights = random_weights(STACK, R_STACK, FILT, rng)
    frames = rng.random((batch, steps) + FRAME + (3,)).astype("float32")
    return weights, frames


@pytest.mark.parametrize("mode", ["prediction", "error"])
def test_bfloat16_convolutions_float32_states_and_outputs(mode):
    weights, frames = _case()
    layer = PredNet(**KWARGS, output_mode=mode, return_sequences=True, return_state=True, dtype="mixed_bfloat16")
    layer.build((None, None) + FRAME + (3,))
    set_named_weights(layer, weights)
    assert layer.dtype_policy.name == "mixed_bfloat16"
    assert layer.cell.conv_dtype == "bfloat16"
    assert layer.compute_dtype == layer.cell.compute_dtype == "float32"
    assert {_dtype(v) for v in layer.weights} == {"float32"}

    output, *states = layer(frames)
    assert _dtype(output) == "float32"
    assert {_dtype(s) for s in states} == {"float32"}
    expected = prednet_reference(frames, weights, STACK, R_STACK, output_mode=mode)
    got = keras.ops.convert_to_numpy(output)
    # bfloat16 keeps 8 significant bits: close to the float32 reference, and not equal to it
    # (the convolutions really ran in bfloat16).
    np.testing.assert_allclose(got, expected, atol=3e-2, rtol=0)
    assert np.abs(got - expected).max() > 1e-5


def test_mixed_training_model_has_a_float32_loss_and_trains():
    weights, frames = _case(seed=1, steps=5, batch=3)
    model = prednet_keras.build_training_model(nt=5, frame_shape=FRAME + (3,), layer_loss_weights="L_all",
                                               dtype="mixed_bfloat16", **KWARGS)
    set_named_weights(prednet_keras.find_prednet(model), weights)
    assert model.get_layer("weighted_error").dtype_policy.name == "float32"
    assert _dtype(model(frames)) == "float32"
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mean_absolute_error")
    losses = [float(model.train_on_batch(frames, np.zeros((3, 1), "float32"))) for _ in range(6)]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert {_dtype(v) for v in model.weights} == {"float32"}


def test_stateful_mixed_layer_keeps_float32_state_variables():
    # Keras' own stateful RNNs failed under mixed policies (keras-team/keras#20605): their
    # state variables are float32 while the states computed were not.
    weights, frames = _case(seed=2, steps=4, batch=2)
    layer = PredNet(**KWARGS, output_mode="prediction", return_sequences=True, stateful=True, dtype="mixed_bfloat16")
    layer.build((2, None) + FRAME + (3,))
    set_named_weights(layer, weights)
    first = keras.ops.convert_to_numpy(layer(frames[:, :2]))
    second = keras.ops.convert_to_numpy(layer(frames[:, 2:]))
    assert {_dtype(v) for v in layer.states} == {"float32"}
    expected = prednet_reference(frames, weights, STACK, R_STACK, output_mode="prediction")
    np.testing.assert_allclose(np.concatenate([first, second], axis=1), expected, atol=3e-2, rtol=0)
