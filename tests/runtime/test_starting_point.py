"""Initial weights and data order from numpy: distributions, files, checksums (in
this process, whatever its backend); identical across backends and bit-identical
deterministic training (in child processes)."""

import h5py
import numpy as np
import pytest

import keras
from prednet_keras.models import starting_point as sp
from prednet_keras.runtime import RuntimeConfig

from tests.runtime import child_tasks
from tests.runtime._helpers import installed, ok, run_tasks


def conv_dense():
    return child_tasks.small_conv_dense()


# ---------------------------------------------------------------- distributions
@pytest.mark.parametrize("shape", [(3,), (5, 7), (3, 3, 4, 8), (2, 3, 3, 4, 8), ()])
def test_fans_match_keras(shape):
    from keras.src.initializers.random_initializers import compute_fans

    assert sp.compute_fans(shape) == compute_fans(shape)


def test_glorot_kernels_zero_biases_keyed_by_path():
    model = conv_dense()
    weights = sp.initial_weights(model, seed=1)
    assert list(weights) == [w.path for w in model.weights] == sp.weight_keys(model)
    conv_kernel, conv_bias, dense_kernel, dense_bias = weights.values()
    assert conv_kernel.shape == (3, 3, 3, 4) and conv_kernel.dtype == np.float32
    assert not conv_bias.any() and not dense_bias.any()
    for kernel in (conv_kernel, dense_kernel):
        fan_in, fan_out = sp.compute_fans(kernel.shape)
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        assert np.abs(kernel).max() <= limit
        # A uniform(-limit, limit) has standard deviation limit / sqrt(3).
        assert abs(kernel.std() - limit / np.sqrt(3)) < 0.05 * limit


def test_same_seed_same_weights_whatever_keras_random_state():
    model = conv_dense()
    keras.utils.set_random_seed(1)
    first = sp.initial_weights(model, 5)
    keras.utils.set_random_seed(2)
    second = sp.initial_weights(conv_dense(), 5)
    assert sp.weights_checksum(first) == sp.weights_checksum(second)
    assert sp.weights_checksum(sp.initial_weights(model, 6)) != sp.weights_checksum(first)
    # Each weight has its own stream: kernels of equal shape differ.
    twin = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4), keras.layers.Dense(4)])
    kernels = [v for k, v in sp.initial_weights(twin, 0).items() if k.endswith("kernel")]
    assert kernels[0].shape == kernels[1].shape and not np.array_equal(kernels[0], kernels[1])


def test_other_initializers_follow_their_distribution():
    inputs = keras.Input((400,))
    x = keras.layers.Dense(300, kernel_initializer="he_normal", bias_initializer="ones", name="he")(inputs)
    x = keras.layers.Dense(300, kernel_initializer=keras.initializers.RandomNormal(0.5, 0.1), name="rn")(x)
    x = keras.layers.Dense(300, kernel_initializer=keras.initializers.Constant(0.25), name="const")(x)
    x = keras.layers.Dense(300, kernel_initializer=keras.initializers.RandomUniform(-2, 3), name="ru")(x)
    model = keras.Model(inputs, x)
    w = {key.split("/")[-2] + "/" + key.split("/")[-1]: v for key, v in sp.initial_weights(model, 0).items()}
    he = w["he/kernel"]
    # he_normal: normal truncated at 2 std with std sqrt(2 / fan_in) after Keras' correction.
    assert abs(he.std() - np.sqrt(2.0 / 400)) < 0.03 * np.sqrt(2.0 / 400)
    assert np.abs(he).max() <= 2 * np.sqrt(2.0 / 400) / 0.87962566103423978 + 1e-6
    assert (w["he/bias"] == 1).all()
    assert abs(w["rn/kernel"].mean() - 0.5) < 0.01 and abs(w["rn/kernel"].std() - 0.1) < 0.005
    assert (w["const/kernel"] == 0.25).all()
    assert w["ru/kernel"].min() >= -2 and w["ru/kernel"].max() < 3 and abs(w["ru/kernel"].mean() - 0.5) < 0.05


