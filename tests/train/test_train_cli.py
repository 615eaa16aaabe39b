"""prednet-train end to end: the run folder, resume after a kill, and refusals."""

import importlib.util
import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from prednet_keras import backends
from prednet_keras.session import folder as run_folders
from prednet_keras.models.starting_point import read_initial_weights
from prednet_keras.cli.train import main as train_main
from tests.train.conftest import TINY, train

# Slow (real prednet-train runs in subprocesses): in the full suite, not in the fast loop (pytest -m "not slow").
pytestmark = pytest.mark.slow


def _history(folder):
    return run_folders.RunFolder(folder).read_history()


def _without_timing(rows):
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


def test_run_folder_holds_everything(trained_run):
    folder, result = trained_run
    names = {p.name for p in folder.iterdir()}
    assert {"manifest.json", "history.csv", "model.keras", "state.json", "loss.png", "initial_weights.h5"} <= names
    assert [p.name for p in (folder / "checkpoints").iterdir()] == ["epoch-0002.weights.h5"]
    assert not [n for n in names if ".tmp" in n]

    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    options = manifest["options"]
    assert (options["nt"], options["epochs"], options["steps_per_epoch"], options["batch_size"]) == (4, 2, 2, 2)
    assert options["lr_drop_epoch"] == 1 and options["stack_sizes"] == [3, 4, 8]
    assert manifest["runtime"]["requested"]["deterministic"] is True
    assert manifest["runtime"]["effective"]["deterministic"] is True
    assert manifest["runtime"]["effective"]["device"] == "cpu"
    assert "cpu" in manifest["fingerprint"] and "packages" in manifest["fingerprint"]
    seeds = dict(manifest["seeds"])
    order_checksum = seeds.pop("data_order_checksum")
    assert seeds == {"seed": 0, "initial_weights": 0, "data_order": 0}
    assert len(order_checksum) == 64 and int(order_checksum, 16) >= 0
    # Final weights in the backend-independent checksum, for the study's determinism audit.
    assert len(manifest["result"]["weights_checksum"]) == 64
    # The model started from the seed's numpy weights, not Keras' own initialisation.
    _, info = read_initial_weights(folder / "initial_weights.h5")
    assert manifest["initial_weights"]["checksum"] == info["checksum"] and info["seed"] == 0
    assert manifest["data"]["train"]["checksum"].startswith("sha256:")
    assert manifest["data"]["val"]["sequences"] == 4
    # 48 frames, the last quarter held out for validation
    assert manifest["data"]["train"]["frames"] == 36 and manifest["data"]["val"]["frames"] == 12
    assert manifest["model"]["kwargs"]["stack_sizes"] == [3, 4, 8]
    assert options["unroll"] is True and manifest["model"]["kwargs"]["unroll"] is True
    assert manifest["result"]["epochs_completed"] == 2

    rows = _history(folder)
    assert [(r["kind"], r["epoch"], r["step"]) for r in rows] == [
        ("step", 1, 1), ("step", 1, 2), ("epoch", 1, 2), ("step", 2, 1), ("step", 2, 2), ("epoch", 2, 2),
    ]
    epochs = [r for r in rows if r["kind"] == "epoch"]
    assert all(r["val_loss"] > 0 for r in epochs)
    assert [r["lr"] for r in epochs] == [1e-3, pytest.approx(1e-4)]
    # The epoch's loss is the mean of its steps' losses.
    for epoch in (1, 2):
        steps = [r["loss"] for r in rows if r["kind"] == "step" and r["epoch"] == epoch]
        assert np.mean(steps) == pytest.approx(epochs[epoch - 1]["loss"], rel=1e-5)
    # --quiet: one line per epoch, no progress bar.
    assert result.stdout.count("epoch 1/2") == 1 and result.stdout.count("epoch 2/2") == 1
    assert "━" not in result.stdout


def test_best_model_loads_and_is_the_best_epoch(trained_run):
    import keras

    import prednet_keras  # noqa: F401

    folder, _ = trained_run
    model = keras.saving.load_model(folder / "model.keras")
    assert getattr(model, "optimizer", None) is None  # model.keras carries no optimizer state
    state = json.loads((folder / "state.json").read_text())
    best = min((r for r in _history(folder) if r["kind"] == "epoch"), key=lambda r: r["val_loss"])
    assert state["best_epoch"] == best["epoch"]


