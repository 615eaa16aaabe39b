"""PredNet under a mixed dtype policy: bfloat16 activations; c, E_0, the error means and the loss in float32."""

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
L = len(STACK)


def _dtype(x):
    return keras.backend.standardize_dtype(x.dtype)


def _case(seed=0, steps=4, batch=2):
    rng = np.random.default_rng(seed)
    weights = random_weights(STACK, R_STACK, FILT, rng)
    frames = rng.random((batch, steps) + FRAME + (3,)).astype("float32")
    return weights, frames


@pytest.mark.parametrize("mode", ["prediction", "error"])
def test_bfloat16_activations_float32_interface(mode):
    weights, frames = _case()
    layer = PredNet(**KWARGS, output_mode=mode, return_sequences=True, return_state=True, dtype="mixed_bfloat16")
    layer.build((None, None) + FRAME + (3,))
    set_named_weights(layer, weights)
    assert layer.dtype_policy.name == "mixed_bfloat16"
    assert layer.cell.activation_dtype == "bfloat16"
    # What the layer takes and gives is float32: frames, outputs, the states it returns.
    assert layer.compute_dtype == layer.cell.compute_dtype == "float32"
    assert {_dtype(v) for v in layer.weights} == {"float32"}

    output, *states = layer(frames)
    assert _dtype(output) == "float32"
    assert {_dtype(s) for s in states} == {"float32"}
    expected = prednet_reference(frames, weights, STACK, R_STACK, output_mode=mode)
    got = keras.ops.convert_to_numpy(output)
    # bfloat16 keeps 8 significant bits: close to the float32 reference, and not equal to it.
    np.testing.assert_allclose(got, expected, atol=3e-2, rtol=0)
    assert np.abs(got - expected).max() > 1e-5


@pytest.mark.parametrize("extrap", [None, 2])
def test_one_step_keeps_each_state_in_its_dtype(extrap):
    # Inside the time loop: r and e in bfloat16, c (the accumulator), the previous prediction and
    # the step counter in float32; the per-layer error means (the loss is made of them) float32.
    weights, frames = _case(seed=3)
    layer = PredNet(**KWARGS, output_mode="error", extrap_start_time=extrap, dtype="mixed_bfloat16")
    layer.build((None, None) + FRAME + (3,))
    set_named_weights(layer, weights)
    cell = layer.cell
    expected = ["bfloat16"] * L + ["float32"] * L + ["bfloat16"] * L + (["float32"] * 2 if extrap else [])
    assert cell.state_dtypes == expected
    states = [keras.ops.cast(s, d) for s, d in zip(cell.get_initial_state(2), cell.state_dtypes)]
    for _ in range(2):
        output, states = cell.call(keras.ops.convert_to_tensor(frames[:, 0]), states)
        assert [_dtype(s) for s in states] == expected
        assert _dtype(output) == "float32"


def test_float32_policy_has_no_cast_in_its_graph():
    # TensorFlow's graph of a float32 layer: no Cast operation anywhere (the mixed one has them).
    tf = pytest.importorskip("tensorflow")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("reads a TensorFlow graph")
    weights, frames = _case()

    def cast_ops(dtype):
        layer = PredNet(**KWARGS, output_mode="error", return_sequences=True, dtype=dtype)
        layer.build((None, None) + FRAME + (3,))
        set_named_weights(layer, weights)
        graph = tf.function(lambda x: layer(x)).get_concrete_function(tf.TensorSpec(frames.shape)).graph

        def ops_of(g):
            found = list(g.get_operations())
            for function in g._functions.values():  # the while loop's body
                found += ops_of(function.graph) if hasattr(function, "graph") else []
            return found

        found = ops_of(graph)
        assert sum(op.type == "Conv2D" for op in found) >= 3 * L - 1  # the loop body was read
        return sum(op.type == "Cast" for op in found)

    assert cast_ops("float32") == 0
    assert cast_ops("mixed_bfloat16") > 0


