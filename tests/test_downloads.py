"""downloads.fetch's resumption rules, the progress it shows on any output, and what importing it costs."""

import io
import subprocess
import sys

import pytest

from prednet_keras.files.downloads import DownloadError, cache_dir, download_timeout, fetch, source_url
from prednet_keras.files.progress import ByteProgress
from tests.loopback_server import LoopbackServer

DATA = bytes(range(256)) * 400  # 100 KiB


@pytest.fixture
def server(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with LoopbackServer() as running:
        running.files["file.bin"] = DATA
        yield running


def quiet_fetch(server, path, **options):
    return fetch(f"{server.url}/file.bin", path, progress=False, say=lambda line: None, **options)


def test_a_server_that_ignores_ranges_or_changed_the_file_starts_over(server, tmp_path):
    target = tmp_path / "file.bin"
    server.faults["file.bin"] = ("drop_after", 30000)
    with pytest.raises(DownloadError, match="transfer broke after 29.3 KiB of 100.0 KiB"):
        quiet_fetch(server, target)
    server.faults["file.bin"] = ("no_ranges",)
    quiet_fetch(server, target)
    assert target.read_bytes() == DATA and not (tmp_path / "file.bin.part").exists()
    # The file changed on the server between two attempts: If-Range makes it send the new one whole.
    target.unlink()
    server.faults["file.bin"] = ("drop_after", 30000)
    with pytest.raises(DownloadError):
        quiet_fetch(server, target)
    server.files["file.bin"] = DATA[::-1]
    quiet_fetch(server, target)
    assert target.read_bytes() == DATA[::-1]
    assert server.ranges("file.bin")[-1] == "bytes=30000-"  # asked, and answered with the whole new file


def test_a_part_that_is_already_whole_is_finished_without_a_body(server, tmp_path):
    target = tmp_path / "file.bin"
    server.faults["file.bin"] = ("drop_after", 30000)
    with pytest.raises(DownloadError):
        quiet_fetch(server, target)
    (tmp_path / "file.bin.part").write_bytes(DATA)  # as if the rest had arrived before a kill
    digest = quiet_fetch(server, target)
    assert target.read_bytes() == DATA and len(digest) == 64


def test_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "k"))
    assert cache_dir("datasets", "x") == tmp_path / "k" / "datasets" / "x"
    monkeypatch.setenv("PREDNET_MIRROR_URL", "http://mirror.example/files/")
    assert source_url("https://host/a.zip?dl=1", "a.zip") == "http://mirror.example/files/a.zip"
    monkeypatch.delenv("PREDNET_MIRROR_URL")
    assert source_url("https://host/a.zip?dl=1", "a.zip") == "https://host/a.zip?dl=1"
    monkeypatch.setenv("PREDNET_DOWNLOAD_TIMEOUT", "2.5")
    assert download_timeout() == 2.5 and download_timeout(7) == 7
    monkeypatch.setenv("PREDNET_DOWNLOAD_TIMEOUT", "soon")
    with pytest.raises(DownloadError, match="PREDNET_DOWNLOAD_TIMEOUT='soon' is not a number of seconds"):
        download_timeout()


def test_progress_lines_on_an_output_that_is_no_terminal():
    stream = io.StringIO()
    with ByteProgress("a.zip", total=4 << 20, done=1 << 20, stream=stream, every=0) as shown:
        shown.update(1 << 20)
        shown.update(2 << 20)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "a.zip: continuing after 1.0 MiB of 4.0 MiB (25%)"
    assert lines[1].startswith("a.zip: 2.0 MiB of 4.0 MiB (50%), ") and "left" in lines[1]
    assert lines[2].startswith("a.zip: 4.0 MiB of 4.0 MiB (100%)") and "left" not in lines[2]
    assert lines[3].startswith("a.zip: 4.0 MiB in ") and len(lines) == 4
    silent = io.StringIO()
    with ByteProgress("a.zip", total=10, stream=silent, enabled=False) as shown:
        shown.update(10)
    assert silent.getvalue() == ""


def test_importing_the_downloading_modules_or_asking_for_help_imports_no_framework():
    probe = ("import sys\n"
             "import prednet_keras.files.downloads, prednet_keras.data.kitti, prednet_keras.data.kitti_raw\n"
             "import prednet_keras.pretrained.released\n"
             "from prednet_keras.cli.data import main\n"
             "try:\n"
             "    main(['kitti', '--help'])\n"
             "except SystemExit:\n"
             "    pass\n"
             "print('LOADED', sorted(m for m in ('keras', 'tensorflow', 'jax', 'torch', 'pooch', 'requests')"
             " if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Usage: " in result.stdout and "LOADED []" in result.stdout, result.stdout[-300:]


def test_a_file_of_another_size_on_a_server_without_etags_starts_over(server, tmp_path):
    target = tmp_path / "file.bin"
    server.faults["file.bin"] = ("drop_after", 30000)
    with pytest.raises(DownloadError):
        quiet_fetch(server, target)
    # What the server said of the file then, as a server without ETag or Last-Modified leaves it.
    about = tmp_path / "file.bin.part.json"
    about.write_text(about.read_text().replace('"etag": "', '"etag_was": "'))
    server.files["file.bin"] = DATA + b"more"
    quiet_fetch(server, target)
    assert target.read_bytes() == DATA + b"more"
    assert server.ranges("file.bin")[-2:] == ["bytes=30000-", None]
