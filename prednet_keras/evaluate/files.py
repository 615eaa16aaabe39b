"""The files of an evaluation: prediction_scores.json/.txt, the per-step plot, the Actual / Predicted grids
of prediction_plots/, and the comparison of several models (json, csv, txt, png). Written atomically.

Which metrics they show, with their labels, formats and units, is the table's (metrics.METRICS, or the one a
caller passes as `metrics`); the headline metric (the table's first, MSE) also gets kitti_evaluate.py's two
lines, its ratio and verdict, its previous-frame column per step, and the plots."""

import os
import shutil
from pathlib import Path

import numpy as np

from prednet_keras.files import diskwrite
from prednet_keras.files.figures import new_figure, save_png
from prednet_keras.evaluate.metrics import METRICS, headline
from prednet_keras.evaluate.scoring import baseline_verdict

__all__ = [
    "PER_STEP_PLOT",
    "PLOTS_DIR",
    "SCORES_JSON",
    "SCORES_TXT",
    "comparison_columns",
    "comparison_rows",
    "comparison_text",
    "plot_comparison",
    "plot_grid",
    "plot_per_step",
    "scores_text",
    "summary_line",
    "write_comparison",
    "write_scores",
]

SCORES_JSON = "prediction_scores.json"
SCORES_TXT = "prediction_scores.txt"
PLOTS_DIR = "prediction_plots"
PER_STEP_PLOT = "per_step.png"


def plot_sequences(count, plots):
    """The test sequences drawn in prediction_plots/: `plots` of them, evenly spread."""
    return [int(i) for i in np.unique(np.linspace(0, count - 1, min(plots, count)).round().astype(int))]


def plot_name(number, sequence):
    """prediction_plots/ file name: numbered 1, 2, ... and naming the test sequence drawn."""
    return f"plot_{number:02d}_sequence_{sequence:03d}.png"


def plot_note(sequences, count):
    """What prediction_plots/ holds, for prediction_scores.txt."""
    shown = ", ".join(str(i) for i in sequences)
    return (f"{len(sequences)} of the {count} test sequences ({shown}), evenly spread; "
            "plot_NN_sequence_III.png is plot NN, of test sequence III (from 0); rows Actual / Predicted")


def scores_text(scores, name=None, metrics=METRICS):
    """prediction_scores.txt: kitti_evaluate.py's two lines, then the rest."""
    first = headline(metrics)
    lines = [
        f"Model {first.label}: {scores[first.key('model')]:f}",
        f"Previous Frame {first.label}: {scores[first.key('prev')]:f}",
        "",
    ]
    if name:
        lines.append(f"model: {name}")
    lines.append(f"sequences: {scores['sequences']} x {scores['nt']} frames of "
                 f"{'x'.join(map(str, scores['frame_shape']))} (first step not scored)")
    for m in metrics:
        line = f"{m.label:<5} model {m.text(scores[m.key('model')])}   previous frame {m.text(scores[m.key('prev')])}"
        if m is first:
            ratio = scores.get(m.key("ratio"))
            lines += [line + (f"   ratio {ratio:.3f}" if ratio is not None else ""),
                      f"      {baseline_verdict(scores, metrics)}"]
        else:
            lines.append(line)
    extrap = scores.get("extrapolation")
    if extrap:
        lines += ["", f"extrapolation from step {extrap['start']} ({extrap['steps']} steps predicted from predictions):"]
        lines += [f"{m.label:<5} model {m.text(extrap[m.key('model')])}   last seen frame "
                  f"{m.text(extrap[m.key('last_seen')])}" for m in metrics]
    plotted = scores.get("plots")
    if plotted:
        lines += ["", f"{PLOTS_DIR}/: {plot_note(plotted, scores['sequences'])}"]
    # The table per step: every metric's model column, and the headline's previous-frame column beside its own.
    columns = []
    for m in metrics:
        fmt = m.step_format or m.value_format
        columns.append((f"{m.label} model", m.key("model"), fmt, m.step_width))
        if m is first:
            columns.append((f"{m.label} prev", m.key("prev"), fmt, m.step_width))
    per = scores["per_step"]
    lines += ["", "per time step:", " ".join([f"{'t':>3}"] + [f"{title:>{width}}" for title, _, _, width in columns])]
    for t in per["t"]:
        value_cells = [f"{'-' if per[key][t] is None else format(per[key][t], fmt):>{width}}"
                       for _, key, fmt, width in columns]
        lines.append(" ".join([f"{t:>3}"] + value_cells))
    return "\n".join(lines) + "\n"


