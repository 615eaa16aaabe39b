"""prednet-train --devices N (data-parallel on JAX) and --patience N (early stopping on val_loss)."""

import glob
import json

import numpy as np
import pytest
from click.testing import CliRunner

from prednet_keras.cli.train import main as train_main
from prednet_keras.runtime import distribution
from tests.train.conftest import TINY, train

SIMULATED = {"XLA_FLAGS": f"{distribution.CPU_DEVICES_FLAG}=4"}
# The tiny run with a batch (and a last validation batch) that 4 devices split evenly.
TINY_JAX = [a for a in TINY if a != "--deterministic"]
TINY_JAX[TINY_JAX.index("--batch-size") + 1] = "4"
# Data-parallel sums each gradient in another order: the weights may differ by round-off, no more.
WEIGHTS_ATOL = 1e-6


def _invoke(args):
    return CliRunner().invoke(train_main, [str(a) for a in args])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--devices", "2", "--backend", "tensorflow"], "data-parallel training exists on the JAX backend"),
        (["--devices", "2", "--backend", "torch"], "data-parallel training exists on the JAX backend"),
        (["--devices", "3", "--backend", "jax"], "--batch-size 4 does not divide by --devices 3"),
        (["--devices", "2", "--backend", "jax", "--val-sequences", "5"], "ends in a validation batch of 1"),
        (["--devices", "2", "--backend", "jax", "--device", "gpu:0"], "one GPU was named; use --device gpu"),
        (["--devices", "0"], "0 is not in the range x>=1"),
        (["--devices", "2", "--model", "autoencoder"], "--devices does not apply to --model autoencoder"),
        (["--patience", "0"], "0 is not in the range x>=1"),
        (["--patience", "2", "--val-sequences", "0"], "--patience watches the validation loss"),
        (["--patience", "2", "--model", "prednet-chainer"], "--patience does not apply to --model prednet-chainer"),
    ],
)
def test_bad_devices_and_patience_are_one_clear_line(tmp_path, monkeypatch, args, message):
    pytest.importorskip("jax")
    monkeypatch.chdir(tmp_path)
    result = _invoke(args)
    assert result.exit_code != 0
    assert message in result.output, result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "weights").exists()


def test_batch_and_request_checks():
    assert distribution.batch_problem(4, 100, 1) is None
    assert distribution.batch_problem(8, 100, 4) is None  # 12 batches of 8, then 4: each splits in 4
    assert "validation batch of 2" in distribution.batch_problem(8, 98, 4)
    assert distribution.request_problem("tensorflow", "cpu", 1) is None
    assert distribution.request_problem("jax", "gpu", 8) is None


def test_runtime_config_records_devices_and_reads_old_records():
    from prednet_keras.runtime import RuntimeConfig

    assert RuntimeConfig(backend="jax", devices=4).to_dict()["devices"] == 4
    old = RuntimeConfig().to_dict()
    del old["devices"]
    assert RuntimeConfig.from_dict(old).devices == 1
    with pytest.raises(ValueError, match="devices"):
        RuntimeConfig(devices=0)


class _Model:
    stop_training = False


def _epochs(callback, values, first=0):
    callback.set_model(_Model())
    callback.on_train_begin()
    for epoch, value in enumerate(values, start=first):
        callback.on_epoch_end(epoch, {"val_loss": value, "loss": value})
        if callback.model.stop_training:
            return epoch + 1
    return None


def test_early_stopping_stops_after_patience_and_a_resume_continues_the_count():
    from prednet_keras.session.early_stopping import ResumableEarlyStopping

    losses = [1.0, 0.5, 0.6, 0.7, 0.4]
    whole = ResumableEarlyStopping(2, epochs=10)
    assert _epochs(whole, losses) == 4
    assert whole.record() == {"epoch": 4, "reason": "val_loss did not improve for 2 epochs (--patience 2)",
                              "best_epoch": 2, "patience": 2}
    # Interrupted after epoch 3 (best: epoch 2, 0.5): the resumed run stops at the same epoch.
    resumed = ResumableEarlyStopping(2, epochs=10, best=(2, 0.5), first_epoch=3)
    assert _epochs(resumed, losses[3:], first=3) == 4
    assert resumed.record() == whole.record()
    # A stop at the last epoch is no early stop.
    last = ResumableEarlyStopping(2, epochs=4)
    assert _epochs(last, losses) == 4 and last.record() is None
    assert ResumableEarlyStopping(2, epochs=10).record() is None


