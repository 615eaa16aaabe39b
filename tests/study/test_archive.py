"""Packed studies: runs.tar.xz is read by the report as the folder was, and packs and unpacks without loss."""

import io
import json
import tarfile

import pytest
from click.testing import CliRunner

from prednet_keras.cli.study import main
from prednet_keras.study import archive, runner
from prednet_keras.study.report import ReportOptions, build_report
from prednet_keras.study.spec import load_spec

from .synthetic_runs import write_run

FAST = ReportOptions(permutations=200, plots=False)


@pytest.fixture
def study(tmp_path):
    """A study folder as `prednet-study run` leaves it: runs/<configuration>/seed-NNNN-r1, one unfinished run."""
    folder = tmp_path / "study"
    for seed in range(4):
        for name, threads in (("one-thread", 1), ("two-threads", 2)):
            write_run(folder / "runs" / name, f"seed-000{seed}-r1", seed=seed, threads=threads,
                      noise=threads - 1, extra={"study": {"replicate": 1, "perturbation": None,
                                                          "configuration": name}})
    (folder / "runs" / "one-thread" / ".partial-seed-0009-r1").mkdir()
    return folder


def _comparable(report):
    return json.dumps([{k: v for k, v in c.items() if k not in ("sources",)}
                       for s in report["protocols"] for c in s["configurations"]], sort_keys=True, default=str)


def test_the_report_reads_an_archive_as_the_folder(study):
    from_folder, _ = build_report([study / "runs"], FAST)
    result = archive.pack(study)
    assert result["runs"] == 8 and result["left_out"] == [str(study / "runs" / "one-thread" / ".partial-seed-0009-r1")]
    packed = study / archive.ARCHIVE
    from_archive, _ = build_report([packed], FAST)
    assert _comparable(from_archive) == _comparable(from_folder)
    assert from_archive["protocols"][0]["comparisons"] == from_folder["protocols"][0]["comparisons"]
    # Runs are named by the archive and the member, not by the temporary folder they were read from.
    assert from_archive["runs"][0]["path"] == f"{packed}:runs/one-thread/seed-0000-r1"
    assert from_archive["protocols"][0]["configurations"][0]["sources"] == [str(packed)]


def test_packing_is_repeatable_and_removes_only_what_it_packed(study):
    first = archive.pack(study)["archive"].read_bytes()
    assert archive.pack(study)["archive"].read_bytes() == first  # same runs, same bytes
    archive.pack(study, remove=True)
    assert sorted(p.name for p in (study / "runs").rglob("*") if p.is_dir()) == [".partial-seed-0009-r1",
                                                                                   "one-thread"]
    assert len(archive.archived_runs(study / archive.ARCHIVE)) == 8


def test_unpack_restores_the_runs_and_a_run_is_never_dropped(study):
    before = {p.relative_to(study): p.read_bytes() for p in (study / "runs").rglob("*") if p.is_file()}
    archive.pack(study, remove=True)
    # Packing again now would drop the 8 archived runs: refused.
    write_run(study / "runs" / "one-thread", "seed-0005-r1", seed=5, threads=1)
    with pytest.raises(archive.ArchiveError, match="holds 8 run"):
        archive.pack(study)
    assert archive.unpack(study) == {"unpacked": 8, "present": 0}
    after = {p.relative_to(study): p.read_bytes() for p in (study / "runs").rglob("*") if p.is_file()}
    assert {k: v for k, v in after.items() if "seed-0005" not in str(k)} == before
    assert archive.unpack(study) == {"unpacked": 0, "present": 8}
    (study / "runs" / "one-thread" / "seed-0000-r1" / "log.txt").write_text("edited")
    with pytest.raises(archive.ArchiveError, match="differs from the archived run"):
        archive.unpack(study)
    assert not [p for p in study.iterdir() if p.name.startswith(".unpack-")]


def test_a_packed_study_is_not_run_again_until_unpacked(study, tmp_path):
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text('name = "s"\nmodel = "autoencoder"\nseeds = 4\n[train]\nprotocol = "quick"\n'
                         '[runtime]\nbackend = "tensorflow"\ndevice = "cpu"\n'
                         '[configurations.one-thread]\nthreads = 1\n[configurations.two-threads]\nthreads = 2\n')
    spec = load_spec(spec_path)
    archive.pack(study, remove=True)
    with pytest.raises(runner.StudyFolderError, match=f"prednet-study unpack {study}"):
        runner.plan_status(spec, study)
    result = CliRunner().invoke(main, ["unpack", str(study)])
    assert result.exit_code == 0 and "8 runs unpacked" in result.output
    finished, pending = runner.plan_status(spec, study)
    assert (len(finished), len(pending)) == (8, 0)


def _archive_with(tmp_path, name, data=b"x"):
    path = tmp_path / "evil.tar.xz"
    with tarfile.open(path, "w:xz") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def test_an_archive_member_outside_the_folder_is_refused(tmp_path):
    path = _archive_with(tmp_path, "../outside.txt")
    result = CliRunner().invoke(main, ["report", str(path), "-o", str(tmp_path / "report"), "--no-plots"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{path}: member '../outside.txt' is refused" in result.output
    assert not list(tmp_path.parent.glob("outside.txt"))


def test_an_absolute_member_lands_inside_the_temporary_folder(tmp_path):
    target = tmp_path / "absolute-member.txt"
    path = _archive_with(tmp_path, str(target))
    result = CliRunner().invoke(main, ["report", str(path), "-o", str(tmp_path / "report"), "--no-plots"])
    assert result.exit_code == 1 and f"{path}: no run folders in the archive. Nothing to report." in result.output
    assert not target.exists()  # the "data" filter strips the leading "/"
    assert not (tmp_path / "report").exists()


def test_not_an_archive_is_one_clear_line(tmp_path):
    bad = tmp_path / "runs.tar.xz"
    bad.write_text("not an archive")
    result = CliRunner().invoke(main, ["report", str(bad), "-o", str(tmp_path / "report")])
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert f"{bad}: not a readable tar archive" in result.output
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    result = CliRunner().invoke(main, ["report", str(other), "-o", str(tmp_path / "report")])
    assert result.exit_code == 1 and "neither a folder of runs nor a tar archive" in result.output


def test_a_packed_study_folder_given_to_the_report_says_where_its_runs_are(study):
    archive.pack(study, remove=True)
    # Nothing found to compare or leave out is not a report: one line saying where the runs are.
    with pytest.raises(ValueError, match=rf"it holds {archive.ARCHIVE}: pass .*Nothing to report\.$"):
        build_report([study], FAST)
