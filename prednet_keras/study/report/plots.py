"""The report's PNG plots: loss curves with bands, the final metric per
configuration (points over a box, like the paper's figure), divergence curves.

matplotlib's object API (Figure, no pyplot) with the Agg canvas: no display,
no global state shared with other plots in the process.
"""

import numpy as np

from prednet_keras.files.figures import new_figure, save_png

__all__ = ["draw_all", "plot_divergence", "plot_final_metric", "plot_log_ratios", "plot_loss_curves",
           "plot_weight_distance"]


def _colors(count):
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if count <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(count)]


def plot_loss_curves(configs, edges, curves, path, title=None):
    """Mean training loss per configuration over steps, with a +/- 1 SD band over seeds.

    Args:
        configs: configuration records (id, label), in legend order.
        edges: bin edges (global steps) the curves were averaged over.
        curves: {config id: {seed: binned curve}}.
        path: the PNG to write.
        title: plot title.
    """
    figure = new_figure(8, 4.8)
    axes = figure.subplots()
    centres = (np.asarray(edges[:-1]) + np.asarray(edges[1:])) / 2
    positive = True
    for config, color in zip(configs, _colors(len(configs))):
        per_seed = curves.get(config["id"]) or {}
        if not per_seed:
            continue
        stack = np.vstack(list(per_seed.values()))
        mean = stack.mean(axis=0)
        axes.plot(centres, mean, color=color, linewidth=1.4, label=f"{config['id']} (n={len(stack)})")
        if len(stack) > 1:
            sd = stack.std(axis=0, ddof=1)
            axes.fill_between(centres, mean - sd, mean + sd, color=color, alpha=0.2, linewidth=0)
            positive &= bool(np.all(mean - sd > 0))
        positive &= bool(np.all(mean > 0))
    if positive:
        axes.set_yscale("log")
    axes.set_xlabel("training step")
    axes.set_ylabel("training loss (mean over seeds, band: +/- 1 SD)")
    axes.set_title(title or "Loss curves per configuration", fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    save_png(figure, path, palette=True)


def plot_final_metric(configs, values, metric, path, title=None, seed=0):
    """The metric of every seed per configuration: points (jittered) over a box.

    Args:
        configs: configuration records (id, label).
        values: {config id: per-seed values}.
        metric: the metric's name (y label).
        path: the PNG to write.
        title: plot title.
        seed: seed of the horizontal jitter.
    """
    figure = new_figure(max(5.0, 0.8 * len(configs) + 2.5), 5.2)
    axes = figure.subplots()
    data = [np.asarray(values.get(c["id"], []), dtype=float) for c in configs]
    positions = np.arange(1, len(configs) + 1)
    boxed = [(p, d) for p, d in zip(positions, data) if d.size]
    if boxed:
        axes.boxplot([d for _, d in boxed], positions=[p for p, _ in boxed], widths=0.5, showfliers=False,
                     medianprops={"color": "black"})
    rng = np.random.default_rng(seed)
    for position, d, color in zip(positions, data, _colors(len(configs))):
        if d.size:
            axes.scatter(position + rng.uniform(-0.15, 0.15, d.size), d, s=16, color=color, alpha=0.8, zorder=3)
    axes.set_xticks(positions)
    # Configuration names are long (the spec's names): slanted, they do not overlap.
    axes.set_xticklabels([c["id"] for c in configs], rotation=30, ha="right", fontsize=8)
    axes.set_ylabel(metric)
    axes.set_xlabel("configuration (see report.md)")
    axes.set_title(title or "Final metric per configuration (one point per seed)", fontsize=10)
    axes.grid(alpha=0.3, axis="y")
    save_png(figure, path, palette=True)


def plot_divergence(divergence, path, title=None):
    """RMS distance between same-seed trajectories: pairs of configurations
    (solid), the 1-ulp baseline and replicates of one configuration (dashed).

    Args:
        divergence: the report's divergence dict (between, baseline, replicates).
        path: the PNG to write.
        title: plot title.
    """
    figure = new_figure(8, 4.8)
    axes = figure.subplots()
    items = ([(f"{d['a']} vs {d['b']}", "-", d) for d in divergence.get("between", [])]
             + [(f"{d['configuration']} nudged", "--", d) for d in divergence.get("baseline", [])]
             + [(f"{d['configuration']} replicates", ":", d) for d in divergence.get("replicates", [])])
    positive = True
    for (label, style, d), color in zip(items, _colors(len(items))):
        axes.plot(d["steps"], d["median"], style, color=color, label=f"{label} (n={d['n']})")
        if d["n"] > 1:
            axes.fill_between(d["steps"], d["q25"], d["q75"], color=color, alpha=0.15, linewidth=0)
        positive &= all(v > 0 for v in d["median"])
    if positive and items:
        axes.set_yscale("log")
    axes.set_xlabel("training step")
    axes.set_ylabel("RMS distance (median over seeds, band: quartiles)")
    axes.set_title(title or "Divergence of same-seed runs", fontsize=10)
    axes.grid(alpha=0.3)
    if items:
        axes.legend(fontsize=8)
    save_png(figure, path, palette=True)


def plot_log_ratios(panels, margin, path, title=None, seed=0):
    """What a confirmatory test uses: the per-seed log-ratios d_s = ln(arm_s / reference_s), one point per
    seed, a column per contrast and per noise floor, one panel per metric; the band of +/- margin and, where
    given, the noise floor's band.

    Args:
        panels: [{"metric", "columns": [{"label", "values", "floor": bool}], "noise_band": a half-width or
            None, "noise_label"}], one per metric.
        margin: the equivalence margin (log-ratio).
        path: the PNG to write.
        title: the figure's title.
        seed: seed of the horizontal jitter.
    """
    width = max(6.0, 0.9 * max((len(p["columns"]) for p in panels), default=1) + 3.0)
    figure = new_figure(width, 4.2 * max(1, len(panels)))
    rng = np.random.default_rng(seed)
    for number, panel in enumerate(panels, 1):
        axes = figure.add_subplot(len(panels), 1, number)
        columns = panel["columns"]
        axes.axhspan(-margin, margin, color="tab:green", alpha=0.15, linewidth=0,
                     label=f"margin: |d| < ln(1 + {100 * np.expm1(margin):.3g}%)")
        if panel.get("noise_band"):
            band = panel["noise_band"]
            axes.axhspan(-band, band, facecolor="none", edgecolor="tab:blue", hatch="//", alpha=0.5, linewidth=0,
                         label=panel.get("noise_label") or "noise floor")
        for position, (column, color) in enumerate(zip(columns, _colors(len(columns))), 1):
            values = np.asarray(column["values"], dtype=float)
            axes.scatter(position + rng.uniform(-0.15, 0.15, values.size), values, s=14, zorder=3, alpha=0.8,
                         color="grey" if column.get("floor") else color, marker="x" if column.get("floor") else "o")
        axes.axhline(0.0, color="black", linewidth=0.6)
        # Per-seed differences span orders of magnitude (1e-4 to 0.5): linear near 0, logarithmic beyond.
        axes.set_yscale("symlog", linthresh=margin / 10)
        axes.set_xticks(np.arange(1, len(columns) + 1))
        axes.set_xticklabels([c["label"] for c in columns], rotation=20, ha="right", fontsize=8)
        axes.set_xlim(0.4, len(columns) + 0.6)
        axes.margins(y=0.08)
        axes.set_ylabel("d = ln(arm / reference)", fontsize=9)
        axes.set_title(panel["metric"], fontsize=9, loc="left")
        axes.grid(alpha=0.3, axis="y")
        # Above the axes: inside, it would cover the seeds of some column.
        axes.legend(fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, frameon=False)
    figure.suptitle(title or "Per-seed log-ratios (one point per seed; x: a noise floor)", fontsize=10)
    save_png(figure, path, palette=True)


def plot_weight_distance(curves, path, title=None):
    """The median over seeds of two runs' normalised weight distance at each snapshot, one line per contrast,
    on a log axis. A distance of 0 (equal weights) has no place on it: it is drawn as an open marker on the
    axis' lower edge, so that a contrast whose weights never differ is shown, not dropped.

    Args:
        curves: [{"label", "steps", "median", "floor": bool}], one per contrast; a floor is dashed.
        path: the PNG to write.
        title: the figure's title.
    """
    import matplotlib.transforms

    figure = new_figure(8, 4.8)
    axes = figure.subplots()
    at_edge = matplotlib.transforms.blended_transform_factory(axes.transData, axes.transAxes)
    zero_shown = False
    for curve, color in zip(curves, _colors(len(curves))):
        steps, median = np.asarray(curve["steps"], dtype=float), np.asarray(curve["median"], dtype=float)
        positive = median > 0
        label = curve["label"] + ("" if positive.any() else ": 0 at every snapshot")
        axes.plot(steps, np.where(positive, median, np.nan), "--" if curve.get("floor") else "-", marker=".",
                  color=color, label=label)
        if not positive.all():
            axes.plot(steps[~positive], np.full((~positive).sum(), 0.02), "o", markerfacecolor="none",
                      color=color, transform=at_edge, clip_on=False)
            zero_shown = True
    if any(np.any(np.asarray(c["median"]) > 0) for c in curves):
        axes.set_yscale("log")
    axes.set_xlabel("update (trajectory snapshot)")
    axes.set_ylabel("normalised L2 |a - b| / |b| (median over seeds)")
    axes.set_title(title or "Weights over training: two runs of one seed", fontsize=10)
    axes.grid(alpha=0.3)
    if zero_shown:
        axes.text(0.99, 0.05, "open markers on the lower edge: 0 (equal weights)", transform=axes.transAxes,
                  ha="right", va="bottom", fontsize=7)
    if curves:
        axes.legend(fontsize=8)
    save_png(figure, path, palette=True)


def draw_all(context, folder, prefix=""):
    """Every plot of one protocol.

    Args:
        context: the protocol's plot context from report.build_report.
        folder: the report folder.
        prefix: file-name prefix (e.g. "P2-" with several protocols).

    Returns:
        {plot name: file name} of what was written.
    """
    written = {}
    configs = context["configs"]
    name = f"{prefix}final_metric.png"
    plot_final_metric(configs, context["values"], context["metric"], folder / name)
    written["final_metric"] = name
    if context.get("curves"):
        name = f"{prefix}loss_curves.png"
        plot_loss_curves(configs, context["curves"]["edges"], context["curves"]["curves"], folder / name)
        written["loss_curves"] = name
    if context.get("divergence"):
        name = f"{prefix}divergence.png"
        plot_divergence(context["divergence"], folder / name)
        written["divergence"] = name
    return written
