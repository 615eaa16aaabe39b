"""prednet-data kitti against a local server standing in for the authors' host: the real download path
(pooch with the resuming downloader, requests, sockets) on 127.0.0.1, with the faults a download meets.

Every failure must be one `Error:` line naming the URL or file and what happened, exit status 1, no
traceback, and leave the cache folder without a half-written file: no X_*.hkl that is not whole and checked,
no pooch temporary file, no staging folder; a broken transfer keeps only `<zip>.part` for the next attempt.
"""

import os
import shutil
import socket
import time
from collections import namedtuple

import pytest
from click.testing import CliRunner

from prednet_keras.cli.data import main as data_main
from prednet_keras.data import kitti
from prednet_keras.files.records import ChecksumError
from tests.kitti_files import kitti_zip
from tests.loopback_server import LoopbackServer

ZIP = "kitti_data.zip"


@pytest.fixture
def authors(tmp_path, monkeypatch):
    """A loopback server serving the tiny kitti_data.zip; KERAS_HOME and PREDNET_MIRROR_URL point at them."""
    (tmp_path / "made").mkdir()
    data, files = kitti_zip(tmp_path / "made")
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("PREDNET_DOWNLOAD_TIMEOUT", raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    with LoopbackServer() as server:
        server.files[ZIP] = data
        monkeypatch.setenv("PREDNET_MIRROR_URL", server.url)
        yield namedtuple("Authors", "server zip files folder")(server, data, files, kitti.kitti_folder())


def run(*args):
    return CliRunner().invoke(data_main, ["kitti", *args], catch_exceptions=False)


def refused(result):
    """The one `Error:` line of a refused command (exit 1, no traceback)."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and result.output.rstrip().endswith(errors[0]), result.output
    return errors[0]


def listing(folder):
    return sorted(path.name for path in folder.iterdir()) if folder.is_dir() else []


def whole_or_nothing(folder):
    """Nothing half-written: no pooch temporary, no staging folder, and the hkl files all there or none."""
    names = listing(folder)
    assert not [n for n in names if n.startswith(("tmp", ".staging", ".prednet-tmp"))], names
    present = [n for n in kitti.FILES if n in names]
    assert present in ([], list(kitti.FILES)), names
    return names


def test_fetch_unpacks_checks_records_and_is_found_by_name(authors, tmp_path, monkeypatch):
    result = run()
    assert result.exit_code == 0, result.output
    folder = authors.folder
    assert listing(folder) == sorted([".lock", "checksums.json", *kitti.FILES])  # the zip removed after unpacking
    for name, data in authors.files.items():
        assert (folder / name).read_bytes() == data
    # Progress on an output that is no terminal: lines, not a bar drawn with carriage returns.
    assert f"{ZIP}: " in result.output and "\r" not in result.output
    assert "train 14 frames (2 recordings" in result.output and "prednet-train --data kitti" in result.output
    assert kitti.resolve_data("kitti", "test") == str(folder / "X_test.hkl")
    assert kitti.training_data("kitti", None) == (str(folder / "X_train.hkl"), str(folder / "X_val.hkl"))
    assert kitti.resolve_data("some/file.h5", "train") == "some/file.h5"
    # A folder of one's own called kitti is that folder.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kitti").mkdir()
    assert kitti.training_data("kitti", None) == ("kitti", None)
    # Once there, it is checked and used without the network.
    requests = len(authors.server.requests)
    again = run()
    assert again.exit_code == 0 and "already in (its files match their checksums)" in again.output
    assert len(authors.server.requests) == requests


def test_a_dropped_connection_resumes_where_it_stopped(authors):
    half = len(authors.zip) // 2
    authors.server.faults[ZIP] = ("drop_after", half)
    line = refused(run())
    assert f"{authors.server.url}/{ZIP}: the transfer broke after " in line
    assert "the server closed the connection early" in line and "run the same command again to continue" in line
    names = whole_or_nothing(authors.folder)
    assert f"{ZIP}.part" in names and not [n for n in names if n.endswith(".hkl")]
    kept = (authors.folder / f"{ZIP}.part").stat().st_size
    assert 0 < kept <= half

    result = run()
    assert result.exit_code == 0, result.output
    assert authors.server.ranges(ZIP) == [None, f"bytes={kept}-"]  # only the rest was asked for
    assert f"continuing after {kept / 1024:.1f} KiB" in result.output
    for name, data in authors.files.items():
        assert (authors.folder / name).read_bytes() == data
    assert not [n for n in listing(authors.folder) if n.startswith(ZIP)]


def test_a_truncated_archive_is_refused_and_removed(authors):
    authors.server.faults[ZIP] = ("truncate", len(authors.zip) - 100)  # served whole, but cut short
    line = refused(run())
    assert f"{ZIP}: truncated or damaged zip archive" in line and "removed" in line
    assert whole_or_nothing(authors.folder) == [".lock", "checksums.json"]
    # The next attempt downloads it anew (no range: a part that is complete but wrong is not resumed).
    assert run().exit_code == 0
    assert authors.server.ranges(ZIP) == [None, None]


def test_an_archive_without_the_authors_files_is_refused(authors, tmp_path):
    (tmp_path / "other").mkdir()
    authors.server.files[ZIP], _ = kitti_zip(tmp_path / "other", leave_out=("X_val.hkl",))
    line = refused(run())
    assert "not the authors' KITTI archive: X_val.hkl missing" in line
    assert whole_or_nothing(authors.folder) == [".lock", "checksums.json"]
    (tmp_path / "wrong").mkdir()
    authors.server.files[ZIP], _ = kitti_zip(tmp_path / "wrong", frame_shape=(64, 80, 3))
    line = refused(run())
    assert "X_train.hkl holds frames of 64x80x3 uint8, not the authors' 128x160x3 uint8" in line
    assert whole_or_nothing(authors.folder) == [".lock", "checksums.json"]


def test_a_file_changed_since_it_arrived_is_refused_at_every_later_use(authors):
    assert run().exit_code == 0
    folder = authors.folder
    # Swapped for a file of the same size: only the checksum can tell.
    swapped = bytearray(authors.files["X_val.hkl"])
    swapped[-1] ^= 0xFF
    (folder / "X_val.new").write_bytes(bytes(swapped))
    os.replace(folder / "X_val.new", folder / "X_val.hkl")
    line = refused(run())
    assert f"{folder / 'X_val.hkl'}: SHA-256 " in line and "recorded in" in line
    assert "run prednet-data kitti --refetch to fetch it again" in line
    with pytest.raises(ChecksumError, match="X_val.hkl: SHA-256"):
        kitti.training_data("kitti", None)
    # Cut short: the size says it.
    with open(folder / "X_test.hkl", "r+b") as handle:
        handle.truncate(1000)
    with pytest.raises(ChecksumError, match=r"X_test.hkl: 1,000 bytes, not the [\d,]+ recorded"):
        kitti.resolve_data("kitti", "test")
    # --refetch fetches the archive again (it must be the one first recorded) and replaces the files.
    result = run("--refetch")
    assert result.exit_code == 0, result.output
    for name, data in authors.files.items():
        assert (folder / name).read_bytes() == data


def test_an_archive_that_changed_on_the_server_is_not_taken(authors, tmp_path):
    assert run().exit_code == 0
    (tmp_path / "other").mkdir()
    authors.server.files[ZIP], _ = kitti_zip(tmp_path / "other", prefix="")
    before = {name: (authors.folder / name).read_bytes() for name in kitti.FILES}
    line = refused(run("--refetch"))
    assert f"{ZIP}: the file received has SHA-256 " in line and "recorded when it first arrived" in line
    assert {name: (authors.folder / name).read_bytes() for name in kitti.FILES} == before
    whole_or_nothing(authors.folder)


def test_a_server_that_never_answers_times_out(authors):
    authors.server.faults[ZIP] = ("silent",)
    started = time.monotonic()
    line = refused(run("--timeout", "0.5"))
    assert time.monotonic() - started < 10
    host = authors.server.url.split("//")[1]
    assert line == (f"Error: {authors.server.url}/{ZIP}: no answer from {host} within 0.5 s (--timeout, "
                    "PREDNET_DOWNLOAD_TIMEOUT); the server may be down or unreachable from here; nothing was "
                    "downloaded.")
    assert whole_or_nothing(authors.folder) == [".lock"]


def test_offline(authors, monkeypatch):
    # Nothing listens on the port: refused at once.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    monkeypatch.setenv("PREDNET_MIRROR_URL", f"http://127.0.0.1:{closed}")
    line = refused(run())
    assert f"cannot reach 127.0.0.1:{closed} (Connection refused): this machine seems to be offline" in line
    # No name service, as on a machine without a network.
    def no_names(*args, **kwargs):
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", no_names)
    monkeypatch.setenv("PREDNET_MIRROR_URL", "http://mirror.invalid/prednet")
    line = refused(run())
    assert line.startswith(f"Error: http://mirror.invalid/prednet/{ZIP}: cannot reach mirror.invalid (Temporary "
                           "failure in name resolution)")
    assert whole_or_nothing(authors.folder) == [".lock"]


def test_too_little_disk_space_is_refused_before_the_download_starts(authors, monkeypatch):
    free = 1000

    def disk_usage(path):
        return shutil._ntuple_diskusage(10**9, 10**9 - free, free)

    monkeypatch.setattr(shutil, "disk_usage", disk_usage)
    line = refused(run())
    assert line.startswith(f"Error: no space left on device writing {authors.folder / ZIP}: about ")
    assert "needed for it and what is unpacked from it, 1000 bytes free; no file was written" in line
    assert whole_or_nothing(authors.folder) == [".lock"]  # not a byte written


def test_an_http_error_names_the_answer(authors):
    authors.server.faults[ZIP] = ("status", 404)
    line = refused(run())
    assert line == f"Error: {authors.server.url}/{ZIP}: the server answered 404 Not Found; nothing was downloaded."


def test_one_fetch_at_a_time(authors):
    from prednet_keras.files.downloads import folder_lock

    with folder_lock(authors.folder, "prednet-data kitti"):
        line = refused(run())
    assert "another prednet-data kitti is fetching into this folder" in line


def test_kitti_not_fetched_is_one_line_at_every_door(authors, tmp_path):
    from prednet_keras.cli.eval import main as eval_main
    from prednet_keras.cli.train import main as train_main

    expected = f"Error: KITTI is not in {authors.folder}: run prednet-data kitti first"
    for main, args in ((train_main, ["--data", "kitti", "-o", str(tmp_path / "run")]),
                       (eval_main, ["prednet-embedded", "--data", "kitti", "-o", str(tmp_path / "eval")])):
        line = refused(CliRunner().invoke(main, args, catch_exceptions=False))
        assert line.startswith(expected), line
    assert not (tmp_path / "run").exists() and not (tmp_path / "eval").exists()
    assert authors.server.requests == []


def test_option_rules():
    assert "--overwrite applies to --raw" in CliRunner().invoke(data_main, ["kitti", "--overwrite"]).output
    assert "--refetch applies to the authors' files" in CliRunner().invoke(
        data_main, ["kitti", "--raw", ".", "--refetch"]).output


def train(monkeypatch, *args):
    """prednet-train as far as its training process, which is replaced by one that succeeds at once."""
    from prednet_keras.cli.train import main as train_main
    from prednet_keras.session import worker

    monkeypatch.setattr(worker, "launch", lambda *a, **k: 0)
    return CliRunner().invoke(train_main, [*args, "--size", "32x32", "--stack-sizes", "3,4"], catch_exceptions=False)


def test_training_on_the_embedded_clip_says_what_to_expect_and_how_to_evaluate(tmp_path, monkeypatch):
    result = train(monkeypatch, "-o", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    first = result.stderr.splitlines()
    assert first[0].startswith("Training data: the embedded clip, 200 frames of street video")
    assert "predicts worse than copying the last frame" in first[0]
    assert first[1] == ("For the authors' KITTI (about 41,000 frames, 3 GB): prednet-data kitti, then prednet-train "
                        "--data kitti.")
    assert first[2] == f"Run folder: {tmp_path / 'run'}"
    assert result.output.rstrip().splitlines()[-1] == f"Evaluate it: prednet-eval {tmp_path / 'run'}"


def test_training_on_kitti_records_its_files_and_ends_with_the_evaluation_command(authors, tmp_path, monkeypatch):
    import json

    assert run("-q").exit_code == 0
    result = train(monkeypatch, "--data", "kitti", "-o", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    assert "Training data: the embedded clip" not in result.output
    assert result.output.rstrip().splitlines()[-1] == (
        f"Evaluate it on KITTI's test split: prednet-eval {tmp_path / 'run'} --data kitti")
    options = json.loads((tmp_path / "run" / "manifest.json").read_text())["options"]
    assert (options["data"], options["val_data"]) == (str(authors.folder / "X_train.hkl"),
                                                      str(authors.folder / "X_val.hkl"))
