"""Known harmless lines of a framework's C++ log, kept out of a run's output (issue 39).

XLA's GPU autotuner times candidate kernels behind a "delay kernel". When the GPU is busy (another process,
MPS, a lazily loaded kernel) the delay times out and XLA logs "Delay kernel timed out: measured time has
sub-optimal accuracy ..." (openxla/xla#26466, tensorflow/tensorflow#73487, open upstream): one autotuning
measurement was less exact. There is nothing a user can do about it, and XLA's only way to silence it hides
every warning and error with it. So a process configured for a GPU (`runtime.configure`) hides these lines
alone and says so once, in one line of its own.

C++ writes them straight to file descriptor 2, out of reach of Python's logging and warnings filters:
`hide_known_noise` puts a small filter process between descriptor 2 and where it pointed. A process, not a
thread: a process that aborts (an XLA check failing) still gets its last words out, because the filter drains
the pipe after its writer is gone. The filter imports nothing but the standard library (it runs this file as
a script), starts in its own session (a Ctrl-C meant for the run does not kill the run's error output), holds
none of the run's other descriptors, and ends when the last writer closes the pipe.

PREDNET_SHOW_LOG_NOISE=1 shows every line as the framework wrote it.
"""

import atexit
import os
import re
import select
import sys

__all__ = ["KNOWN_NOISE", "SHOW_ENV", "filter_lines", "finish", "hide_known_noise"]

SHOW_ENV = "PREDNET_SHOW_LOG_NOISE"

# name -> (a pattern of the line, the one line said instead, the first time).
KNOWN_NOISE = {
    "xla-gpu-timer": (
        rb"cuda_timer\.cc:\d+\] Delay kernel timed out",
        "XLA's autotuner timed a kernel less exactly than it wanted (its 'Delay kernel timed out' warning, "
        f"harmless on a busy GPU: openxla/xla#26466); such lines are hidden ({SHOW_ENV}=1 shows them).",
    ),
}

_FILTER = None  # the filter process of this process, once started


def filter_lines(read_fd, write_fd, noise=None, idle_seconds=0.1):
    """Copies `read_fd` to `write_fd` until end of file, dropping the lines that match `noise`.

    A line that matches a pattern is replaced, the first time, by that noise's own line. A partial line
    (a progress bar's carriage returns, a prompt) is passed on once nothing more arrives for
    `idle_seconds`, so nothing waits for a newline that never comes.

    Args:
        read_fd, write_fd: file descriptors.
        noise: {name: (pattern bytes, line said instead)}; default KNOWN_NOISE.
    """
    noise = KNOWN_NOISE if noise is None else noise
    patterns = [(re.compile(pattern), said) for pattern, said in noise.values()]
    said_once = set()
    pending = b""

    def write(data):
        while data:
            data = data[os.write(write_fd, data):]

    def pass_line(line):
        for pattern, said in patterns:
            if pattern.search(line):
                if said not in said_once:
                    said_once.add(said)
                    write(said.encode() + b"\n")
                return
        write(line)

    while True:
        ready, _, _ = select.select([read_fd], [], [], idle_seconds if pending else None)
        if not ready:  # a partial line and a pause: it is not one of ours being written
            write(pending)
            pending = b""
            continue
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            pass_line(line + b"\n")
    if pending:
        pass_line(pending)


def hide_known_noise(environ=None):
    """Routes this process's file descriptor 2 through the filter (see the module's docstring), once.

    Nothing happens when PREDNET_SHOW_LOG_NOISE=1, or when the filter cannot start (the output is then as
    the framework writes it).

    Returns:
        Whether the filter is in place.
    """
    import subprocess

    global _FILTER
    environ = os.environ if environ is None else environ
    if _FILTER is not None:
        return True
    if environ.get(SHOW_ENV) == "1":
        return False
    sys.stderr.flush()
    target = os.dup(2)
    try:
        _FILTER = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__)], stdin=subprocess.PIPE,
                                   stdout=target, stderr=target, start_new_session=True)
    except OSError:
        return False
    finally:
        os.close(target)
    os.dup2(_FILTER.stdin.fileno(), 2)
    _FILTER.stdin.close()
    atexit.register(finish)
    return True


def finish(timeout=2.0):
    """Lets the filter pass on the last lines and end, before this process exits (a process that leaves by
    os._exit calls it first, so that its last error line comes before its parent's next one).

    Returns:
        The filter's exit status; None when there was none, or it had not ended within `timeout` seconds.
    """
    global _FILTER
    if _FILTER is None:
        return None
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)  # the pipe's last writer in this process: the filter sees the end
    os.close(devnull)
    status = None
    try:
        status = _FILTER.wait(timeout=timeout)
    except Exception:  # noqa: BLE001 - a slow filter must not keep the process from exiting
        pass
    _FILTER = None
    return status


if __name__ == "__main__":
    filter_lines(0, 1)
