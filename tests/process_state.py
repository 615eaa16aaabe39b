"""Where a process that should have ended is, for a failed wait's message: read from /proc (Linux)."""

from pathlib import Path


def describe_process(pid):
    """The process's state, parent, threads and signal masks, where it waits, and its threads' states; "gone"
    once it has ended."""
    proc = Path("/proc", str(pid))
    try:
        status = [line for line in (proc / "status").read_text().splitlines()
                  if line.startswith(("State", "PPid", "Threads", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"))]
        threads = sorted(task.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0]
                         for task in (proc / "task").iterdir())
        waits = (proc / "wchan").read_text()
    except OSError:
        return "gone"
    return f"{'; '.join(status)}; waits in {waits!r}; thread states {''.join(threads)}"
