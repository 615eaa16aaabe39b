"""A command that is refused or fails never damages a run folder (issue 23).

Every case hashes the folder (every file's bytes, every sub-folder) before and
after the command and asserts it is unchanged, then checks the exit status and
the one-line message. Folders are the tests' own copies of a tiny trained run.
"""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from prednet_keras.cli.train import main as train_main
from prednet_keras.options.recipe import TrainConfig, lr_drop_rule, schedule_text
from prednet_keras.session import folder as run_folders
from tests.train.conftest import TINY, folder_hash

REPOSITORY = Path(__file__).resolve().parents[2]


def _invoke(args):
    return CliRunner().invoke(train_main, [str(a) for a in args])


def _refused(result, message):
    """Exit status 1, one `Error:` line holding `message`, no traceback."""
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0], result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("extra", [[], ["--epochs", "2"], ["--quiet"]])
def test_resume_of_a_complete_run_is_refused_and_changes_nothing(copy_of_run, extra):
    before = folder_hash(copy_of_run)
    result = _invoke(["--resume", "-o", copy_of_run] + extra)
    _refused(result, f"{copy_of_run} is complete (2 of 2 epochs): nothing to resume")
    assert "raise --epochs above 2" in result.output
    assert folder_hash(copy_of_run) == before


def test_resume_and_overwrite_of_a_shipped_run_are_refused_and_change_nothing(copy_of_run, tmp_path):
    (copy_of_run / run_folders.SHIPPED_MARKER).write_text("the project's published model\n")
    before = folder_hash(copy_of_run)
    for args in (["--resume", "-o", copy_of_run], ["--resume", "--epochs", "5", "-o", copy_of_run],
                 TINY + ["--overwrite", "-o", copy_of_run]):
        result = _invoke(args)
        _refused(result, f"{copy_of_run} is a shipped model (it holds a SHIPPED marker file)")
        assert folder_hash(copy_of_run) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_the_shipped_model_is_recognised_without_a_marker(tmp_path):
    from prednet_keras import pretrained

    # Read only: the package's own run folders are shipped by their place.
    assert run_folders.shipped_reason(pretrained.path()) == "it lies inside the installed prednet_keras package"
    assert run_folders.shipped_reason(REPOSITORY / "weights" / "my-run") is None
    assert run_folders.shipped_reason(tmp_path) is None


def _no_manifest(folder):
    (folder / "manifest.json").unlink()


def _other_format(folder):
    (folder / "manifest.json").write_text(json.dumps({"format": "someone-elses-run", "status": "complete"}))


def _broken_manifest(folder):
    (folder / "manifest.json").write_text('{"status": "compl')


def _records_without_checkpoint(folder):
    # What the shipped model looks like: a manifest of 2 completed epochs, no state.json or checkpoints.
    (folder / "state.json").unlink()
    shutil.rmtree(folder / "checkpoints")


def _checkpoint_missing(folder):
    shutil.rmtree(folder / "checkpoints")


@pytest.mark.parametrize(
    "damage, message",
    [
        (_no_manifest, "is not a run folder (no manifest.json)"),
        (_other_format, "is not a prednet-keras run manifest (format 'someone-elses-run'"),
        (_broken_manifest, "is not valid JSON"),
        (_records_without_checkpoint, "records 2 completed epochs (result.epochs_completed) but"),
        (_checkpoint_missing, "names"),
    ],
)
def test_resume_of_a_foreign_folder_is_refused_and_changes_nothing(copy_of_run, damage, message):
    damage(copy_of_run)
    before = folder_hash(copy_of_run)
    result = _invoke(["--resume", "--epochs", "4", "-o", copy_of_run])
    _refused(result, message)
    assert folder_hash(copy_of_run) == before