def test_resume_after_a_kill_continues_the_same_history(trained_run, weights_dir, tiny_npz):
    reference, _ = trained_run
    folder = weights_dir / "killed"
    args = TINY + ["--data", tiny_npz, "--quiet", "-o", folder]
    killed = train(args, env={"PREDNET_TEST_KILL_AT": "2:1"})
    assert killed.returncode == 137, killed.stderr
    assert run_folders.RunFolder(folder).completed_epochs() == 1
    # A step of epoch 2 was recorded before the kill; resuming drops it.
    assert _history(folder)[-1]["epoch"] == 2
    assert json.loads((folder / "manifest.json").read_text())["status"] == "running"

    resumed = train(["--resume", "--quiet", "-o", folder])
    assert resumed.returncode == 0, resumed.stderr
    assert "Resuming after epoch 1 of 2" in resumed.stdout
    assert _without_timing(_history(folder)) == _without_timing(_history(reference))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert [s["start_epoch"] for s in manifest["sessions"]] == [0, 1]
    assert manifest["sessions"][0]["status"] == "killed" and manifest["sessions"][1]["end_epoch"] == 2
    # The first process had PREDNET_TEST_KILL_AT set; the environment record keeps only the variables that
    # change numerics or placement, so both sessions ran in the same recorded environment.
    assert manifest["sessions"][1]["effective"] == manifest["sessions"][1]["fingerprint"] == "same as the run's"
    assert "PREDNET_TEST_KILL_AT" not in json.dumps(manifest)


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_another_backend_starts_alike_and_follows_the_same_path(backend, trained_run, weights_dir, tiny_npz):
    # On JAX a step returns before it is done: the recorder writes each step's row
    # after the next step is dispatched, and the history must come out the same.
    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"{backend} not installed")
    reference, _ = trained_run
    folder = weights_dir / backend
    result = train(TINY + ["--data", tiny_npz, "--backend", backend, "--quiet", "-o", folder])
    assert result.returncode == 0, result.stderr
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["runtime"]["effective"]["backend"] == backend
    # JAX compiles the first step; eager torch compiles nothing and is not announced as compiling.
    assert ("Compiling the training step" in result.stdout) is (backend == "jax"), result.stdout
    reference_manifest = json.loads((reference / "manifest.json").read_text())
    assert manifest["initial_weights"]["checksum"] == reference_manifest["initial_weights"]["checksum"]
    ours, theirs = _history(folder), _history(reference)
    assert [(r["kind"], r["epoch"], r["step"]) for r in ours] == [(r["kind"], r["epoch"], r["step"]) for r in theirs]
    # Same weights, same batches: only float rounding separates the backends.
    for a, b in zip(ours, theirs):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4)


def test_bfloat16_run_records_its_precision_follows_float32_and_resumes_as_it_started(trained_run, weights_dir,
                                                                                     tiny_npz):
    reference, _ = trained_run
    folder = weights_dir / "bf16"
    args = TINY + ["--data", tiny_npz, "--precision", "mixed_bfloat16", "--quiet", "-o", folder]
    killed = train(args, env={"PREDNET_TEST_KILL_AT": "2:1"})
    assert killed.returncode == 137, killed.stderr
    resumed = train(["--resume", "--quiet", "-o", folder])
    assert resumed.returncode == 0, resumed.stderr
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["runtime"]["requested"]["precision"] == "mixed_bfloat16"
    assert manifest["runtime"]["effective"]["precision"] == "mixed_bfloat16"
    assert manifest["runtime"]["effective"]["bf16_support"].startswith("CPU")
    assert manifest["sessions"][1]["effective"] == "same as the run's"
    # Same initial weights and batches as the float32 run: the losses follow it to bfloat16's
    # 8 significant bits, and fall.
    ours, theirs = _history(folder), _history(reference)
    assert [(r["kind"], r["epoch"], r["step"]) for r in ours] == [(r["kind"], r["epoch"], r["step"]) for r in theirs]
    for a, b in zip(ours, theirs):
        assert a["loss"] == pytest.approx(b["loss"], rel=2e-2)
        assert a["loss"] != b["loss"]
    epochs = [r for r in ours if r["kind"] == "epoch"]
    assert epochs[-1]["val_loss"] < epochs[0]["val_loss"]
    result = _invoke(["--resume", "-o", folder, "--precision", "float32"])
    assert result.exit_code != 0 and "--precision float32 differs from this run's mixed_bfloat16" in result.output
    # The exported model keeps the policy it trained with; its weights are float32.
    import keras

    import prednet_keras

    layer = prednet_keras.find_prednet(keras.saving.load_model(folder / "model.keras"))
    assert layer.dtype_policy.name == "mixed_bfloat16"
    assert {keras.backend.standardize_dtype(v.dtype) for v in layer.weights} == {"float32"}


