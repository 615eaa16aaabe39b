"""The run folder, the training config and the order of training batches (no training)."""

import json

import numpy as np
import pytest

from prednet_keras.files import diskwrite
from prednet_keras.options.recipe import TrainConfig, learning_rate_at
from prednet_keras.session import folder as run_folders
from prednet_keras.session.training_data import (
    EpochBatches,
    augment_sequence,
    pass_order,
)


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / "x.json"
    diskwrite.atomic_write_json(target, {"a": 1, "inf": float("inf")})
    assert json.loads(target.read_text()) == {"a": 1, "inf": None}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_interrupted_write_keeps_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "model.keras"
    target.write_bytes(b"complete old model")

    def crash_midway(temporary):
        with open(temporary, "wb") as handle:
            handle.write(b"half a mod")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        diskwrite.write_through_temporary(target, crash_midway)
    assert target.read_bytes() == b"complete old model"
    assert [p.name for p in tmp_path.iterdir()] == ["model.keras"]


def test_temporary_keeps_the_suffix_keras_needs(tmp_path):
    seen = []
    diskwrite.write_through_temporary(tmp_path / "checkpoints" / "epoch-0001.weights.h5", lambda p: (seen.append(p), open(p, "wb").close()))
    assert seen[0].endswith(".weights.h5")
    assert (tmp_path / "checkpoints" / "epoch-0001.weights.h5").is_file()


def test_history_round_trip_and_truncation(tmp_path):
    folder = run_folders.RunFolder(tmp_path)
    with folder.open_history() as history:
        for epoch in (1, 2):
            history.write(kind="step", epoch=epoch, step=1, global_step=epoch, loss=0.5 / epoch, lr=1e-3)
            history.write(kind="epoch", epoch=epoch, step=1, global_step=epoch, loss=0.5 / epoch, val_loss=0.6, lr=1e-3)
        history.write(kind="step", epoch=3, step=1, global_step=3, loss=0.1, lr=1e-4)
    rows = folder.read_history()
    assert len(rows) == 5 and rows[0]["val_loss"] is None and rows[1]["val_loss"] == 0.6
    kept = folder.truncate_history(2)
    assert [r["epoch"] for r in kept] == [1, 1, 2, 2]
    assert folder.read_history() == kept


def test_new_run_refuses_existing_run_and_foreign_folders(tmp_path):
    run = run_folders.RunFolder(tmp_path / "run")
    run.create()
    run.write_manifest({"status": "complete"})
    with pytest.raises(run_folders.RunFolderError, match="--resume.*--overwrite"):
        run.check_new(overwrite=False)
    run.check_new(overwrite=True)

    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "holiday.jpg").write_bytes(b"x")
    with pytest.raises(run_folders.RunFolderError, match="not a run folder"):
        run_folders.RunFolder(foreign).check_new(overwrite=True)
    with pytest.raises(run_folders.RunFolderError, match="not a run folder"):
        run_folders.RunFolder(foreign).create()
    assert (foreign / "holiday.jpg").exists()

    empty = tmp_path / "empty"
    empty.mkdir()
    run_folders.RunFolder(empty).check_new()


def test_find_runs(tmp_path):
    for name in ("b", "a", ".a.previous"):
        run_folders.RunFolder(tmp_path / name).create()
        run_folders.RunFolder(tmp_path / name).write_manifest({})
    (tmp_path / "notes").mkdir()
    # Hidden folders are work in progress (an old run kept aside by --overwrite), not results.
    assert [p.name for p in run_folders.find_runs(tmp_path)] == ["a", "b"]
    assert run_folders.find_runs(tmp_path / "a") == [tmp_path / "a"]
    assert run_folders.find_runs(tmp_path / "notes") == []


def test_state_must_name_an_existing_checkpoint(tmp_path):
    folder = run_folders.RunFolder(tmp_path)
    assert folder.read_state() is None and folder.completed_epochs() == 0
    folder.write_state({"epoch": 3, "checkpoint": "checkpoints/epoch-0003.weights.h5"})
    with pytest.raises(run_folders.RunFolderError, match="missing"):
        folder.read_state()


class _Sequences:
    """Stands in for a SequenceGenerator with batch_size=1: item j is sequence j."""

    def __init__(self, count):
        self.count = count

    def __len__(self):
        return self.count

    def __getitem__(self, j):
        return np.full((1, 2, 1, 1, 1), j, np.float32), np.zeros((1, 1), np.float32)


def test_batches_depend_only_on_seed_and_global_position():
    sequences = _Sequences(7)
    whole = EpochBatches(sequences, batch_size=3, steps_per_epoch=2, first_epoch=0, epochs=5, seed=4)
    resumed = EpochBatches(sequences, batch_size=3, steps_per_epoch=2, first_epoch=3, epochs=5, seed=4)
    assert len(whole) == 10 and len(resumed) == 4
    for i in range(4):
        np.testing.assert_array_equal(resumed[i][0], whole[6 + i][0])
    # Every pass over the data visits each sequence once, in a seeded order.
    stream = np.concatenate([whole.indices(b) for b in range(7)])[:21]
    for k in range(3):
        np.testing.assert_array_equal(stream[7 * k : 7 * (k + 1)], pass_order(7, 4, k))
        assert sorted(stream[7 * k : 7 * (k + 1)]) == list(range(7))
    other_seed = EpochBatches(sequences, batch_size=3, steps_per_epoch=2, first_epoch=0, epochs=5, seed=5)
    assert not all(np.array_equal(whole.indices(b), other_seed.indices(b)) for b in range(3))


