"""prednet_keras.session.records: every committed manifest reads into the typed records and writes back
byte-identical, and older layouts migrate to the current one."""

import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from prednet_keras.session import folder as run_folders
from prednet_keras.session import records
from prednet_keras.session.records import Manifest, ManifestError, migrate

ROOT = Path(__file__).resolve().parents[1]


def _tracked(pattern):
    listed = subprocess.run(["git", "ls-files", pattern], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / line for line in listed.stdout.splitlines() if line]


def _committed_manifests():
    """(label, text) of every manifest.json tracked in the repository and inside every tracked runs.tar.xz."""
    found = []
    for path in _tracked("*manifest.json"):
        if path.name == "manifest.json":
            found.append((str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")))
    for archive in _tracked("*.tar.xz"):
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if member.isfile() and (member.name == "manifest.json" or member.name.endswith("/manifest.json")):
                    text = tar.extractfile(member).read().decode("utf-8")
                    found.append((f"{archive.relative_to(ROOT)}:{member.name}", text))
    return found


@pytest.fixture(scope="module")
def committed():
    manifests = _committed_manifests()
    assert len(manifests) >= 398, f"expected every committed manifest, found {len(manifests)}"
    return manifests


def test_every_committed_manifest_round_trips_byte_identical(committed):
    different = [label for label, text in committed if Manifest.from_json(text).to_json() != text]
    assert not different, f"{len(different)} manifests change when read and written: {different[:5]}"


def test_every_committed_manifest_has_the_typed_fields_the_readers_use(committed):
    for label, text in committed:
        manifest = Manifest.from_json(text)
        assert manifest.format == records.RUN_FORMAT and manifest.format_version == records.SCHEMA_VERSION, label
        assert manifest.complete, label
        assert isinstance(manifest.runtime.requested, records.RuntimeRequested), label
        assert isinstance(manifest.runtime.effective, records.RuntimeEffective), label
        assert manifest.requested.backend == manifest.effective.backend, label
        assert all(isinstance(s, records.Session) for s in manifest.sessions), label
        assert isinstance(manifest.seeds, records.Seeds) and manifest.seeds.seed is not None, label
        assert manifest.result.weights_checksum, label
        assert manifest.precision in ("float32", "mixed_bfloat16"), label
        assert manifest.requested.to_config().backend == manifest.requested.backend, label


def test_schema_version_is_the_one_runs_writes():
    assert run_folders.RUN_FORMAT_VERSION == records.SCHEMA_VERSION
    assert run_folders.RUN_FORMAT == records.RUN_FORMAT
    written = run_folders.new_manifest("r", {"epochs": 1}, {"backend": "jax"}, ["prednet-train"])
    assert Manifest.from_dict(written).to_dict() == written
    assert list(Manifest.from_dict(written).to_dict()) == list(written)


def test_the_code_a_run_was_made_with_is_a_typed_part_that_round_trips():
    written = run_folders.new_manifest("r", {"epochs": 1}, {"backend": "jax"}, ["prednet-train"])
    assert list(written)[list(written).index("prednet_keras_version") + 1] == "code"
    manifest = Manifest.from_json(json.dumps(written, indent=2) + "\n")
    assert isinstance(manifest.code, records.Code)
    assert manifest.code.to_dict() == written["code"]
    assert set(written["code"]) == {"commit", "dirty", "source", "package_sha256", "version"}
    assert manifest.to_json() == json.dumps(written, indent=2) + "\n"
    # A manifest from before the record: none is read, none written back, none invented by migration.
    older = {key: value for key, value in written.items() if key != "code"}
    assert Manifest.from_dict(older).code is None and "code" not in Manifest.from_dict(older).to_dict()
    assert "code" not in migrate(older)
    # One made in code writes it where the declaration puts it.
    made = Manifest(format=records.RUN_FORMAT, prednet_keras_version="0.1.0", status="created",
                    code=records.Code(commit="a" * 40, dirty=False, source="git"))
    keys = list(made.to_dict())
    assert keys[keys.index("prednet_keras_version") + 1] == "code"
    assert made.to_dict()["code"]["commit"] == "a" * 40


def test_unknown_keys_are_kept_in_place_and_new_fields_are_appended():
    text = json.dumps({"format": "prednet-keras-run", "zzz": [1, {"a": None}], "status": "created",
                       "result": {"custom": 1.5, "weights_checksum": "x"}}, indent=2) + "\n"
    manifest = Manifest.from_json(text)
    assert manifest.extra == {"zzz": [1, {"a": None}]}
    assert manifest.result.extra == {"custom": 1.5}
    assert manifest.to_json() == text
    manifest.status = "complete"
    manifest.result.model_weights_checksum = "y"
    manifest.name = "n"
    out = manifest.to_dict()
    assert list(out) == ["format", "zzz", "status", "result", "name"]
    assert out["result"] == {"custom": 1.5, "weights_checksum": "x", "model_weights_checksum": "y"}
    assert out["status"] == "complete"


def test_a_null_stays_null_and_an_absent_key_stays_absent():
    data = {"format": "prednet-keras-run", "runtime": {"requested": {"backend": "torch"}, "effective": None}}
    manifest = Manifest.from_dict(data)
    assert manifest.effective is None
    assert manifest.to_dict() == data
    assert "precision" not in manifest.to_dict()["runtime"]["requested"]
    assert manifest.requested.get("precision", "absent") == "absent" and "precision" not in manifest.requested
    assert manifest.runtime.get("effective", "absent") is None and "effective" in manifest.runtime
    assert manifest.get("zzz", 3) == 3 and "zzz" not in manifest


def _older_and_newer(committed):
    older = [text for _, text in committed if "precision" not in json.loads(text)["runtime"]["requested"]]
    newer = [text for _, text in committed if "precision" in json.loads(text)["runtime"]["requested"]]
    assert older and newer, "the committed records hold manifests from before and after --precision"
    return older, newer


def test_migration_of_manifests_from_before_precision(committed):
    older, _ = _older_and_newer(committed)
    for text in older[:50]:
        data = json.loads(text)
        migrated = migrate(data)
        assert data == json.loads(text), "migrate changes a copy, not its argument"
        assert migrated["runtime"]["requested"]["precision"] == "float32"
        assert migrated["runtime"]["effective"]["precision"] == "float32"
        assert list(migrated["runtime"]["requested"])[-1] == "precision"
        assert Manifest.from_dict(data).precision == "float32"
        assert Manifest.from_dict(data).requested.precision is None
        assert Manifest.from_dict(data).migrated().requested.precision == "float32"
        # Nothing else changes, and a second migration changes nothing.
        for key in data:
            if key != "runtime":
                assert migrated[key] == data[key]
        assert migrate(migrated) == migrated


def test_migration_keeps_a_current_manifest_as_it_is(committed):
    _, newer = _older_and_newer(committed)
    bfloat16 = 0
    for text in newer:
        data = json.loads(text)
        assert migrate(data) == data
        bfloat16 += Manifest.from_dict(data).precision == "mixed_bfloat16"
    assert bfloat16, "the committed records hold a mixed_bfloat16 run"


def test_migration_never_invents_a_model_checksum(committed):
    without = [json.loads(t) for _, t in committed if "model_weights_checksum" not in json.loads(t)["result"]]
    assert without
    assert all("model_weights_checksum" not in migrate(d)["result"] for d in without[:20])


def test_migration_refuses_other_formats_and_newer_versions():
    with pytest.raises(ManifestError, match="format"):
        migrate({"format": "something-else"})
    with pytest.raises(ManifestError, match="format_version 2"):
        migrate({"format": "prednet-keras-run", "format_version": records.SCHEMA_VERSION + 1})


def test_a_run_folder_reads_and_writes_records_byte_identical(tmp_path):
    shipped = ROOT / "prednet_keras" / "pretrained" / "prednet-embedded" / "manifest.json"
    folder = run_folders.RunFolder(tmp_path / "run")
    folder.path.mkdir()
    folder.manifest_path.write_bytes(shipped.read_bytes())
    record = folder.read_record()
    assert isinstance(record, Manifest) and record.complete
    folder.write_manifest(record)
    assert folder.manifest_path.read_bytes() == shipped.read_bytes()
    assert folder.recorded_model_checksum()[1].startswith("manifest.json result.")
    folder.manifest_path.write_text("[1, 2]\n")
    with pytest.raises(run_folders.RunFolderError, match="not a run manifest"):
        folder.read_record()