def test_augmented_run_records_it_and_trains_on_changed_sequences(trained_run, weights_dir, tiny_npz):
    reference, _ = trained_run
    folder = weights_dir / "augmented"
    result = train(TINY + ["--data", tiny_npz, "--augment", "flip", "--augment", "reverse", "--quiet", "-o", folder])
    assert result.returncode == 0, result.stderr
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["options"]["augment"] == ["flip", "reverse"] == manifest["schedule"]["augment"]
    reference_manifest = json.loads((reference / "manifest.json").read_text())
    # Same start and order of sequences; the first batch's coins (seed 0) flip at least one of its sequences.
    assert manifest["initial_weights"]["checksum"] == reference_manifest["initial_weights"]["checksum"]
    assert manifest["seeds"] == reference_manifest["seeds"]
    ours, theirs = _history(folder), _history(reference)
    assert ours[0]["loss"] != pytest.approx(theirs[0]["loss"], rel=1e-6)
    # Validation sequences are never augmented: they are the reference's, so only the weights differ.
    assert manifest["data"]["val"] == reference_manifest["data"]["val"]
    # Resuming with the same augmentations, in another order, is the same run (refused only because it is
    # complete); with others it is refused for the difference.
    same = _invoke(["--resume", "-o", folder, "--augment", "reverse", "--augment", "flip", "--quiet"])
    assert same.exit_code == 1 and "is complete (2 of 2 epochs)" in same.output, same.output
    assert _history(folder) == ours  # nothing trained, nothing lost
    other = _invoke(["--resume", "-o", folder, "--augment", "flip"])
    assert other.exit_code != 0 and "--augment flip differs from this run's" in other.output, other.output


def test_default_data_is_the_embedded_video_and_overwrite_replaces(tmp_path):
    folder = tmp_path / "embedded"
    old = run_folders.RunFolder(folder)
    old.create()
    old.write_manifest({"status": "complete", "options": {}})
    (folder / "model.keras").write_bytes(b"old model")
    result = train(
        ["--size", "32x32", "--stack-sizes", "3,4,8", "--nt", "4", "--epochs", "1", "--steps-per-epoch", "1",
         "--batch-size", "1", "--val-sequences", "2", "--lr", "0.002", "--overwrite", "-o", folder]
    )
    assert result.returncode == 0, result.stderr
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["data"]["train"]["source"] == "embedded:train"
    assert manifest["data"]["val"]["source"] == "embedded:val"
    assert manifest["data"]["train"]["frame_shape"] == [32, 32, 3]
    assert manifest["options"]["lr"] == 0.002 and manifest["schedule"]["lr_drop_epoch"] == 0
    assert (folder / "model.keras").read_bytes() != b"old model"
    # The old run was kept aside until the new one had an epoch, then deleted; beside the run, only its lock.
    assert "Replaced the old run in" in result.stderr and "kept until the new run completed epoch 1" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [".prednet-locks", "embedded"]
    assert [p.name for p in (tmp_path / ".prednet-locks").iterdir()] == ["embedded.lock"]
    # A 1-epoch run drops the rate after epochs // 2 = 0 epochs: said, and recorded.
    assert "Learning rate: 0.0002 for epoch 1 (dropped after epochs // 2 = 0 of 1" in result.stdout
    assert manifest["schedule"]["lr_by_epoch"] == "0.0002 for epoch 1"
    assert "kitti_train.py" in manifest["schedule"]["lr_drop_epoch_rule"]
    # Not a terminal: the silent phases and every epoch still get their lines; the first steps are announced
    # where they compile (an eager torch step is not).
    for line in ("Loading data", "epoch 1/1", "Done: 1 epoch completed in"):
        assert line in result.stdout, result.stdout
    (session,) = manifest["sessions"]
    compiles = backends.named(manifest["runtime"]["effective"]["backend"]).steps_compile(session["jit_compile"])
    for line in ("Compiling the training step", "first training step done in", "first validation done in"):
        assert (line in result.stdout) is compiles, result.stdout


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU may be visible here")
def test_missing_gpu_is_an_error_not_a_cpu_run(tmp_path):
    folder = tmp_path / "gpu"
    result = train(TINY + ["--size", "32x32", "--device", "gpu", "-o", folder])
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "GPU" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not folder.exists()  # nothing was trained: nothing left to block the next try