def summary_line(scores, metrics=METRICS):
    """The scores in one line, as prednet-eval prints them after the model's name: the headline metric (MSE)
    against the previous frame's, the verdict in words, then the model's other metrics."""
    first = headline(metrics)
    others = ", ".join(f"{m.label} {m.text(scores[m.key('model')])}" for m in metrics if m is not first)
    return (f"{first.label} {first.text(scores[first.key('model')])} vs previous frame "
            f"{first.text(scores[first.key('prev')])}: {baseline_verdict(scores, metrics)}"
            + (f"; {others}" if others else ""))


def _show_frame(axes, frame):
    frame = np.clip(frame, 0, 1)
    if frame.shape[-1] == 1:
        axes.imshow(frame[..., 0], cmap="gray", vmin=0, vmax=1, interpolation="none")
    else:
        axes.imshow(frame, interpolation="none")
    axes.set_xticks([])
    axes.set_yticks([])


def plot_grid(X, Xhat, path, extrap_start=None, title=None):
    """One sequence as the original plots: 2 x nt frames, rows Actual / Predicted.

    Args:
        X: (nt, H, W, C) actual frames.
        Xhat: (nt, H, W, C) predictions.
        path: PNG to write (atomically).
        extrap_start: columns from this step on are marked as extrapolated.
        title: figure title.
    """
    nt = X.shape[0]
    aspect = X.shape[1] / X.shape[2]
    width = max(nt, 2) * 1.0
    figure = new_figure(width, 2 * (width / nt) * aspect * 1.06 + (0.45 if title else 0.3))
    grid = figure.add_gridspec(2, nt, wspace=0.03, hspace=0.03)
    for t in range(nt):
        for row, frames in enumerate((X, Xhat)):
            axes = figure.add_subplot(grid[row, t])
            _show_frame(axes, frames[t])
            extrapolated = extrap_start is not None and t >= extrap_start
            if row == 0:
                axes.set_title(f"t={t}", fontsize=7, color="tab:red" if extrapolated else "black")
            if extrapolated and row == 1:
                for spine in axes.spines.values():
                    spine.set_edgecolor("tab:red")
                    spine.set_linewidth(1.5)
            if t == 0:
                axes.set_ylabel("Actual" if row == 0 else "Predicted", fontsize=8)
    if title:
        figure.suptitle(title, fontsize=8)
    figure.subplots_adjust(left=0.04, right=0.995, bottom=0.01, top=0.86 if title else 0.9)
    save_png(figure, path, tight=False)


def plot_per_step(scores, path, title=None, metrics=METRICS):
    """The headline metric (MSE) per time step, model vs previous frame (and last seen frame when
    extrapolating)."""
    first = headline(metrics)
    per = scores["per_step"]
    figure = new_figure(6, 3.6)
    axes = figure.subplots()
    axes.plot(per["t"][1:], per[first.key("model")][1:], "o-", label="model")
    axes.plot(per["t"][1:], per[first.key("prev")][1:], "s--", label="previous frame")
    extrap = scores.get("extrapolation")
    if extrap:
        T = extrap["start"]
        axes.plot(per["t"][T:], extrap[f"per_step_{first.key('last_seen')}"][T:], "^:", label="last seen frame")
        axes.axvspan(T - 0.5, per["t"][-1] + 0.5, color="tab:red", alpha=0.07, label="extrapolated")
    axes.set_xlabel("time step t")
    axes.set_ylabel(first.label)
    axes.set_title(title or "prediction error per time step", fontsize=9)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    save_png(figure, path)


