"""Fetching a file from the web into a cache folder: resumable, checked, and whole or not at all.

    cache_dir(kind, name)      $KERAS_HOME/<kind>/<name> (Keras' convention: KERAS_HOME, default ~/.keras,
                               /tmp/.keras when that cannot be written, as keras.utils.get_file does)
    source_url(default, name)  the URL of one of the authors' files, or its copy on PREDNET_MIRROR_URL
    fetch(url, path, ...)      downloads `url` to `path` (pooch.retrieve with ResumableDownloader)
    folder_lock(folder, what)  one process at a time fetches into a folder

The downloading is pooch's: it streams into a temporary file beside the target, checks the SHA-256 when one
is known, and only then moves the file into place, so a failed or wrong download never stands where a good
file was. `ResumableDownloader` adds what pooch's own HTTP downloader lacks for files of gigabytes: the
bytes received so far are kept in `<name>.part`, and the next attempt asks the server for the rest only
(an HTTP Range request, guarded by If-Range so that a file changed on the server starts over); before the
first byte is written it checks that the disk has room for the rest and for what will be unpacked from it.

Every failure is a DownloadError of one line that names the URL or file and what happened: offline or the
host unreachable, no answer within the timeout (PREDNET_DOWNLOAD_TIMEOUT, default 30 s), an HTTP error, a
transfer broken part way (run the command again: it continues), no room on the disk, a file that differs
from the checksum recorded when it first arrived. No framework at import; pooch and requests are imported
when a download starts.
"""

import os
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

from prednet_keras.files.diskwrite import atomic_write_json, format_bytes, nearest_existing, room_for, space_message
from prednet_keras.files.progress import ByteProgress

__all__ = ["DEFAULT_TIMEOUT", "MIRROR_VARIABLE", "TIMEOUT_VARIABLE", "DownloadError", "ResumableDownloader",
           "cache_dir", "download_timeout", "fetch", "folder_lock", "source_url"]

MIRROR_VARIABLE = "PREDNET_MIRROR_URL"
TIMEOUT_VARIABLE = "PREDNET_DOWNLOAD_TIMEOUT"
# Seconds to wait for a connection, and then between two blocks of data: long enough for a slow server,
# short enough that an unreachable one is reported while the user still watches.
DEFAULT_TIMEOUT = 30.0
PART_SUFFIX = ".part"
_BLOCK = 1 << 20
# The temporary names pooch's temporary_file gives (tempfile's "tmp" and 8 characters).
_POOCH_TEMPORARY = re.compile(r"^tmp[a-z0-9_]{8}$")


class DownloadError(ValueError):
    """A download that could not be made or could not be trusted; the message is one line for the user."""


def cache_dir(kind, name):
    """The cache folder of one data set or model family, following Keras' convention.

    Args:
        kind: "datasets" or "models", as Keras' own cache.
        name: the folder for it ("prednet-kitti").
    """
    base = Path(os.path.expanduser(os.environ.get("KERAS_HOME") or os.path.join("~", ".keras")))
    if not os.access(nearest_existing(base), os.W_OK):
        base = Path("/tmp") / ".keras"
    return base / kind / name


def source_url(default, name):
    """Where to fetch one of the authors' files: `default`, or `<PREDNET_MIRROR_URL>/<name>` when set
    (a mirror, or a test's local server, that serves the files by their names)."""
    mirror = os.environ.get(MIRROR_VARIABLE, "").strip()
    return f"{mirror.rstrip('/')}/{name}" if mirror else default


def download_timeout(seconds=None):
    """The timeout in seconds: `seconds` if given, else PREDNET_DOWNLOAD_TIMEOUT, else 30."""
    if seconds is None:
        text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
        if not text:
            return DEFAULT_TIMEOUT
        try:
            seconds = float(text)
        except ValueError:
            raise DownloadError(f"{TIMEOUT_VARIABLE}={text!r} is not a number of seconds.") from None
    if not 0 < seconds < float("inf"):
        raise DownloadError(f"The download timeout must be a positive number of seconds, got {seconds:g}.")
    return float(seconds)


class folder_lock:
    """Holds `<folder>/.lock` while a command fetches into `folder`: a second one is refused at once.

    filelock's lock is the kernel's (flock): a killed holder never leaves a stale lock behind.

    Args:
        folder: the cache folder (created if needed).
        what: the command, for the message ("prednet-data kitti").
    """

    def __init__(self, folder, what):
        self.folder = Path(folder)
        self.what = what
        self._lock = None

    def __enter__(self):
        import filelock

        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = filelock.FileLock(str(self.folder / ".lock"), timeout=0)
        try:
            self._lock.acquire()
        except filelock.Timeout:
            raise DownloadError(f"{self.folder}: another {self.what} is fetching into this folder; wait for it "
                                "to finish (a second one would fetch the same files).") from None
        _sweep_pooch_temporaries(self.folder)
        return self

    def __exit__(self, *exc):
        self._lock.release()
        return False


