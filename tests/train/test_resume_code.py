"""--resume checks the code (issue 38): a run continued under other prednet_keras code than it last trained
with is refused in one line, before anything is written, unless --resume-with-changed-code, which the
manifest then records; a run that records no code says so and continues; every resume records its code.

The code of another version is stood in for by the run's recorded package checksum, changed in its manifest:
the check compares the recorded checksum with the one of the code now running, whatever made either.
"""

import hashlib
import json

import pytest
from click.testing import CliRunner

from prednet_keras.cli.train import main as train_main
from prednet_keras.runtime.code_provenance import code_provenance
from prednet_keras.session import worker
from prednet_keras.session.records import Code, Manifest, Resume

AUTOENCODER = ["--model", "autoencoder", "--autoencoder", "dense", "--protocol", "quick", "--images", "12"]
OTHER_CHECKSUM = "0123456789ab" + "0" * 52


def _train(folder, *more):
    return CliRunner().invoke(train_main, [*AUTOENCODER, "--quiet", "-o", str(folder), *more])


def _folder_hashes(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _stopped_run(folder, stop_after, code):
    """A run stopped after 4 of its 12 updates whose manifest records `code` (None: no code record)."""
    stop_after[0] = 4
    assert _train(folder).exit_code == worker.EXIT_INTERRUPTED
    stop_after[0] = None
    manifest = json.loads((folder / "manifest.json").read_text())
    if code is None:
        del manifest["code"]
    else:
        manifest["code"] = code
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def _errors(output):
    return [line for line in output.splitlines() if line.startswith("Error:")]


def test_a_resume_under_changed_code_is_refused_unless_asked_for_and_then_recorded(stop_after, tmp_path):
    folder = tmp_path / "run"
    now = Code.from_dict(code_provenance())
    made_with = dict(now.to_dict(), commit="f" * 40, dirty=False, package_sha256=OTHER_CHECKSUM)
    _stopped_run(folder, stop_after, made_with)
    before = _folder_hashes(folder)

    refused = _train(folder, "--resume")
    assert refused.exit_code == 1, refused.output
    assert _errors(refused.output) == [
        f"Error: {folder} last trained with commit fffffff, package 0123456789ab, and the code now running is "
        f"{now.describe()}: resuming would make one run of two versions of prednet_keras. Resume it with the code "
        "it trained with, start a new run, or pass --resume-with-changed-code to continue it anyway (its manifest "
        "records the change)."
    ], refused.output
    assert _folder_hashes(folder) == before  # nothing written, the lock file included

    resumed = _train(folder, "--resume", "--resume-with-changed-code")
    assert resumed.exit_code == 0, resumed.output
    assert (f"(continuing {folder} with changed code: it last trained with commit fffffff, package 0123456789ab, "
            f"now {now.describe()}; the manifest's resumes record it.)") in resumed.output
    text = (folder / "manifest.json").read_text()
    manifest = Manifest.from_json(text)
    assert manifest.to_json() == text
    assert manifest.complete and manifest.code.package_sha256 == OTHER_CHECKSUM  # the run's own code, as made
    (resume,) = manifest.resumes
    assert isinstance(resume, Resume) and resume.after_update == 4 and resume.code_changed is True
    assert resume.code.package_sha256 == now.package_sha256 and manifest.last_code == resume.code


# Slow: two trainings (about 8 s); the fast loop keeps the refusal above, and test_update_checkpoints' resume
# checks that a resume under the same code records it.
@pytest.mark.slow
def test_a_run_without_a_code_record_resumes_saying_so_and_its_resume_records_the_code(stop_after, tmp_path):
    folder = tmp_path / "run"
    _stopped_run(folder, stop_after, None)
    now = Code.from_dict(code_provenance())

    resumed = _train(folder, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert (f"({folder} records no code checksum (made before runs recorded one): whether the code now running, "
            f"{now.describe()}, is the code it trained with cannot be checked; this resume records it.)"
            ) in resumed.output
    manifest = json.loads((folder / "manifest.json").read_text())
    assert "code" not in manifest  # never invented for the run itself
    (resume,) = manifest["resumes"]
    assert resume["code"]["package_sha256"] == now.package_sha256 and "code_changed" not in resume


def test_resume_with_changed_code_without_resume_is_refused(tmp_path):
    result = _train(tmp_path / "run", "--resume-with-changed-code")
    assert result.exit_code == 2, result.output
    assert _errors(result.output) == ["Error: --resume-with-changed-code applies only with --resume (a new run is "
                                      "made with the code now running)."]
    assert not (tmp_path / "run").exists()


def test_resume_records_round_trip_and_name_the_code_each_resume_ran():
    old = {"command": ["prednet-train", "--resume"], "time": "2025-01-01T00:00:00+0000", "after_epoch": 2}
    changed = {"command": ["prednet-train", "--resume", "--resume-with-changed-code"], "time": "t",
               "after_epoch": 3, "code": {"commit": "a" * 40, "dirty": True, "source": "git",
                                          "package_sha256": "b" * 64, "version": "1"}, "code_changed": True}
    data = {"format": "prednet-keras-run", "format_version": 1, "code": {"commit": "c" * 40, "dirty": False,
            "package_sha256": "d" * 64}, "resumes": [old]}
    manifest = Manifest.from_dict(data)
    assert manifest.to_dict() == data and manifest.last_code.package_sha256 == "d" * 64  # an old resume: no code
    manifest = Manifest.from_dict(dict(data, resumes=[old, changed]))
    assert manifest.to_dict()["resumes"] == [old, changed]
    assert manifest.last_code.describe() == "commit aaaaaaa (dirty), package bbbbbbbbbbbb"
    assert Manifest.from_dict({"format": "prednet-keras-run"}).last_code is None
    assert Code(package_sha256="e" * 64).describe() == "commit unknown, package eeeeeeeeeeee"