def test_bad_data_file_is_one_line(tmp_path):
    bad = tmp_path / "frames.npz"
    bad.write_text("not an archive")
    result = train(TINY + ["--data", bad, "-o", tmp_path / "run"])
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert sum(line.startswith("Error:") for line in result.stderr.splitlines()) == 1, result.stderr


def _invoke(args):
    return CliRunner().invoke(train_main, [str(a) for a in args])


def test_an_output_that_cannot_be_made_is_refused_before_anything_is_written(tmp_path):
    # Issue 39: it was refused by the lock file's creation, as "[Errno 20] Not a directory: .../.prednet-locks".
    (tmp_path / "afile").write_text("x")
    result = _invoke(TINY + ["-o", tmp_path / "afile" / "run"])
    assert result.exit_code == 1
    assert f"Error: {tmp_path / 'afile' / 'run'} cannot be made: {tmp_path / 'afile'} is a file, not a folder." \
        in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
    assert (tmp_path / "afile").read_text() == "x"


def test_a_file_error_in_the_way_of_a_folder_names_the_file(tmp_path):
    from prednet_keras.runtime.errors import one_line

    (tmp_path / "afile").write_text("x")
    wanted = tmp_path / "afile" / "sub" / ".prednet-locks"
    with pytest.raises(NotADirectoryError) as raised:
        wanted.mkdir(parents=True)
    assert one_line(raised.value) == f"{tmp_path / 'afile'} is a file, not a folder (needed for {raised.value.filename})"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--size", "30x30", "--stack-sizes", "3,4,8"], "not divisible by 2**2"),
        (["--size", "big"], "not a frame size"),
        (["--stack-sizes", "3,x"], "comma-separated list of integers"),
        (["--layer-loss", "1,0.5"], "2 values but the model has 4 layers"),
        (["--layer-loss", "L_2"], "L_0, L_all"),
        (["--nt", "1"], "--nt"),
        (["--augment", "rotate"], "'rotate' is not one of 'flip', 'reverse'"),
        (["--backend", "theano"], "theano"),
        (["--device", "tpu"], "Unknown device"),
        (["--data", "/no/such/frames"], "no such file"),
        (["--init-weights", "/no/such/weights.h5"], "no such file"),
        (["--resume"], "--resume needs --output"),
        (["--resume", "--overwrite", "-o", "x"], "contradict"),
        (["--precision", "float16"], "'float16' is not one of 'float32', 'mixed_bfloat16'"),
        (["--model", "autoencoder", "--precision", "mixed_bfloat16"], "--precision mixed_bfloat16 is for --model prednet only"),
    ],
)
def test_bad_options_are_one_clear_line(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    result = _invoke(args)
    assert result.exit_code != 0
    assert message in result.output, result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "weights").exists()


def test_existing_run_is_never_overwritten(trained_run):
    folder, _ = trained_run
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    result = _invoke(TINY + ["-o", folder])
    assert result.exit_code != 0
    assert "already holds a run (2 epochs completed)" in result.output
    assert "--resume" in result.output and "--overwrite" in result.output
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_resume_refuses_changed_options_and_missing_runs(trained_run, tmp_path):
    folder, _ = trained_run
    result = _invoke(["--resume", "-o", folder, "--lr", "0.01"])
    assert result.exit_code != 0 and "--lr 0.01 differs from this run's 0.001" in result.output
    result = _invoke(["--resume", "-o", folder, "--epochs", "1"])
    assert result.exit_code != 0 and "fewer than the 2 already completed" in result.output
    result = _invoke(["--resume", "-o", tmp_path / "nothing"])
    assert result.exit_code != 0 and "Nothing to resume" in result.output


def test_runs_recorded_before_unroll_existed_resume_with_the_loop_rolled():
    from prednet_keras.options.recipe import TrainConfig

    assert TrainConfig().unroll is True
    assert TrainConfig.from_dict(TrainConfig().to_dict()) == TrainConfig()
    old = {k: v for k, v in TrainConfig().to_dict().items() if k != "unroll"}
    assert TrainConfig.from_dict(old).unroll is False