def _sweep_pooch_temporaries(folder):
    """Removes what pooch leaves when its process is killed while it moves a file into place; called under
    the folder's lock, so no live download owns them."""
    for path in folder.iterdir():
        if _POOCH_TEMPORARY.match(path.name) and path.is_file():
            path.unlink(missing_ok=True)


def fetch(url, path, *, sha256=None, timeout=None, progress=True, unpacked_ratio=0.0, label=None, say=None):
    """Downloads `url` to `path`, resuming an earlier attempt, and returns the file's SHA-256.

    Args:
        url: where the file is.
        path: the file to write (its folder is created).
        sha256: the checksum it must have (recorded when it first arrived), or None on a first download.
        timeout: seconds to wait for the server (see download_timeout).
        progress: show the transfer (a bar on a terminal, lines elsewhere).
        unpacked_ratio: room the disk must also have after the download, as a share of its size (1.0 for
            an archive that will be unpacked beside itself).
        label: the transfer's name in the progress lines (default: the file's name).
        say: prints one line of the command's own output (default: print to stderr).

    Returns:
        The SHA-256 (hex) of the file now at `path`.

    Raises:
        DownloadError: see the module's docstring; `path` is then as it was, and the bytes received are
            kept in `<path>.part` for the next attempt when the transfer broke.
    """
    import pooch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    downloader = ResumableDownloader(path, timeout=download_timeout(timeout), progress=progress,
                                     unpacked_ratio=unpacked_ratio, label=label or path.name, say=say)
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel("WARNING")  # its lines say what ours say, and name its own hash advice
    try:
        pooch.retrieve(url, known_hash=f"sha256:{sha256}" if sha256 else None, fname=path.name,
                       path=path.parent, downloader=downloader)
    except DownloadError:
        raise
    except ValueError as error:
        if "does not match the known hash" not in str(error):
            raise
        got = re.search(r"but got (\w+)", str(error))
        raise DownloadError(
            f"{url}: the file received has SHA-256 {got.group(1)[:16] if got else '?'}..., not the "
            f"{sha256[:16]}... recorded when it first arrived: the server's file changed, or the transfer was "
            "corrupted; it was not kept."
        ) from None
    finally:
        logger.setLevel(level)
    if sha256:
        return sha256
    from prednet_keras.files.diskwrite import file_sha256

    return file_sha256(path)


def _reason(error):
    """The innermost words of a requests/urllib3 error ("Connection refused"), without pool and object
    descriptions."""
    text = str(error)
    found = re.findall(r"\[Errno -?\d+\] ([^'\")\]]+)", text)
    if found:
        return found[-1].strip()
    if "IncompleteRead" in text:
        return "the server closed the connection early"
    for pattern in (r"(Connection broken: [^'\"]+)", r"(Read timed out)",
                    r"(Connection reset by peer)", r"(Remote end closed connection without response)"):
        match = re.search(pattern, text)
        if match:
            return match.group(1)
    return type(error).__name__


