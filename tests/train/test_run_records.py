"""The records of run folders (issue 24), with real faults: manifests change only by atomic replace,
and a model or checkpoint whose weights are not the ones its run recorded is refused, by
prednet-eval and by --resume, with one line and nothing changed.
"""

import json

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from prednet_keras.cli.eval import main as eval_main
from prednet_keras.cli.train import main as train_main
from prednet_keras.session import folder as run_folders
from tests.train.conftest import folder_hash


def _invoke(main, args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_a_manifest_write_that_fails_leaves_the_old_one_whole(tmp_path):
    folder = run_folders.RunFolder(tmp_path / "run")
    folder.create()
    folder.write_manifest({"status": "complete", "result": {"weights_checksum": "abc"}})
    before = folder.manifest_path.read_bytes()
    with pytest.raises(TypeError):
        folder.write_manifest({"status": "running", "bad": object()})  # not JSON: fails mid-write
    assert folder.manifest_path.read_bytes() == before
    assert [p.name for p in folder.path.iterdir()] == ["manifest.json"]


def test_prednet_eval_refuses_a_model_that_is_not_the_one_its_run_recorded(copy_of_run, tmp_path):
    from prednet_keras.formats.keras_files import load_model

    model = load_model(copy_of_run / "model.keras", compile=False)
    weights = model.get_weights()
    weights[0] = weights[0] + 0.01
    model.set_weights(weights)
    model.save(copy_of_run / "model.keras")  # another model's file under the run's name
    result = _invoke(eval_main, [copy_of_run, "--plots", "0"])
    assert result.exit_code == 1, result.output
    assert f"{copy_of_run / 'model.keras'} does not hold the weights its run recorded (manifest.json " \
           "result.model_weights_checksum" in result.output
    assert "Traceback" not in result.output and not (copy_of_run / "eval").exists()


def test_a_run_records_the_commit_of_the_checkout_it_was_made_from(trained_run):
    import subprocess
    from pathlib import Path

    from prednet_keras.runtime.code_provenance import PACKAGE_DIR

    root = Path(__file__).resolve().parents[2]
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0 or PACKAGE_DIR != root / "prednet_keras":
        pytest.skip("the package is not imported from this git checkout")
    folder, _ = trained_run
    code = json.loads((folder / "manifest.json").read_text())["code"]
    assert (code["commit"], code["source"]) == (head.stdout.strip(), "git")
    assert isinstance(code["dirty"], bool) and len(code["package_sha256"]) == 64


@pytest.mark.slow
@pytest.mark.parametrize("recorded", ["file", "weights"])
def test_resume_refuses_a_checkpoint_that_is_not_the_one_its_run_recorded(copy_of_run, capfd, recorded):
    checkpoint = next((copy_of_run / "checkpoints").iterdir())
    if recorded == "weights":
        # A run from before the checkpoint's file hash was recorded: its weights' checksum still tells.
        state = json.loads((copy_of_run / "state.json").read_text())
        del state["checkpoint_sha256"]
        (copy_of_run / "state.json").write_text(json.dumps(state))
    with h5py.File(checkpoint, "r+") as handle:
        kernels = []
        handle.visititems(lambda name, item: kernels.append(item) if isinstance(item, h5py.Dataset)
                          and item.ndim == 4 else None)
        kernels[0][...] = np.asarray(kernels[0]) + 0.01
    before = folder_hash(copy_of_run)
    result = _invoke(train_main, ["--resume", "--epochs", "3", "-o", copy_of_run])
    assert result.exit_code == 1, result.output
    assert f"(the training process stopped before it began; nothing in {copy_of_run} was changed)" in result.output
    assert folder_hash(copy_of_run) == before
    # The training process's own line (written to the real stderr) names the file and the record.
    child_output = capfd.readouterr().err
    expected = (f"Error: {checkpoint}: not the checkpoint written at epoch 2 (state.json records sha256 "
                if recorded == "file" else
                f"Error: {checkpoint} does not hold the weights recorded for it (state.json weights_checksum")
    assert expected in child_output, child_output
    assert "Traceback" not in child_output
    manifest = json.loads((copy_of_run / "manifest.json").read_text())
    assert "resumes" not in manifest and manifest["status"] == "complete"


@pytest.mark.parametrize(
    "manifest, expected",
    [
        ({"status": "complete", "result": {"model_weights_checksum": "m", "weights_checksum": "w"}},
         ("m", "manifest.json result.model_weights_checksum")),
        # Recorded before model_weights_checksum: the final weights are model.keras's when the best epoch was last,
        ({"status": "complete", "result": {"weights_checksum": "w", "best_epoch": 4, "epochs_completed": 4}},
         ("w", "manifest.json result.weights_checksum")),
        # and always for the study models, which save their final model.
        ({"status": "complete", "options": {"model": "autoencoder"}, "result": {"weights_checksum": "w"}},
         ("w", "manifest.json result.weights_checksum")),
        # Nothing recorded for it: the shipped model's best epoch (78) is not its last (80).
        ({"status": "complete", "result": {"weights_checksum": "w", "best_epoch": 78, "epochs_completed": 80}}, None),
        # A run still training replaces model.keras as it goes.
        ({"status": "running", "result": {"model_weights_checksum": "m"}}, None),
    ],
)
def test_which_record_model_keras_is_checked_against(tmp_path, manifest, expected):
    folder = run_folders.RunFolder(tmp_path)
    folder.write_manifest(manifest)
    assert folder.recorded_model_checksum() == expected