def test_lstm_unit_forget_bias_is_reproduced():
    inputs = keras.Input((3, 2))
    model = keras.Model(inputs, keras.layers.LSTM(5, name="lstm")(inputs))
    weights = sp.initial_weights(model, 0)
    bias = next(v for k, v in weights.items() if k.endswith("bias"))
    np.testing.assert_array_equal(bias, np.r_[np.zeros(5), np.ones(5), np.zeros(10)])
    recurrent = next(v for k, v in weights.items() if k.endswith("recurrent_kernel"))
    assert recurrent.shape == (5, 20)
    # Orthogonal (Keras' default here): orthonormal rows.
    np.testing.assert_allclose(recurrent @ recurrent.T, np.eye(5), atol=1e-5)


def test_unsupported_initializer_and_unbuilt_model_raise():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(4, kernel_initializer="identity", name="o")(inputs))
    with pytest.raises(ValueError, match="Identity has no numpy equivalent"):
        sp.initial_weights(model, 0)
    with pytest.raises(ValueError, match="build it"):
        sp.initial_weights(keras.layers.Dense(3), 0)
    with pytest.raises(ValueError, match="seed"):
        sp.initial_weights(conv_dense(), -1)


def test_prednet_initial_weights():
    model = child_tasks.small_prednet()
    weights = sp.initial_weights(model, 0)
    assert len(weights) == len(model.weights) == 34
    kernels = {k: v for k, v in weights.items() if k.endswith("kernel")}
    biases = {k: v for k, v in weights.items() if k.endswith("bias")}
    assert len(kernels) == len(biases) == 17
    assert all(not v.any() for v in biases.values())
    gate = next(v for k, v in kernels.items() if k.endswith("layer_i_0/kernel"))
    # layer_i_0 reads [r_0, e_0, up(r_1)] = 3 + 6 + 4 channels, writes 3.
    assert gate.shape == (3, 3, 13, 3)
    limit = np.sqrt(6.0 / (9 * 13 + 9 * 3))
    assert np.abs(gate).max() <= limit


# ------------------------------------------------------------------ data order
def test_data_order():
    order = sp.data_order(50, 4)
    assert order.dtype == np.int64 and sorted(order) == list(range(50))
    np.testing.assert_array_equal(order, sp.data_order(50, 4))
    np.testing.assert_array_equal(order, np.random.default_rng(4).permutation(50))
    assert not np.array_equal(order, sp.data_order(50, 5))
    assert not np.array_equal(sp.data_order(50, 4, epoch=1), sp.data_order(50, 4, epoch=2))
    assert sp.order_checksum(order) == sp.order_checksum(list(order))
    assert sp.order_checksum(order) != sp.order_checksum(sp.data_order(50, 5))


# ---------------------------------------------------------------------- checksum
def test_checksum_sees_names_and_every_bit():
    weights = sp.initial_weights(conv_dense(), 2)
    base = sp.weights_checksum(weights)
    flipped = {k: v.copy() for k, v in weights.items()}
    first = next(iter(flipped))
    flipped[first].view(np.uint32).flat[0] ^= 1  # one ulp in one weight
    assert sp.weights_checksum(flipped) != base
    renamed = {("x" + k): v for k, v in weights.items()}
    assert sp.weights_checksum(renamed) != base


# ------------------------------------------------------------- the 1-ulp noise floor
# The weights nudge_by_ulp picks for seeds 0, 1 and 2 of _mixed_weights.
PINNED_NUDGES = [("dense/kernel", 63), ("dense/kernel", 93), ("dense/kernel", 89)]


def _mixed_weights():
    """A float32 kernel, a float64 and a float16 bias and an integer counter, not in sorted order."""
    return {"dense/kernel": np.linspace(-1, 1, 100, dtype=np.float32).reshape(10, 10),
            "conv/bias": np.full(5, 0.1, np.float64), "steps": np.arange(4, dtype=np.int64),
            "dense/bias": np.full(3, 0.5, np.float16)}