class ResumableDownloader:
    """A pooch downloader (pooch calls it with the URL and its temporary file) that resumes broken
    transfers from `<target>.part`.

    Args:
        target: the file the download is for; `<target>.part` keeps the bytes received, and
            `<target>.part.json` what the server said of the file (its size, ETag, Last-Modified) so that a
            resumed transfer asks for the same file.
        timeout: seconds to wait for a connection and then for each block.
        progress: show the transfer.
        unpacked_ratio: see fetch.
        label: the transfer's name in the progress lines.
        say: prints one line.
    """

    def __init__(self, target, timeout=DEFAULT_TIMEOUT, progress=True, unpacked_ratio=0.0, label=None, say=None):
        self.target = Path(target)
        self.part = self.target.with_name(self.target.name + PART_SUFFIX)
        self.about = self.target.with_name(self.part.name + ".json")
        self.timeout = timeout
        self.progress = progress
        self.unpacked_ratio = unpacked_ratio
        self.label = label or self.target.name
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))

    def __call__(self, url, output_file, pooch, check_only=False):
        import requests

        if check_only:
            raise DownloadError(f"{url}: availability checks are not supported here.")
        have, known = self._resumable(url)
        response = self._request(requests, url, have, known)
        if have and response.status_code == 416:
            response.close()
            if known.get("bytes") == have:
                self._finish(output_file)  # the part already holds the whole file
                return
            have, known = 0, {}
            response = self._request(requests, url, 0, {})
        elif have and response.status_code == 200:
            # No resumption: the server ignores ranges, or the file changed since (If-Range).
            self.say(f"({self.label}: the server sends the file from its start; the {format_bytes(have)} "
                     "received before are dropped)")
            have = 0
        if have and response.status_code == 206 and known.get("bytes") not in (None, self._total(response, have)):
            # Another size than the part was begun with: the file changed, on a server without ETags.
            response.close()
            self.say(f"({self.label}: the file changed on the server; the {format_bytes(have)} received before "
                     "are dropped)")
            have, known = 0, {}
            response = self._request(requests, url, 0, {})
        with response:
            if response.status_code != (206 if have else 200):
                raise DownloadError(f"{url}: the server answered {response.status_code} {response.reason}; "
                                    "nothing was downloaded.")
            total = self._total(response, have)
            self._check_room(total, have)
            atomic_write_json(self.about, {"url": url, "bytes": total, "etag": response.headers.get("ETag"),
                                           "last_modified": response.headers.get("Last-Modified")})
            self._receive(requests, url, response, have, total)
        self._finish(output_file)

    def _resumable(self, url):
        """(bytes kept from an earlier attempt at this URL, what the server said of the file then)."""
        import json

        try:
            have = self.part.stat().st_size
            known = json.loads(self.about.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return 0, {}
        if not isinstance(known, dict) or known.get("url") != url or not have:
            return 0, {}
        return have, known

    def _request(self, requests, url, have, known):
        # identity: ranges count stored bytes, and pooch checks the bytes as stored.
        headers = {"Accept-Encoding": "identity", "User-Agent": _user_agent()}
        if have:
            headers["Range"] = f"bytes={have}-"
            validator = known.get("etag") or known.get("last_modified")
            if validator:
                headers["If-Range"] = validator
        host = urlsplit(url).netloc or url
        try:
            return requests.get(url, headers=headers, stream=True, timeout=(self.timeout, self.timeout))
        except requests.exceptions.Timeout:
            raise DownloadError(
                f"{url}: no answer from {host} within {self.timeout:g} s (--timeout, {TIMEOUT_VARIABLE}); the "
                "server may be down or unreachable from here; nothing was downloaded."
            ) from None
        except requests.exceptions.ConnectionError as error:
            raise DownloadError(
                f"{url}: cannot reach {host} ({_reason(error)}): this machine seems to be offline, or the host is "
                f"down; nothing was downloaded ({MIRROR_VARIABLE} points downloads at a mirror)."
            ) from None
        except requests.exceptions.RequestException as error:
            raise DownloadError(f"{url}: the request failed ({_reason(error)}); nothing was downloaded.") from None

    def _total(self, response, have):
        length = response.headers.get("Content-Length")
        if response.status_code == 206:
            match = re.match(r"bytes (\d+)-\d+/(\d+|\*)", response.headers.get("Content-Range", ""))
            if match is None or int(match.group(1)) != have:
                raise DownloadError(f"{response.url}: the server sent another part of the file than asked for "
                                    f"(Content-Range {response.headers.get('Content-Range')!r}); remove "
                                    f"{self.part} and run the command again.")
            if match.group(2) != "*":
                return int(match.group(2))
        return have + int(length) if length and length.isdigit() else None

    def _check_room(self, total, have):
        """Refuses, before the first byte is written, a download the disk cannot hold, with what will be
        unpacked from it."""
        if total is None:
            return
        needed = (total - have) + int(total * self.unpacked_ratio)
        shortage = room_for(self.target, needed)
        if shortage is not None:
            message = space_message(shortage, self.target, needed=needed)
            if self.unpacked_ratio:
                message = message.replace(" needed,", " needed for it and what is unpacked from it,", 1)
            raise DownloadError(message)

    def _receive(self, requests, url, response, have, total):
        import urllib3

        received = have
        try:
            with open(self.part, "ab" if have else "wb") as out, \
                    ByteProgress(self.label, total, done=have, enabled=self.progress) as shown:
                for block in _blocks(response):
                    out.write(block)
                    received += len(block)
                    shown.update(len(block))
        except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError) as error:
            raise DownloadError(
                f"{url}: the transfer broke after {format_bytes(received)}"
                + (f" of {format_bytes(total)}" if total else "")
                + f" ({_reason(error)}); what arrived is kept in {self.part}: run the same command again to "
                "continue from there."
            ) from None
        except OSError as error:
            raise DownloadError(space_message(error, self.target, needed=total)) from None
        if total is not None and received != total:
            raise DownloadError(
                f"{url}: the transfer ended after {format_bytes(received)} of the {format_bytes(total)} the "
                f"server announced; what arrived is kept in {self.part}: run the same command again to continue."
            )

    def _finish(self, output_file):
        os.replace(self.part, output_file)
        self.about.unlink(missing_ok=True)


def _blocks(response):
    """The body's blocks as they arrive. read1 hands over what came before a dropped connection, which is
    then kept for the next attempt; a read of a whole block (requests' iter_content) loses it."""
    raw = response.raw
    if not hasattr(raw, "read1"):  # urllib3 before 2.3
        yield from response.iter_content(1 << 16)
        return
    while True:
        block = raw.read1(_BLOCK, decode_content=True)
        if not block:
            return
        yield block


def _user_agent():
    try:
        from importlib.metadata import version

        return f"prednet-keras/{version('prednet-keras')}"
    except Exception:  # a bare checkout
        return "prednet-keras"