@pytest.mark.parametrize(
    "args, status, message",
    [
        (["--data", "/no/such/frames.npz"], 1, "Error: --data: no such file or folder: /no/such/frames.npz"),
        (["--size", "30x30"], 2, "Error: Frame size 30x30 (H x W) does not suit a 3-layer PredNet"),
    ],
)
def test_overwrite_refused_before_it_starts_keeps_the_old_run(copy_of_run, tmp_path, args, status, message):
    before = folder_hash(copy_of_run)
    result = _invoke(TINY + args + ["--overwrite", "-o", copy_of_run])
    assert result.exit_code == status and message in result.output and "Traceback" not in result.output, result.output
    assert folder_hash(copy_of_run) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


@pytest.mark.slow
def test_overwrite_whose_new_run_fails_before_its_first_epoch_keeps_the_old_run(copy_of_run, tmp_path):
    bad = tmp_path / "frames.npz"
    bad.write_text("not an archive")
    before = folder_hash(copy_of_run)
    # The data is read by the training process, after the old run was moved aside.
    result = _invoke(TINY + ["--data", bad, "--overwrite", "-o", copy_of_run])
    assert result.exit_code == 1, result.output
    assert (f"(the old run is kept as {tmp_path / '.run.previous'} until the new one completes epoch 1)"
            in result.output)
    assert f"The new run failed before completing an epoch; the old run in {copy_of_run} is unchanged." in result.output
    assert folder_hash(copy_of_run) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".prednet-locks", "frames.npz", "run"]


@pytest.mark.slow
def test_new_run_failing_in_an_empty_folder_leaves_it_empty(tmp_path):
    bad = tmp_path / "frames.npz"
    bad.write_text("not an archive")
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _invoke(TINY + ["--data", bad, "-o", empty])
    assert result.exit_code == 1, result.output
    assert f"(the new run failed before completing an epoch; {empty} is empty again, as it was)" in result.output
    assert empty.is_dir() and not any(empty.iterdir())
    assert "removed" not in result.output


def _fake_run(path, epochs_done):
    folder = run_folders.RunFolder(path)
    folder.create()
    folder.write_manifest({"status": "complete" if epochs_done else "running", "options": {"epochs": 2}})
    if epochs_done:
        checkpoint = folder.checkpoint_path(epochs_done)
        checkpoint.parent.mkdir()
        checkpoint.write_bytes(b"weights")
        folder.write_state({"epoch": epochs_done, "checkpoint": str(checkpoint.relative_to(folder.path))})
    return folder


def test_replacement_rolls_back_commits_and_recovers_after_a_kill(tmp_path):
    old = _fake_run(tmp_path / "run", 2)
    before = folder_hash(old.path)
    replacement = run_folders.Replacement(old)
    replacement.begin()
    assert not old.path.exists() and replacement.aside == tmp_path / ".run.previous"
    _fake_run(old.path, 0)
    replacement.rollback()
    assert folder_hash(old.path) == before and not replacement.aside.exists()

    # A command killed (kill -9) before its new run completed an epoch: the next command puts the old run back.
    replacement.begin()
    _fake_run(old.path, 0)
    message = run_folders.Replacement(old).recover()
    assert message.startswith(f"restored {old.path} from {replacement.aside}")
    assert folder_hash(old.path) == before

    # Killed after the new run completed an epoch: the old run was due to go, and goes.
    replacement.begin()
    new = _fake_run(old.path, 1)
    new_hash = folder_hash(new.path)
    message = run_folders.Replacement(old).recover()
    assert message.startswith(f"removed {replacement.aside}") and not replacement.aside.exists()
    assert folder_hash(new.path) == new_hash
    assert run_folders.Replacement(old).recover() is None

    # A protocol counted in updates removes its checkpoints once complete: a complete manifest is what it has to
    # show.
    replacement.begin()
    study = run_folders.RunFolder(old.path)
    study.create()
    study.write_manifest({"status": "complete", "options": {"model": "autoencoder"}})
    assert study.has_results()
    assert run_folders.Replacement(old).recover().startswith(f"removed {replacement.aside}")