def _checkpoint_weights(folder):
    import h5py

    (path,) = glob.glob(str(folder / "checkpoints" / "*.weights.h5"))
    weights = {}
    with h5py.File(path) as handle:
        handle.visititems(lambda name, item: weights.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset)
                          else None)
    return weights


def _epoch_rows(folder):
    import csv

    with open(folder / "history.csv", newline="") as handle:
        return [row for row in csv.DictReader(handle) if row["kind"] == "epoch"]


@pytest.mark.slow
def test_four_simulated_devices_train_as_one_does(weights_dir, tiny_npz):
    pytest.importorskip("jax")
    import concurrent.futures

    runs = {devices: weights_dir / f"devices-{devices}" for devices in (1, 4)}
    # The two trainings are independent: side by side, each mostly compiling on one core.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = pool.map(lambda devices: train(TINY_JAX + ["--data", tiny_npz, "--backend", "jax", "--devices",
                                                             devices, "--quiet", "-o", runs[devices]], env=SIMULATED),
                           runs)
        for result in results:
            assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((runs[4] / "manifest.json").read_text())
    assert manifest["runtime"]["requested"]["devices"] == 4
    assert manifest["runtime"]["effective"]["distribution"] == {
        "strategy": "DataParallel", "devices": ["cpu:0", "cpu:1", "cpu:2", "cpu:3"], "count": 4,
        "batch": "global: each batch is split evenly over the devices"}
    single = json.loads((runs[1] / "manifest.json").read_text())
    assert single["runtime"]["requested"]["devices"] == 1 and "distribution" not in single["runtime"]["effective"]

    one, four = _checkpoint_weights(runs[1]), _checkpoint_weights(runs[4])
    assert one.keys() == four.keys()
    largest = max(float(np.max(np.abs(np.asarray(one[k], np.float64) - four[k]))) for k in one
                  if np.asarray(one[k]).dtype.kind == "f")
    print(f"largest weight difference, 4 devices vs 1: {largest:.3g}")
    assert largest <= WEIGHTS_ATOL
    for a, b in zip(_epoch_rows(runs[1]), _epoch_rows(runs[4])):
        np.testing.assert_allclose(float(a["val_loss"]), float(b["val_loss"]), rtol=1e-5)
        np.testing.assert_allclose(float(a["loss"]), float(b["loss"]), rtol=1e-5)

    # A resume keeps the devices it started with.
    result = _invoke(["--resume", "-o", runs[4], "--epochs", "3", "--devices", "1"])
    assert result.exit_code != 0 and "--devices 1 differs from this run's 4" in result.output


@pytest.mark.slow
def test_patience_stops_early_records_why_and_the_run_is_complete(weights_dir, tiny_npz):
    folder = weights_dir / "patience"
    # A rate too high to keep improving: the validation loss rises after epoch 1.
    result = train(TINY + ["--data", tiny_npz, "--epochs", "8", "--lr", "0.05", "--lr-drop-epoch", "8",
                           "--patience", "1", "--quiet", "-o", folder])
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((folder / "manifest.json").read_text())
    stopped = manifest["result"]["stopped_early"]
    assert stopped["reason"] == "val_loss did not improve for 1 epoch (--patience 1)"
    assert stopped["epoch"] == manifest["result"]["epochs_completed"] < 8
    assert stopped["best_epoch"] == manifest["result"]["best_epoch"] == stopped["epoch"] - 1
    assert manifest["options"]["patience"] == 1 and manifest["status"] == "complete"
    # The last lines: why training stopped, then (issue 39) the command that evaluates the run.
    *_, stop_line, last_line = result.stdout.strip().splitlines()
    assert f"stopped early at epoch {stopped['epoch']}: val_loss did not improve" in stop_line
    assert last_line.startswith(f"Evaluate it: prednet-eval {folder}")
    before = (folder / "manifest.json").read_bytes()
    refused = _invoke(["--resume", "-o", folder, "--epochs", "20"])
    assert refused.exit_code != 0 and "An early-stopped run is complete" in refused.output
    assert (folder / "manifest.json").read_bytes() == before
