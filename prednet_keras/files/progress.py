"""What long work prints while it happens, the same on a terminal, a pipe or a log file.

- `is_terminal`, `duration_text`: the words every display shares (session.display, a training's lines, uses
  them too).
- `ByteProgress`: a transfer counted in bytes (a download, an unpacking). On a terminal, a bar redrawn in
  place on stderr (rich); anywhere else (a pipe, a log file, nohup), a line every `every` seconds and one
  at the end. A bar drawn with carriage returns fills a log with one very long line, and rich draws
  nothing on a stream that is not a terminal until the work is over, so a log would show a download
  that looks hung.

No framework at import; rich is imported only when a bar is drawn.
"""

import sys
import time

from prednet_keras.files.diskwrite import format_bytes

__all__ = ["ByteProgress", "duration_text", "is_terminal"]


def is_terminal(stream):
    """Whether `stream` is an interactive terminal (a closed or odd stream is not)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def duration_text(seconds):
    """Seconds as a person reads them: 42.0 s, 3 min 05 s, 1 h 02 min."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class ByteProgress:
    """The progress of one transfer of bytes, shown while it runs.

    Use as a context manager: `update(n)` after each block; leaving the block without an error prints
    the closing line (a line mode) or the finished bar.

    Args:
        label: what is transferred, starting each line ("kitti_data.zip").
        total: bytes the transfer will have moved at the end, if known.
        done: bytes already there when it starts (a resumed download); they count towards `total` but
            not towards the speed.
        stream: where it prints (default: sys.stderr, read when the progress starts).
        every: seconds between two lines when `stream` is not a terminal.
        enabled: False shows nothing (--quiet).
    """

    def __init__(self, label, total=None, done=0, stream=None, every=10.0, enabled=True):
        self.label = label
        self.total = total
        self.done = int(done)
        self.stream = stream
        self.every = float(every)
        self.enabled = enabled
        self._first = self.done
        self._started = self._last_line = None
        self._bar = self._task = None

    def __enter__(self):
        self.stream = self.stream if self.stream is not None else sys.stderr
        self._started = self._last_line = time.perf_counter()
        if self.enabled and is_terminal(self.stream):
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                 TransferSpeedColumn(), TimeRemainingColumn(), console=Console(file=self.stream))
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=self.total, completed=self.done)
        elif self.enabled and self.done:
            self._print(f"{self.label}: continuing after {self._amount(self.done)}")
        return self

    def update(self, count):
        """`count` more bytes moved."""
        self.done += count
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)
            return
        now = time.perf_counter()
        if self.enabled and now - self._last_line >= self.every:
            self._last_line = now
            self._print(self._line(now))

    def __exit__(self, exc_type, exc, tb):
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)
        elif self.enabled and exc_type is None:
            seconds = time.perf_counter() - self._started
            speed = self._speed(seconds)
            self._print(f"{self.label}: {format_bytes(self.done)} in {duration_text(seconds)}"
                        + (f" ({speed})" if speed else ""))
        return False

    def _line(self, now):
        seconds = now - self._started
        parts = [self._amount(self.done)]
        speed = self._speed(seconds)
        if speed:
            parts.append(speed)
        moved = self.done - self._first
        if self.total and moved > 0 and self.done < self.total:
            parts.append(f"about {duration_text((self.total - self.done) * seconds / moved)} left")
        return f"{self.label}: " + ", ".join(parts)

    def _amount(self, count):
        if not self.total:
            return format_bytes(count)
        return f"{format_bytes(count)} of {format_bytes(self.total)} ({100 * count / self.total:.0f}%)"

    def _speed(self, seconds):
        moved = self.done - self._first
        return f"{format_bytes(int(moved / seconds))}/s" if seconds > 0 and moved > 0 else ""

    def _print(self, line):
        print(line, file=self.stream, flush=True)