def _train(dtype, weights, batches, steps):
    model = prednet_keras.build_training_model(nt=batches.shape[1], frame_shape=FRAME + (3,),
                                               layer_loss_weights="L_all", dtype=dtype, **KWARGS)
    set_named_weights(prednet_keras.find_prednet(model), weights)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mean_absolute_error")
    zeros = np.zeros((2, 1), "float32")
    losses = [float(model.train_on_batch(batches[2 * (s % 4):2 * (s % 4) + 2], zeros)) for s in range(steps)]
    return model, np.array(losses)


@pytest.mark.slow  # a fresh process or a training: the full suite, not the fast loop
def test_mixed_training_trains_records_its_policy_and_follows_float32():
    weights, batches = _case(seed=1, steps=5, batch=8)
    steps = 24
    reference, f32 = _train("float32", weights, batches, steps)
    model, bf16 = _train("mixed_bfloat16", weights, batches, steps)
    # Records its precision: the layer's policy, kept in its configuration (and so in a .keras file);
    # the loss layer is float32, and so are the loss, the weights and the optimizer's state.
    layer = prednet_keras.find_prednet(model)
    assert layer.get_config()["dtype"]["config"]["name"] == "mixed_bfloat16"
    assert PredNet.from_config(layer.get_config()).dtype_policy.name == "mixed_bfloat16"
    assert model.get_layer("weighted_error").dtype_policy.name == "float32"
    assert _dtype(model(batches[:2])) == "float32"
    variables = model.weights + model.optimizer.variables
    assert {_dtype(v) for v in variables if "int" not in _dtype(v)} == {"float32"}
    # Trains: finite, falling (mean of the last 4 steps against the first 4 over the same 4 batches).
    assert np.all(np.isfinite(bf16))
    assert bf16[-4:].mean() < 0.95 * bf16[:4].mean()
    # Follows float32 from the same weights and batches, step by step, without being it.
    np.testing.assert_allclose(bf16, f32, rtol=3e-2)
    assert np.any(bf16 != f32)
    final = [keras.ops.convert_to_numpy(w) for w in prednet_keras.find_prednet(model).weights]
    final_f32 = [keras.ops.convert_to_numpy(w) for w in prednet_keras.find_prednet(reference).weights]
    drift = max(np.abs(a - b).max() for a, b in zip(final, final_f32))
    moved = max(np.abs(a - w).max() for a, w in zip(final_f32, [keras.ops.convert_to_numpy(w)
                                                                 for w in _initial(weights, reference)]))
    assert drift < 0.5 * moved


def _initial(weights, model):
    layer = prednet_keras.find_prednet(model)
    return [w for conv in layer.cell.conv_layers for w in weights[conv.name]]


def test_stateful_mixed_layer_keeps_float32_state_variables():
    # Keras' own stateful RNNs failed under mixed policies (keras-team/keras#20605): their
    # state variables are float32 while the states computed were not. Here the variables are
    # float32 and c crosses calls unrounded.
    weights, frames = _case(seed=2, steps=4, batch=2)
    layer = PredNet(**KWARGS, output_mode="prediction", return_sequences=True, stateful=True, dtype="mixed_bfloat16")
    layer.build((2, None) + FRAME + (3,))
    set_named_weights(layer, weights)
    first = keras.ops.convert_to_numpy(layer(frames[:, :2]))
    second = keras.ops.convert_to_numpy(layer(frames[:, 2:]))
    assert {_dtype(v) for v in layer.states} == {"float32"}
    expected = prednet_reference(frames, weights, STACK, R_STACK, output_mode="prediction")
    np.testing.assert_allclose(np.concatenate([first, second], axis=1), expected, atol=3e-2, rtol=0)
    # Two calls of two steps are the same computation as one call of four.
    layer.reset_state()
    whole = keras.ops.convert_to_numpy(layer(frames))
    np.testing.assert_array_equal(np.concatenate([first, second], axis=1), whole)