def test_learning_rate_schedule_is_said_in_words():
    four = TrainConfig(epochs=4).resolved()
    assert schedule_text(four) == "0.001 for epochs 1-2, 0.0001 for epochs 3-4"
    assert schedule_text(TrainConfig(epochs=4, lr_drop_epoch=0).resolved()) == "0.0001 for epochs 1-4"
    assert schedule_text(TrainConfig(epochs=3, lr_drop_epoch=9).resolved()) == "0.001 for epochs 1-3"
    assert schedule_text(TrainConfig(epochs=3).resolved()) == "0.001 for epoch 1, 0.0001 for epochs 2-3"
    assert lr_drop_rule(None, 4).startswith("dropped after epochs // 2 = 2 of 4, kitti_train.py's rule")
    assert lr_drop_rule(3, 4) == "dropped after epoch 3, as --lr-drop-epoch 3 asked"
    help_text = _invoke(["--help"]).output
    assert "epochs // 2" in help_text and "a 4-epoch run trains epochs 1-2 at --lr and 3-4" in " ".join(help_text.split())


def test_the_run_records_and_says_its_schedule(trained_run):
    folder, result = trained_run
    schedule = json.loads((folder / "manifest.json").read_text())["schedule"]
    assert schedule["lr_by_epoch"] == "0.001 for epoch 1, 0.0001 for epoch 2"
    assert schedule["lr_drop_epoch_rule"].startswith("dropped after epochs // 2 = 1 of 2")
    assert "Learning rate: 0.001 for epoch 1, 0.0001 for epoch 2 (dropped after epochs // 2" in result.stdout
    assert "Done: 2 epochs completed in" in result.stdout


def _key_paths(value, prefix=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield prefix + (key,)
            yield from _key_paths(item, prefix + (key,))


@pytest.mark.slow
def test_resume_with_more_epochs_keeps_every_manifest_field(copy_of_run):
    before = json.loads((copy_of_run / "manifest.json").read_text())
    assert before["result"]["weights_checksum"] and before["result"]["model_weights_checksum"]
    result = _invoke(["--resume", "--epochs", "3", "--quiet", "-o", copy_of_run])
    assert result.exit_code == 0, result.output
    after = json.loads((copy_of_run / "manifest.json").read_text())
    assert [path for path in _key_paths(before) if path not in set(_key_paths(after))] == []
    assert after["status"] == "complete" and after["result"]["epochs_completed"] == 3
    assert after["result"]["weights_checksum"] != before["result"]["weights_checksum"]
    assert after["resumes"][-1]["after_epoch"] == 2 and after["epochs_changed"] == [{"from": 2, "to": 3, "at_epoch": 2}]
    assert after["options"]["epochs"] == 3 and after["sessions"][:1] == before["sessions"]


def test_resume_refuses_a_best_model_that_is_not_the_one_recorded(tmp_path):
    # Issue 39: a resume did not notice a model.keras other than the one state.json records for the best
    # epoch; training on would have written a manifest vouching for a file the run did not make.
    import keras

    from prednet_keras.session.recipe_training import check_best_model
    from prednet_keras.models.starting_point import weights_checksum

    def tiny():  # functional, as model.keras is, with fixed names: the checksum covers the weights' names
        inputs = keras.Input((2,))
        return keras.Model(inputs, keras.layers.Dense(1, name="out")(inputs), name="tiny")

    model = tiny()
    folder = run_folders.RunFolder(tmp_path)
    model.save(folder.model_path)
    state = {"best_epoch": 1, "model_weights_checksum": weights_checksum(model)}
    check_best_model(folder, state)  # the recorded file: no complaint

    other = tiny()
    other.get_layer("out").kernel.assign(model.get_layer("out").kernel + 1.0)
    other.save(folder.model_path)
    with pytest.raises(ValueError, match=r"model.keras does not hold the weights .*state.json \(epoch 1, the best\)"):
        check_best_model(folder, state)
    folder.model_path.unlink()
    with pytest.raises(ValueError, match=r"model.keras is missing: it held the best epoch's model"):
        check_best_model(folder, state)
