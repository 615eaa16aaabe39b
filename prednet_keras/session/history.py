"""A run's history: history.csv (one row per training step and one per epoch), appended row by row and
rewritten whole, and its loss curves (loss.png). No framework at import."""

import csv
import io
from pathlib import Path

from prednet_keras.files.figures import new_figure, save_png


# kind: "step" rows carry the loss of one batch; "epoch" rows the mean training
# loss of the epoch and the validation loss. epoch and step count from 1.
HISTORY_FIELDS = ("kind", "epoch", "step", "global_step", "loss", "val_loss", "lr", "seconds")


def parse_row(row):
    """One row of history.csv as read by csv.DictReader, its numbers typed (empty cells: None)."""
    parsed = {}
    for key, value in row.items():
        if key == "kind":
            parsed[key] = value
        elif value in ("", None):
            parsed[key] = None
        elif key in ("epoch", "step", "global_step"):
            parsed[key] = int(value)
        else:
            parsed[key] = float(value)
    return parsed


def csv_text(rows):
    """history.csv's whole text for `rows` (the file is rewritten whole, e.g. a resume's rows cut)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=HISTORY_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _format_value(row.get(k)) for k in HISTORY_FIELDS})
    return buffer.getvalue()


def _format_value(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return value


class HistoryWriter:
    """Appends rows to history.csv, flushing each so a crash loses at most the
    row being written (the partial epoch is dropped on resume anyway).

    Args:
        path: the CSV file.
        columns: its columns (HISTORY_FIELDS: Lotter's recipe's; a model kind's protocol says its own).
        fresh: start the file anew (header included) instead of appending to it.
    """

    def __init__(self, path, columns=HISTORY_FIELDS, fresh=False):
        self.path = Path(path)
        self.columns = tuple(columns)
        new = fresh or not self.path.is_file() or self.path.stat().st_size == 0
        self._handle = open(self.path, "w" if fresh else "a", newline="", encoding="utf-8")
        self._writer = csv.DictWriter(self._handle, fieldnames=self.columns, lineterminator="\n")
        if new:
            self._writer.writeheader()
            self._handle.flush()

    def write(self, **row):
        """Appends one row (keys from its columns; others are left out)."""
        self._writer.writerow({k: _format_value(row.get(k)) for k in self.columns})
        self._handle.flush()

    def close(self):
        """Closes the file."""
        self._handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def plot_history(rows, path, title=None):
    """Draws the loss curves of a history (per-step losses faint, epoch means
    and validation loss bold, log scale) to a PNG, atomically.

    Args:
        rows: history rows (as from RunFolder.read_history).
        path: the PNG to write.
        title: plot title.
    """
    steps = [r for r in rows if r["kind"] == "step" and r["loss"] is not None]
    epochs = [r for r in rows if r["kind"] == "epoch"]
    figure = new_figure(7, 4.2)
    axes = figure.subplots()
    if steps:
        per_epoch = max(r["step"] for r in steps)
        axes.plot(
            [r["global_step"] / per_epoch for r in steps],
            [r["loss"] for r in steps],
            color="tab:blue",
            alpha=0.25,
            linewidth=0.8,
            label="training loss (per step)",
        )
    if epochs:
        axes.plot(
            [r["epoch"] for r in epochs],
            [r["loss"] for r in epochs],
            "o-",
            color="tab:blue",
            markersize=3,
            label="training loss (epoch mean)",
        )
        validated = [r for r in epochs if r["val_loss"] is not None]
        if validated:
            axes.plot(
                [r["epoch"] for r in validated],
                [r["val_loss"] for r in validated],
                "s-",
                color="tab:orange",
                markersize=3,
                label="validation loss",
            )
            best = min(validated, key=lambda r: r["val_loss"])
            axes.axvline(best["epoch"], color="tab:orange", linestyle=":", linewidth=1)
    positive = [r["loss"] for r in steps + epochs if r["loss"]] + [r["val_loss"] for r in epochs if r["val_loss"]]
    if positive and min(positive) > 0:
        axes.set_yscale("log")
    axes.set_xlabel("epoch")
    axes.set_ylabel("loss (weighted prediction error)")
    if title:
        axes.set_title(title, fontsize=10)
    if steps or epochs:
        axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    save_png(figure, path)


def update_rows(records):
    """The rows `plot_history` draws of a run counted in updates (a protocol's): one step per update,
    all in one epoch."""
    return [
        {"kind": "step", "epoch": 1, "step": r["update"], "global_step": r["update"], "loss": r["loss"]}
        for r in records
    ]


def draw_loss(rows, path, title=None):
    """`plot_history`, for a run: a plot is a convenience, never a reason to stop or fail a run, so a
    failure (a full disk, a broken font cache) is printed as a warning.

    Returns:
        True when loss.png was written.
    """
    try:
        plot_history(rows, path, title=title)
    except Exception as error:
        print(f"warning: {Path(path).name} not drawn ({type(error).__name__}: {error})", flush=True)
        return False
    return True
