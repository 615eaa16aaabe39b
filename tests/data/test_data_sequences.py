"""SequenceGenerator against coxlab's data_utils.py semantics, computed by hand."""

import numpy as np
import pytest

from prednet_keras.data import DataError, FrameDataset, SequenceGenerator, open_dataset, sequence_starts, write_dataset
from tests.data.data_builders import numbered_frames

# Sources a a a a a | b b b | c c c c c c c  (15 frames), nt = 3.
SOURCES = np.array(list("aaaaabbbccccccc"))


def original_starts(sources, nt, mode):
    """The loops of coxlab's SequenceGenerator.__init__, transcribed."""
    if mode == "all":
        return [i for i in range(len(sources) - nt + 1) if sources[i] == sources[i + nt - 1]]
    starts, current = [], 0
    while current < len(sources) - nt + 1:
        if sources[current] == sources[current + nt - 1]:
            starts.append(current)
            current += nt
        else:
            current += 1
    return starts


def dataset(count=15, sources=SOURCES):
    return FrameDataset(numbered_frames(count, height=4, width=6), sources)


def test_starts_by_hand():
    assert sequence_starts(SOURCES, 3, "all").tolist() == [0, 1, 2, 5, 8, 9, 10, 11, 12]
    assert sequence_starts(SOURCES, 3, "unique").tolist() == [0, 5, 8, 11]
    assert sequence_starts(SOURCES, 6, "all").tolist() == [8, 9]
    assert sequence_starts(SOURCES, 8, "all").tolist() == []


def test_starts_match_the_original_loops():
    rng = np.random.default_rng(0)
    for _ in range(50):
        sources = np.repeat(np.arange(6), rng.integers(1, 12, 6))
        for nt in (1, 2, 5, 10):
            for mode in ("all", "unique"):
                assert sequence_starts(sources, nt, mode).tolist() == original_starts(sources, nt, mode)


def test_batches_are_frames_over_255_with_zero_targets():
    data = dataset()
    gen = SequenceGenerator(data, nt=3, batch_size=4)
    assert gen.possible_starts.tolist() == [0, 1, 2, 5, 8, 9, 10, 11, 12]
    assert len(gen) == 3  # 9 sequences: 4 + 4 + 1
    x, y = gen[1]
    assert x.dtype == np.float32 and x.shape == (4, 3, 4, 6, 3)
    expected = np.stack([data.frames[s : s + 3] for s in (8, 9, 10, 11)]).astype(np.float32) / 255
    np.testing.assert_array_equal(x, expected)
    np.testing.assert_array_equal(y, np.zeros((4, 1), np.float32))
    x_last, y_last = gen[2]
    assert x_last.shape[0] == 1 and y_last.shape == (1, 1)
    assert len(SequenceGenerator(data, nt=3, batch_size=4, drop_remainder=True)) == 2
    with pytest.raises(IndexError):
        gen[3]


def test_prediction_mode_targets_are_the_inputs():
    gen = SequenceGenerator(dataset(), nt=3, output_mode="prediction")
    x, y = gen[0]
    np.testing.assert_array_equal(x, y)


def test_shuffle_then_n_seq_and_epoch_orders():
    gen = SequenceGenerator(dataset(), nt=3, batch_size=2, shuffle=True, seed=7, N_seq=5)
    all_starts = np.array([0, 1, 2, 5, 8, 9, 10, 11, 12])
    expected = np.random.default_rng(7).permutation(all_starts)[:5]
    np.testing.assert_array_equal(gen.possible_starts, expected)
    # Epoch 0 uses that order; epoch k uses default_rng([seed, k]).permutation.
    first = gen[0][0]
    np.testing.assert_array_equal(first[:, 0, 0, 0, 0] * 255, (10 * expected[:2]) % 256)
    gen.on_epoch_end()
    assert gen.epoch == 1
    order = np.random.default_rng([7, 1]).permutation(5)
    np.testing.assert_array_equal(gen.epoch_starts(), expected[order])
    np.testing.assert_array_equal(gen[0][0][:, 0, 0, 0, 0] * 255, (10 * expected[order][:2]) % 256)
    # Same seed, same everything: a second generator jumped to epoch 1 agrees.
    other = SequenceGenerator(dataset(), nt=3, batch_size=2, shuffle=True, seed=7, N_seq=5)
    other.set_epoch(1)
    np.testing.assert_array_equal(other.epoch_starts(), gen.epoch_starts())


