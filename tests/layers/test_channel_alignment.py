"""PREDNET_CHANNEL_MULTIPLE: the convolutions' channels padded inside the step (layers/channel_alignment.py)
compute what the unpadded model computes, train the same real weights, and save the same files."""

import io
import re
import zipfile

import h5py
import keras
import numpy as np
import pytest

import prednet_keras
from prednet_keras.layers import channel_alignment

# Convolutions of 3, 6 and 15 input channels at the bottom layer, 6 and 16 (a multiple of 8 already) at the top.
KWARGS = dict(stack_sizes=(3, 5), R_stack_sizes=(3, 6), A_filt_sizes=(3,), Ahat_filt_sizes=(3, 3),
              R_filt_sizes=(3, 3))
NT, FRAME = 3, (8, 8, 3)


def training_model(monkeypatch, multiple):
    if multiple:
        monkeypatch.setenv(channel_alignment.ENV, str(multiple))
    else:
        monkeypatch.delenv(channel_alignment.ENV, raising=False)
    keras.backend.clear_session()  # the same layer names in both models, as in two processes
    model = prednet_keras.build_training_model(nt=NT, frame_shape=FRAME, **KWARGS)
    assert prednet_keras.find_prednet(model).cell.channel_multiple == multiple
    return model


@pytest.fixture
def frames():
    return np.random.default_rng(3).random((2, NT) + FRAME).astype("float32")


def test_padded_convolutions_compute_the_same_errors_and_predictions(monkeypatch, frames):
    plain, padded = training_model(monkeypatch, None), training_model(monkeypatch, 8)
    padded.set_weights(plain.get_weights())
    # predict: NumPy out on every backend (a torch model's call gives a tensor that requires grad).
    np.testing.assert_allclose(padded.predict(frames, verbose=0), plain.predict(frames, verbose=0),
                               rtol=1e-5, atol=1e-7)
    predicted = [prednet_keras.build_prediction_model(m, nt=NT) for m in (plain, padded)]
    predicted[1].layers[-1].cell.channel_multiple = 8
    first, second = (p.predict(frames, verbose=0) for p in predicted)
    assert first.std() > 0
    np.testing.assert_allclose(second, first, rtol=1e-5, atol=1e-6)


def test_the_real_weights_get_the_same_gradients(monkeypatch, frames):
    models = [training_model(monkeypatch, None), training_model(monkeypatch, 8)]
    models[1].set_weights(models[0].get_weights())
    before = [w.copy() for w in models[0].get_weights()]
    updates = []
    for model in models:
        # Plain SGD with rate 1: each weight moves by minus its gradient.
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=1.0), loss="mean_absolute_error")
        model.train_on_batch(frames, np.zeros((2, 1), "float32"))
        updates.append([after - start for after, start in zip(model.get_weights(), before)])
    assert any(np.abs(u).max() > 0 for u in updates[0])
    for plain, padded in zip(*updates):
        assert plain.shape == padded.shape
        np.testing.assert_allclose(padded, plain, rtol=1e-4, atol=1e-7)


def test_saved_weights_and_keras_files_are_those_of_the_unpadded_model(monkeypatch, tmp_path):
    plain, padded = training_model(monkeypatch, None), training_model(monkeypatch, 8)
    padded.set_weights(plain.get_weights())
    assert [w.shape for w in padded.weights] == [w.shape for w in plain.weights]
    for name, model in (("plain", plain), ("padded", padded)):
        model.save(tmp_path / f"{name}.keras")
    contents = []
    for name in ("plain", "padded"):
        with zipfile.ZipFile(tmp_path / f"{name}.keras") as archive:
            # Keras numbers shared objects by their id() in this process: the one difference two saves may have.
            config = re.sub(rb'"shared_object_id": \d+', b"", archive.read("config.json"))
            contents.append((config, h5_arrays(archive.read("model.weights.h5"))))
    assert contents[0] == contents[1]
    assert b"channel_multiple" not in contents[0][0]


