"""What a training run prints while it trains, the same on a terminal, a pipe or a log file.

Every protocol of the training session uses it through the Keras callbacks in `callbacks`: Lotter's
recipe (`recipe_training.run_training`: `ProgressLogger`, which adds a per-epoch bar on a terminal) and a
model kind's protocol counted in updates (`protocol_training.run_protocol`: `UpdateProgressLines`).

- `FirstStep`: a phase's first step compiles and can take over a minute (74 s with XLA on a GPU)
  while printing nothing by itself, so a log, a pipe or nohup would show a process that looks hung;
  it says so before the step and how long it took after. An eager step (torch without torch.compile)
  compiles nothing and is not announced.
- `UpdateProgress`: a run counted in updates: its first update, then a line every `every` updates
  with the loss, the time so far and the time left.
- `is_terminal`: whether a bar redrawn with carriage returns belongs on a stream.

Lines are flushed as they are printed: progress must reach a file or a pipe while it happens.
`is_terminal` and `duration_text` live in `progress` (downloads print with them too).
No framework at import.
"""

import time

from prednet_keras.files.progress import duration_text, is_terminal

__all__ = ["FirstStep", "UpdateProgress", "duration_text", "is_terminal"]


class FirstStep:
    """Announces the first, compiling, step of one phase of a run, once.

    Args:
        what: the step's name in "Compiling the {what}" ("training step").
        first: its name in "first {first} done" ("training step").
        by: what does the compiling, in "(done by the {by}" ("first step").
        compiles: whether the step compiles (Backend.steps_compile); an eager one is not announced
            (set before `begin`).
    """

    def __init__(self, what, first, by, compiles=True):
        self.what = what
        self.first = first
        self.by = by
        self.compiles = compiles
        self._started = None
        self.done = False

    def begin(self, lead=""):
        """Before the step: says that it compiles (`lead` starts the line, e.g. below a bar)."""
        if not self.compiles:
            self.done = True
        elif self._started is None and not self.done:
            print(f"{lead}Compiling the {self.what} (done by the {self.by}; can take a minute or more) ...",
                  flush=True)
            self._started = time.perf_counter()

    def end(self):
        """After the step: how long it took; later calls print nothing."""
        if self._started is not None:
            seconds = time.perf_counter() - self._started
            print(f"  first {self.first} done in {seconds:.1f} s (compilation included)", flush=True)
            self._started = None
            self.done = True


class UpdateProgress:
    """Progress lines of a run counted in updates.

    The first update's lines (where it compiles: FirstStep), then one every `every` updates and at the last:
    "LABEL update 40/200: loss 0.0123 (12.3 s, about 49.2 s left)". The time left is the mean time
    of the updates after the first (which may compile) times the updates still to run.

    Args:
        label: what is trained, starting each line.
        total: the updates the run makes.
        every: updates between two lines (at least 1).
        done: updates already made (a continued run: its first update here is done + 1, and compiles).
        compiles: whether the update step compiles (FirstStep).
    """

    def __init__(self, label, total, every, done=0, compiles=True):
        self.label = label
        self.total = int(total)
        self.every = max(1, int(every))
        self.done = int(done)
        self.first = FirstStep("update step", "update", "first update", compiles)
        self._started = None
        self._after_first = None

    def start(self):
        """Before the first update."""
        self._started = time.perf_counter()
        self.first.begin()

    def __call__(self, record):
        """After each update, with its record ({"update", "loss", ...})."""
        now = time.perf_counter()
        if self._started is None:
            self._started = now
        number = int(record["update"])
        if number == self.done + 1:
            self.first.end()
            self._after_first = now
        if number % self.every and number != self.total:
            return
        elapsed = now - self._started
        left = ""
        if number < self.total and number > self.done + 1 and self._after_first is not None:
            per_update = (now - self._after_first) / (number - self.done - 1)
            left = f", about {duration_text(per_update * (self.total - number))} left"
        print(f"{self.label} update {number}/{self.total}: loss {record['loss']:.6g} "
              f"({duration_text(elapsed)}{left})", flush=True)