def test_prefetched_batches_are_the_batches_made_on_demand():
    # Batches are made ahead in threads; reading in order, jumping back (a new iterator) or ahead must give
    # exactly the batch that index names, as making it on the spot does.
    sequences = _Sequences(7)
    reader = EpochBatches(sequences, batch_size=3, steps_per_epoch=2, first_epoch=1, epochs=6, seed=4)
    for i in [0, 1, 2, 3, 0, 1, 7, 8, 9, 2, 9]:
        np.testing.assert_array_equal(reader[i][0], reader.make(i)[0])
    assert len(reader) == 10 and reader._made == {}  # after the last batch nothing is made ahead


class _Movies:
    """Sequence j: (1, nt=3, H=2, W=3, C=1) frames whose pixel (t, y, x) holds 100 j + 10 t + 3 y + x."""

    def __len__(self):
        return 5

    def __getitem__(self, j):
        t, y, x = np.meshgrid(np.arange(3), np.arange(2), np.arange(3), indexing="ij")
        return (100 * j + 10 * t + 3 * y + x).astype(np.float32)[np.newaxis, ..., np.newaxis], np.zeros((1, 1))


def _undo(frames, original):
    """Which of (flip, reverse) turns `original` into `frames`; fails when none does."""
    for flip in (False, True):
        for reverse in (False, True):
            candidate = original[..., ::-1, :] if flip else original
            candidate = candidate[..., ::-1, :, :, :] if reverse else candidate
            if np.array_equal(candidate, frames):
                return flip, reverse
    raise AssertionError("the augmented sequence is not a flip or reversal of the original")


def test_augmented_batches_are_flips_and_reversals_drawn_from_the_seed_and_position():
    movies = _Movies()
    plain = EpochBatches(movies, batch_size=2, steps_per_epoch=3, first_epoch=0, epochs=4, seed=9)
    augmented = EpochBatches(movies, batch_size=2, steps_per_epoch=3, first_epoch=0, epochs=4, seed=9,
                             augment=("flip", "reverse"))
    drawn = []
    for b in range(len(plain)):
        original, changed = plain[b][0], augmented[b][0]
        np.testing.assert_array_equal(plain.indices(b), augmented.indices(b))  # the order is not touched
        for i in range(len(original)):
            drawn.append(_undo(changed[i : i + 1], original[i : i + 1]))
            # A flip mirrors every frame left-right; a reversal plays the frames backwards.
            flip, reverse = drawn[-1]
            expected = original[i, ::-1] if reverse else original[i]
            np.testing.assert_array_equal(changed[i], expected[:, :, ::-1] if flip else expected)
    # Both coins come up both ways over 24 sequences, independently of each other.
    assert {d[0] for d in drawn} == {False, True} and {d[1] for d in drawn} == {False, True}
    assert len(set(drawn)) == 4
    # A resumed run draws the same changes for the same stream positions.
    resumed = EpochBatches(movies, batch_size=2, steps_per_epoch=3, first_epoch=2, epochs=4, seed=9,
                           augment=("flip", "reverse"))
    for i in range(len(resumed)):
        np.testing.assert_array_equal(resumed[i][0], augmented[6 + i][0])
    # Only the named augmentations are applied.
    only_flip = EpochBatches(movies, batch_size=2, steps_per_epoch=3, first_epoch=0, epochs=4, seed=9, augment=("flip",))
    for b in range(len(plain)):
        for i, (flip, _) in enumerate(drawn[2 * b : 2 * b + 2]):
            assert _undo(only_flip[b][0][i : i + 1], plain[b][0][i : i + 1]) == (flip, False)


def test_augment_sequence_without_augmentations_returns_the_frames_themselves():
    frames = np.zeros((1, 3, 2, 2, 1))
    assert augment_sequence(frames, (), seed=0, position=5) is frames


def test_config_defaults_are_the_kitti_recipe():
    config = TrainConfig().resolved()
    assert (config.nt, config.batch_size, config.epochs, config.steps_per_epoch) == (10, 4, 150, 125)
    assert (config.lr, config.lr_drop_epoch, config.layer_loss, config.val_sequences) == (1e-3, 75, "L_0", 100)
    assert learning_rate_at(74, config) == 1e-3 and learning_rate_at(75, config) == pytest.approx(1e-4)
    kwargs = config.prednet_kwargs(3)
    assert kwargs["stack_sizes"] == (3, 48, 96, 192) and kwargs["A_filt_sizes"] == (3, 3, 3)
    assert TrainConfig().prednet_kwargs(1)["stack_sizes"][0] == 1
    assert TrainConfig.from_dict(config.to_dict()) == config
    assert config.augment == ()  # the recipe trains on the frames as they are
    augmented = TrainConfig(augment=["reverse", "flip"]).resolved()
    assert TrainConfig.from_dict(augmented.to_dict()).resolved() == augmented


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"size": (30, 40)}, "not divisible"),
        ({"layer_loss": (1.0, 0.5)}, "2 values but the model has 4"),
        ({"stack_sizes": (3, 8), "r_stack_sizes": (3,)}, "--r-stack-sizes has 1"),
        ({"filter_size": 4}, "odd"),
        ({"model": "resnet"}, "--model"),
        ({"augment": ("flip", "rotate")}, "--augment takes distinct names among flip, reverse"),
        ({"augment": ("flip", "flip")}, "--augment takes distinct names"),
    ],
)
def test_config_errors_name_the_option(changes, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**changes).resolved()


def test_stack_sizes_must_match_the_frames():
    with pytest.raises(ValueError, match="3 channel"):
        TrainConfig(stack_sizes=(1, 4)).prednet_kwargs(3)