def write_scores(folder, scores, X=None, Xhat=None, plots=10, name=None, extrap_start=None, metrics=METRICS):
    """Writes prediction_scores.json/.txt, per_step.png and prediction_plots/.

    Earlier results in `folder` are replaced only once the new ones exist: the grids, the slow part, are
    drawn into a folder beside prediction_plots/ first, so a run stopped while drawing leaves the earlier
    scores and plots as they were; then each file is replaced atomically and the plots' folder swapped in.

    Args:
        folder: output folder (created).
        scores: from compute_scores (plus any context to keep in the JSON).
        X, Xhat: the frames and predictions, for the grids (None: no grids).
        plots: number of sequences to draw (evenly spread over the test set).
        name: model name for titles.
        extrap_start: marks extrapolated steps in the grids.
        metrics: the table of metrics the scores hold (metrics.METRICS).

    Returns:
        List of the files written.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / SCORES_JSON, folder / SCORES_TXT, folder / PER_STEP_PLOT]
    drawn = []
    staging = folder / f".{PLOTS_DIR}.new-{os.getpid()}"
    try:
        if X is not None and plots:
            scores = dict(scores, plots=plot_sequences(len(X), plots))
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir()
            for number, i in enumerate(plot_sequences(len(X), plots), start=1):
                drawn.append(plot_name(number, i))
                plot_grid(X[i], Xhat[i], staging / drawn[-1], extrap_start,
                          title=f"{name or ''} test sequence {i}".strip())
        diskwrite.atomic_write_json(written[0], scores)
        diskwrite.atomic_write(written[1], scores_text(scores, name, metrics))
        plot_per_step(scores, written[2], title=name, metrics=metrics)
        if drawn:
            _swap_in(staging, folder / PLOTS_DIR)
            written += [folder / PLOTS_DIR / file for file in drawn]
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return written


def _swap_in(new, target):
    """Puts folder `new` where `target` is: the earlier folder moved aside first and removed last, so that
    `target` never holds a mix of old and new files."""
    aside = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.exists():
        shutil.rmtree(aside, ignore_errors=True)
        os.rename(target, aside)
    os.rename(new, target)
    shutil.rmtree(aside, ignore_errors=True)


def comparison_columns(metrics=METRICS, extrapolated=False):
    """The comparison's columns: the model's name, then each metric's model and previous-frame scores (and the
    headline's ratio after them); with extrapolation, the headline's extrapolated scores last."""
    first = headline(metrics)
    columns = ["model"]
    for m in metrics:
        columns += [m.key("model"), m.key("prev")] + ([m.key("ratio")] if m is first else [])
    if extrapolated:
        columns += [f"extrap_{first.key('model')}", f"extrap_{first.key('last_seen')}"]
    return columns


def comparison_rows(results, metrics=METRICS):
    """One row per model for the comparison table.

    Args:
        results: list of (name, scores).
        metrics: the table of metrics the scores hold (metrics.METRICS).
    """
    first = headline(metrics)
    rows = []
    for name, scores in results:
        row = {"model": name}
        row.update({k: scores.get(k) for k in comparison_columns(metrics)[1:]})
        extrap = scores.get("extrapolation")
        if extrap:
            row[f"extrap_{first.key('model')}"] = extrap[first.key("model")]
            row[f"extrap_{first.key('last_seen')}"] = extrap[first.key("last_seen")]
        rows.append(row)
    return rows


def comparison_text(rows):
    """An aligned text table of comparison rows (their columns, in order), in the rows' order."""
    columns = list(dict.fromkeys(column for row in rows for column in row)) or comparison_columns()
    cells = [columns] + [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = []
    for index, row in enumerate(cells):
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))))
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def _cell(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) >= 1 else f"{value:.6f}"
    return str(value)


def plot_comparison(rows, path, metrics=METRICS):
    """Bar chart: the headline metric (MSE) of each model, the previous frame's as a marker per model."""
    first = headline(metrics)
    figure = new_figure(max(5, 1.1 * len(rows) + 2), 3.8)
    axes = figure.subplots()
    x = np.arange(len(rows))
    axes.bar(x, [r[first.key("model")] for r in rows], color="tab:blue", label=f"model {first.label}")
    axes.scatter(x, [r[first.key("prev")] for r in rows], color="tab:orange", marker="_", s=600, linewidths=2.5,
                 label=f"previous-frame {first.label}", zorder=3)
    axes.set_xticks(x)
    axes.set_xticklabels([r["model"] for r in rows], rotation=20 if len(rows) > 3 else 0, ha="right" if len(rows) > 3 else "center", fontsize=8)
    axes.set_ylabel(f"{first.label} (frames after the first)")
    axes.set_title("next-frame prediction error", fontsize=9)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize=8)
    save_png(figure, path)


def write_comparison(folder, results, metrics=METRICS):
    """Writes comparison.json, .csv, .txt and .png for several models, best headline score (MSE) first.

    Args:
        folder: output folder (created).
        results: list of (name, scores).
        metrics: the table of metrics the scores hold (metrics.METRICS).

    Returns:
        (rows, list of files written).
    """
    import csv
    import io

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    first = headline(metrics)
    rows = sorted(comparison_rows(results, metrics),
                  key=lambda r: (r[first.key("model")] is None, r[first.key("model")]))
    diskwrite.atomic_write_json(folder / "comparison.json", rows)
    buffer = io.StringIO()
    fields = list(rows[0].keys()) if rows else comparison_columns(metrics)
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    diskwrite.atomic_write(folder / "comparison.csv", buffer.getvalue())
    diskwrite.atomic_write(folder / "comparison.txt", comparison_text(rows))
    plot_comparison(rows, folder / "comparison.png", metrics)
    return rows, [folder / n for n in ("comparison.json", "comparison.csv", "comparison.txt", "comparison.png")]