def test_nudge_by_ulp_changes_one_weight_by_one_ulp():
    weights = _mixed_weights()
    kept = {key: value.copy() for key, value in weights.items()}
    for seed in range(30):
        nudged, change = sp.nudge_by_ulp(weights, seed)
        assert list(nudged) == list(weights)
        differing = [(key, int(i)) for key in weights for i in np.flatnonzero(nudged[key] != weights[key])]
        assert differing == [(change["key"], change["index"])]
        before = weights[change["key"]].reshape(-1)[change["index"]]
        after = nudged[change["key"]].reshape(-1)[change["index"]]
        assert after.dtype == before.dtype and change["dtype"] == before.dtype.name
        assert after == np.nextafter(before, np.array(np.inf, dtype=before.dtype)) and after > before
        assert (change["before"], change["after"]) == (float(before), float(after))
        bits = f"u{before.dtype.itemsize}"
        assert int(change["before_bits"], 16) == int(before.view(bits))
        assert int(change["after_bits"], 16) == int(after.view(bits))
        for key, value in weights.items():  # the weights given are left as they were
            np.testing.assert_array_equal(value, kept[key])
    # The record of a float32 0.1: its bits, then the next float32 up.
    _, change = sp.nudge_by_ulp({"w": np.float32([0.1]), "steps": np.int64([7])}, 0)
    assert change == {"key": "w", "index": 0, "dtype": "float32", "before": float(np.float32(0.1)),
                      "after": float(np.nextafter(np.float32(0.1), np.float32(1))),
                      "before_bits": "0x3dcccccd", "after_bits": "0x3dccccce"}


def test_nudge_by_ulp_picks_the_same_weight_for_a_seed_and_another_for_other_seeds():
    weights = _mixed_weights()
    picks = [tuple(sp.nudge_by_ulp(weights, seed)[1][k] for k in ("key", "index")) for seed in range(20)]
    # The same for the seed whatever the order of the mapping (every arm, every machine) ...
    reordered = dict(reversed(list(weights.items())))
    assert picks == [tuple(sp.nudge_by_ulp(reordered, seed)[1][k] for k in ("key", "index")) for seed in range(20)]
    # ... pinned, so that a study's 1-ulp runs of one version start where another version's did ...
    assert picks[:3] == PINNED_NUDGES
    # ... and another weight for (almost) every other seed, among all the floating-point weights.
    assert sum(pick != picks[0] for pick in picks[1:]) >= 18
    keys = {sp.nudge_by_ulp(weights, seed)[1]["key"] for seed in range(300)}
    assert keys == {"dense/kernel", "conv/bias", "dense/bias"}
    with pytest.raises(ValueError, match="No floating-point weight"):
        sp.nudge_by_ulp({"steps": np.arange(3)}, 0)


# --------------------------------------------------------------------------- files
def test_save_load_round_trip(tmp_path):
    path = tmp_path / "init.h5"
    model = conv_dense()
    checksum = sp.save_initial_weights(model, path, seed=9)
    assert [p.name for p in tmp_path.iterdir()] == ["init.h5"]  # no temporary left behind
    weights, info = sp.read_initial_weights(path)
    assert info["seed"] == 9 and info["checksum"] == checksum == sp.weights_checksum(weights)
    report = sp.load_initial_weights(model, path)
    assert report == {"checksum": checksum, "seed": 9, "matched_by": "path", "count": 4}
    assert sp.weights_checksum(model) == checksum
    # Auto-named models: a second one built in this process gets other suffixes
    # (sequential_1/conv2d_1/...), so entries are matched by position.
    def auto_named():
        return keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3),
                                 keras.layers.Flatten(), keras.layers.Dense(5)])

    auto_path = tmp_path / "auto.h5"
    auto_checksum = sp.save_initial_weights(auto_named(), auto_path, seed=9)
    other = auto_named()
    assert sp.load_initial_weights(other, auto_path) == {
        "checksum": auto_checksum, "seed": 9, "matched_by": "order", "count": 4}
    auto_weights, _ = sp.read_initial_weights(auto_path)
    for held, saved in zip(sp.current_weights(other).values(), auto_weights.values()):
        np.testing.assert_array_equal(held, saved)


def test_existing_files_are_never_replaced_silently(tmp_path):
    path = tmp_path / "init.h5"
    model = conv_dense()
    checksum = sp.save_initial_weights(model, path, seed=1)
    assert sp.save_initial_weights(model, path, seed=1) == checksum  # same content: reused
    with pytest.raises(FileExistsError, match="already exists"):
        sp.save_initial_weights(model, path, seed=2)
    assert sp.read_initial_weights(path)[1]["seed"] == 1
    assert sp.save_initial_weights(model, path, seed=2, overwrite=True) != checksum
    assert sp.read_initial_weights(path)[1]["seed"] == 2