def test_without_shuffle_every_epoch_is_in_frame_order():
    gen = SequenceGenerator(dataset(), nt=3, N_seq=4, sequence_start_mode="unique")
    gen.on_epoch_end()
    assert gen.epoch_starts().tolist() == [0, 5, 8, 11]


def test_create_all():
    data = dataset()
    gen = SequenceGenerator(data, nt=3, sequence_start_mode="unique")
    everything = gen.create_all()
    expected = np.stack([data.frames[s : s + 3] for s in (0, 5, 8, 11)]).astype(np.float32) / 255
    np.testing.assert_array_equal(everything, expected)


def test_disk_backed_batches_equal_in_memory(tmp_path):
    data = dataset()
    path = write_dataset(tmp_path / "seq.h5", data)
    with open_dataset(path, in_memory=False) as on_disk:
        assert not on_disk.in_memory
        streamed = SequenceGenerator(on_disk, nt=3, batch_size=3, shuffle=True, seed=3)
        memory = SequenceGenerator(data, nt=3, batch_size=3, shuffle=True, seed=3)
        for i in range(len(memory)):
            np.testing.assert_array_equal(streamed[i][0], memory[i][0])
    from_path = SequenceGenerator(str(path), nt=3)
    assert from_path.N_sequences == 9


def test_too_short_and_no_start_errors():
    with pytest.raises(DataError, match="5 frames, fewer than nt=10"):
        SequenceGenerator(dataset(5, SOURCES[:5]), nt=10)
    with pytest.raises(DataError, match=r"no sequence of nt=8 frames within one source \(the longest source has 7"):
        SequenceGenerator(dataset(), nt=8)
    with pytest.raises(DataError, match="sequence_start_mode"):
        SequenceGenerator(dataset(), nt=3, sequence_start_mode="random")
    with pytest.raises(DataError, match="output_mode"):
        SequenceGenerator(dataset(), nt=3, output_mode="all")


def test_seed_is_drawn_and_kept_when_not_given():
    gen = SequenceGenerator(dataset(), nt=3, shuffle=True)
    again = SequenceGenerator(dataset(), nt=3, shuffle=True, seed=gen.seed)
    np.testing.assert_array_equal(gen.possible_starts, again.possible_starts)


def test_keras_fit_walks_epochs():
    import keras

    gen = SequenceGenerator(dataset(), nt=3, batch_size=4, shuffle=True, seed=0)
    model = keras.Sequential([keras.Input((3, 4, 6, 3)), keras.layers.Flatten(), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mae")
    seen = []

    class Record(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            seen.append(gen.epoch_starts().tolist())

    model.fit(gen, epochs=2, verbose=0, callbacks=[Record()])
    # fit resets its epoch iterator once before training (an on_epoch_end
    # call), so its epochs 0 and 1 use orders 1 and 2, as documented.
    assert gen.epoch == 3
    for order, visited in zip((1, 2), seen):
        expected = gen.possible_starts[np.random.default_rng([0, order]).permutation(gen.N_sequences)]
        assert visited == expected.tolist()


def test_disk_backed_dataset_pickles_for_worker_processes(tmp_path):
    import pickle

    path = write_dataset(tmp_path / "seq.h5", dataset())
    with open_dataset(path, in_memory=False) as on_disk:
        gen = SequenceGenerator(on_disk, nt=3, batch_size=2, shuffle=True, seed=5)
        copy = pickle.loads(pickle.dumps(gen))
        np.testing.assert_array_equal(copy[1][0], gen[1][0])
        copy.data.close()
