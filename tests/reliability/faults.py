"""Small real faulty inputs, and the checks every refusal must pass.

Each builder writes a tiny file with one fault in it (a NaN pixel, a header
that claims more than the file holds, a zip bomb). Nothing here writes more
than a few hundred KB: claims are made in headers, bombs out of zeros.

Commands run in a forked child with a file size limit and a time limit, so
that a regression cannot do what the faults once did: a file claiming 10
million frames made prepare write until the disk was full.
"""

import hashlib
import io
import os
import resource
import signal
import struct
import sys
import tempfile
import time
import traceback
import zipfile
import zlib

import numpy as np

from prednet_keras.cli.data import main as data_cli

EARLIER_OUTPUT = b"an earlier dataset the user wants to keep"
CHILD_FILE_SIZE_LIMIT = 16 << 20
CHILD_TIME_LIMIT = 120


def snapshot(folder):
    """{relative path: sha256} of every file under folder, hidden ones included."""
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def run_prednet_data(args, env=None, file_size_limit=CHILD_FILE_SIZE_LIMIT):
    """Runs `prednet-data ARGS` in a forked child; returns (exit status, everything it printed).

    The child has the command already imported (a fresh interpreter spends
    seconds importing Keras), writes at most `file_size_limit` bytes to any
    file (SIGXFSZ ignored: a write past the limit fails with EFBIG, as one
    to a full disk fails with ENOSPC) and is killed after CHILD_TIME_LIMIT
    seconds. A crash shows as a negative status, an uncaught exception as a
    traceback and status 70.
    """
    handle, log = tempfile.mkstemp(prefix="prednet-child-", suffix=".txt")
    os.close(handle)
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 70
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))
            output = os.open(log, os.O_WRONLY | os.O_TRUNC)
            os.dup2(output, 1)
            os.dup2(output, 2)
            sys.stdout = sys.stderr = open(1, "w", closefd=False)  # noqa: SIM115 (the child's lifetime)
            os.environ.update(env or {})
            data_cli([str(a) for a in args], prog_name="prednet-data")
            status = 0
        except SystemExit as exit:
            status = exit.code if isinstance(exit.code, int) else 1
        except BaseException:  # noqa: BLE001 (reported as the traceback a user would see)
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            os._exit(status)
    deadline = time.monotonic() + CHILD_TIME_LIMIT
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"prednet-data {' '.join(map(str, args))} ran past {CHILD_TIME_LIMIT} s")
        time.sleep(0.01)
    try:
        with open(log) as text:
            return os.waitstatus_to_exitcode(wait_status), text.read()
    finally:
        os.unlink(log)


def refused(folder, command, env=None):
    """Runs a prednet-data command that must fail as a user error; returns its one line.

    Checks: exit status 1, a single `Error: ...` line and nothing else (no
    traceback), and every file under `folder` (the inputs, any earlier
    output) unchanged and nothing added (no temporary file left).
    """
    before = snapshot(folder)
    status, output = run_prednet_data(command, env)
    assert status == 1, output
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), output
    assert snapshot(folder) == before
    return lines[0]


def prepare_refused(folder, source, *options, env=None):
    """`prednet-data prepare SOURCE -o out.h5 --overwrite` over an earlier out.h5, refused."""
    output = folder / "out.h5"
    output.write_bytes(EARLIER_OUTPUT)
    return refused(folder, ["prepare", source, "-o", output, "--overwrite", "-q", *options], env=env)


def float_frames(count=6, height=8, width=10, bad=None, value=np.nan):
    """Float frames in [0, 1]; `bad` = (frame, row, column, channel) gets `value`."""
    frames = np.linspace(0, 1, count * height * width * 3, dtype=np.float32).reshape(count, height, width, 3)
    if bad is not None:
        frames[bad] = value
    return frames


def npy_header(shape, dtype=np.uint8):
    """An .npy version 1.0 header declaring `shape`."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape}
    )
    return buffer.getvalue()


def write_npz_member(path, key, header, zeros=0, payload=b"", others=None):
    """An .npz whose member `key` is an .npy header, then `zeros` zero bytes, then `payload`.

    The zeros are streamed through deflate a MiB at a time, so a member that
    unpacks to many MiB costs a file of a few KB and no memory. `others`
    ({key: array}) are stored beside it as numpy would.
    """
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open(key + ".npy", "w", force_zip64=True) as member:
            member.write(header)
            block = bytes(1 << 20)
            left = zeros
            while left:
                member.write(block[: min(left, len(block))])
                left -= min(left, len(block))
            member.write(payload)
        for name, array in (others or {}).items():
            buffer = io.BytesIO()
            np.save(buffer, array)
            archive.writestr(name + ".npy", buffer.getvalue())
    return path


def idx_file(array, code=None):
    """The bytes of an IDX file holding `array` (uint8 or big-endian float32)."""
    code = code or {np.dtype(np.uint8): 0x08, np.dtype(">f4"): 0x0D}[array.dtype]
    header = bytes([0, 0, code, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.tobytes()


def idx_header(shape, code=0x08):
    return bytes([0, 0, code, len(shape)]) + b"".join(int(d).to_bytes(4, "big") for d in shape)


def png_claiming(width, height):
    """A valid-looking PNG whose header claims width x height pixels but holds almost none."""

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes(64)))
        + chunk(b"IEND", b"")
    )