def test_files_that_do_not_fit_fail_clearly(tmp_path):
    path = tmp_path / "init.h5"
    sp.save_initial_weights(conv_dense(), path, seed=1)
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Flatten()(keras.layers.Conv2D(6, 3, name="conv")(inputs))
    wider = keras.Model(inputs, keras.layers.Dense(5, name="dense")(x), name="conv_dense")
    with pytest.raises(ValueError, match=r"conv/kernel: model \(3, 3, 3, 6\), file \(3, 3, 3, 4\)"):
        sp.load_initial_weights(wider, path)
    with pytest.raises(ValueError, match="does not fit this model"):
        sp.load_initial_weights(child_tasks.conv_autoencoder(), path)
    with pytest.raises(FileNotFoundError):
        sp.load_initial_weights(conv_dense(), tmp_path / "missing.h5")
    (tmp_path / "junk.h5").write_bytes(b"not hdf5")
    with pytest.raises(ValueError, match="not an HDF5 file"):
        sp.read_initial_weights(tmp_path / "junk.h5")
    with h5py.File(path, "r+") as f:
        f["weights/0"][0, 0, 0, 0] += 1.0
    with pytest.raises(ValueError, match="corrupt"):
        sp.read_initial_weights(path)


# ------------------------------------------------------- across backends / repeats
SEED = child_tasks.SEED


@pytest.fixture(scope="module")
def children(tmp_path_factory):
    """Saves starting points once here, then trains the conv model twice in every installed backend
    (deterministic TensorFlow CPU, JAX, torch) and loads the other starting points there, all in
    concurrent child processes."""
    folder = tmp_path_factory.mktemp("starting_points")
    files = {}
    for name in ("conv_dense", "prednet", "autoencoder"):
        files[name] = folder / f"{name}.h5"
        sp.save_initial_weights(child_tasks.MODELS[name](), files[name], SEED)
    pairs = [f"{name}={files[name]}" for name in ("conv_dense", "prednet")]
    deterministic = {
        "tensorflow": RuntimeConfig(backend="tensorflow", threads=2, deterministic=True),
        "jax": RuntimeConfig(backend="jax", deterministic=True),
        "torch": RuntimeConfig(backend="torch", deterministic=True),
    }
    jobs = {}
    for backend, config in deterministic.items():
        if installed(backend):
            # The first run also loads the other starting points, after its training (which it leaves as the
            # second run's): one process fewer per backend.
            jobs[f"train_{backend}_1"] = (config, "train_then_load", files["autoencoder"], SEED, *pairs)
            jobs[f"train_{backend}_2"] = (config, "train", files["autoencoder"], SEED)
    results = run_tasks(jobs)
    for backend in deterministic:
        if f"train_{backend}_1" in results:
            first = results[f"train_{backend}_1"]
            # Its loads, or its error where the process failed.
            results[f"load_{backend}"] = {**first["loaded"], "ok": True} if first["ok"] else first
    results["files"] = {name: sp.read_initial_weights(path)[1]["checksum"] for name, path in files.items()}
    return results


@pytest.mark.slow
@pytest.mark.parametrize("model", ["conv_dense", "prednet"])
def test_initial_weights_identical_across_backends(children, model):
    expected = children["files"][model]
    seen = {}
    for backend in ("tensorflow", "jax", "torch"):
        if f"load_{backend}" not in children:
            continue
        result = ok(children[f"load_{backend}"])
        assert result["backend"] == backend
        report = result[model]
        # The backend holds exactly the file's bits...
        assert report["load"]["checksum"] == expected
        # ...and numpy generation inside that backend's process gives the same weights.
        assert report["generated_here"] == report["model_checksum"]
        seen[backend] = report["model_checksum"]
    assert "tensorflow" in seen
    assert len(set(seen.values())) == 1, seen


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_deterministic_repeats_are_bit_identical(children, backend):
    if f"train_{backend}_1" not in children:
        pytest.skip(f"{backend} not installed")
    first, second = ok(children[f"train_{backend}_1"]), ok(children[f"train_{backend}_2"])
    assert first["init"] == second["init"] == children["files"]["autoencoder"]
    assert first["order"] == second["order"]
    assert len(first["losses"]) == 12
    assert first["losses"] == second["losses"]
    assert first["weights"] == second["weights"]
    if backend == "tensorflow":
        assert first["jit_compile"] is False