def h5_arrays(data):
    arrays = {}
    with h5py.File(io.BytesIO(data)) as weights:
        weights.visititems(lambda key, item: arrays.__setitem__(key, np.asarray(item).tobytes())
                           if isinstance(item, h5py.Dataset) else None)
    return arrays


@pytest.mark.parametrize("text, multiple", [("", None), ("1", None), ("8", 8), (" 4 ", 4)])
def test_the_environment_variable_is_read_as_a_multiple(monkeypatch, text, multiple):
    monkeypatch.setenv(channel_alignment.ENV, text)
    assert channel_alignment.channel_multiple_from_environment() == multiple


@pytest.mark.parametrize("text", ["0", "-8", "eight", "8.5"])
def test_a_bad_multiple_is_refused_with_the_variables_name(monkeypatch, text):
    monkeypatch.setenv(channel_alignment.ENV, text)
    with pytest.raises(ValueError, match=channel_alignment.ENV):
        channel_alignment.channel_multiple_from_environment()


def test_every_convolution_is_padded_to_the_multiple(monkeypatch, frames):
    x, kernel = channel_alignment.pad_input_channels(np.ones((1, 4, 4, 3), "float32"),
                                                     np.ones((3, 3, 3, 5), "float32"), 8)
    assert tuple(x.shape) == (1, 4, 4, 8) and tuple(kernel.shape) == (3, 3, 8, 5)
    assert np.all(np.asarray(x)[..., 3:] == 0) and np.all(np.asarray(kernel)[:, :, 3:] == 0)
    # The channels_first views eager torch's convolutions take (feature_maps): their channels are the second axis.
    x, kernel = channel_alignment.pad_input_channels(np.ones((1, 3, 4, 4), "float32"),
                                                     np.ones((3, 3, 3, 5), "float32"), 8, channels_first=True)
    assert tuple(x.shape) == (1, 8, 4, 4) and tuple(kernel.shape) == (3, 3, 8, 5)
    assert np.all(np.asarray(x)[:, 3:] == 0) and np.all(np.asarray(x)[:, :3] == 1)
    from prednet_keras.layers import lotter

    seen = []

    def spy(x, kernel, multiple, channels_first=False):
        padded = channel_alignment.pad_input_channels(x, kernel, multiple, channels_first)
        seen.append((int(kernel.shape[2]), int(padded[0].shape[1 if channels_first else -1]), int(padded[1].shape[2])))
        return padded

    monkeypatch.setattr(lotter, "pad_input_channels", spy)
    training_model(monkeypatch, 8)(frames)
    # The gates (15 and 16 channels), Ahat (3, 6) and A (6) convolutions of every step the backend ran or traced:
    # the NT steps where they run one by one, one step where JAX traces its scan once; a backend may trace a step
    # once more to learn its shapes.
    assert sorted(set(seen)) == [(3, 8, 8), (6, 8, 8), (15, 16, 16), (16, 16, 16)]
    assert len(seen) >= 5 and len(seen) % 5 == 0


def test_padding_makes_no_keras_operation():
    """Keras' ops.pad made a named `Pad` operation at every call; registering its name wrote Keras' table of names,
    a side effect that broke torch.compile's graph and recompiled the step at every step. The zeros are
    concatenated now: the table is as it was."""
    from keras.src.backend.common import global_state

    names = global_state.get_global_attribute("object_name_uids")
    before = dict(names) if names is not None else {}
    channel_alignment.pad_input_channels(np.ones((2, 4, 4, 3), "float32"), np.ones((3, 3, 3, 5), "float32"), 8)
    channel_alignment.pad_input_channels(np.ones((2, 3, 4, 4), "float32"), np.ones((3, 3, 3, 5), "float32"), 8,
                                         channels_first=True)
    names = global_state.get_global_attribute("object_name_uids")
    assert (dict(names) if names is not None else {}) == before
