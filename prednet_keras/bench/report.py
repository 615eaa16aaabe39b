"""A benchmark's results for people and files: the JSON document, the table, the plot."""

import os
import time

from prednet_keras import backends, model_kinds
from prednet_keras.bench.measure import NOT_AVAILABLE
from prednet_keras.bench.runner import BENCH_FORMAT, BENCH_FORMAT_VERSION, SYNTHETIC_DATA
from prednet_keras.session.records import Fingerprint, Runtime

__all__ = ["document", "format_table", "plot_results", "table_rows", "write_results"]


def document(results, command=None):
    """The JSON document of a benchmark: format, time, command, data, results (each with its fingerprint)."""
    from prednet_keras import __version__

    return {
        "format": BENCH_FORMAT,
        "format_version": BENCH_FORMAT_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": list(command) if command else None,
        "prednet_keras_version": __version__,
        "data": SYNTHETIC_DATA,
        "fps_definition": "batch * nt * timed steps / sum of timed step times (warm-up steps, which compile, excluded)",
        "results": results,
    }


def write_results(path, results, command=None, overwrite=False):
    """Writes the benchmark JSON to `path` atomically; refuses to replace a file unless `overwrite`."""
    from prednet_keras.files.diskwrite import atomic_write_json

    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; pass --overwrite to replace it.")
    atomic_write_json(path, document(results, command))


def _mib(value):
    return None if value is None else value / 2**20


def _peak_text(result):
    host = device = None
    for phase in ("train", "infer"):
        memory = (result.get(phase) or {}).get("memory") or {}
        if memory.get("host_rss_peak_bytes") is not None:
            host = max(host or 0, memory["host_rss_peak_bytes"])
        if memory.get("device_peak_bytes") is not None:
            device = max(device or 0, memory["device_peak_bytes"])
    parts = []
    parts.append(f"host {_mib(host):.0f} MiB" if host is not None else f"host {NOT_AVAILABLE}")
    if device is not None:
        parts.append(f"GPU {_mib(device):.0f} MiB")
    elif (Runtime.from_dict(result["runtime"]).requested.device or "cpu") != "cpu":
        parts.append(f"GPU {NOT_AVAILABLE}")
    return ", ".join(parts)


def table_rows(results):
    """One row (dict of display strings) per result."""
    rows = []
    for result in results:
        config = result["config"]
        runtime = Runtime.from_dict(result["runtime"])
        device = runtime.requested.device
        if runtime.effective is not None and runtime.effective.device == "gpu":
            fingerprint = Fingerprint.from_dict(result.get("fingerprint")) or Fingerprint()
            gpus = ((fingerprint.gpu or {}).get("nvidia_smi") or {}).get("gpus") or []
            if gpus:
                device = f"{device} ({gpus[0].get('name')})"
        timed = result.get("train") or result.get("infer")
        model = model_kinds.get(config["model"]).bench_row_name(config)
        rows.append({
            "model": model,
            "backend": backend_text(runtime),
            "device": device,
            "batch": str(config["batch_size"]),
            "size": f"{config['size'][0]}x{config['size'][1]}",
            "nt": str(config["nt"]),
            "train fps": f"{result['train']['fps']:.2f}" if "train" in result else "-",
            "infer fps": f"{result['infer']['fps']:.2f}" if "infer" in result else "-",
            "step ms median/p90": f"{timed['step_ms']['median_ms']:.1f}/{timed['step_ms']['p90_ms']:.1f}"
            + (" (train)" if "train" in result and "infer" in result else ""),
            "peak memory": _peak_text(result),
        })
    return rows


def backend_text(runtime):
    """The backend, with what changes its arithmetic or how it runs: torch.compile (with Inductor's CUDA
    graphs), a mixed precision (`runtime`: a records.Runtime)."""
    text = runtime.requested.backend
    backend = backends.find(text)
    # A backend that runs eager unless asked (torch) names a compiled run.
    if backend is not None and not backend.jit_by_default and runtime.get("jit_compile_used") is True:
        text += " compiled"
        environment = (runtime.effective and runtime.effective.environment) or {}
        if environment.get("TORCHINDUCTOR_CUDAGRAPHS") == "1":  # Inductor's CUDA graphs: another program
            text += " cudagraphs"
    return text if runtime.precision == "float32" else f"{text} {runtime.precision}"


def format_table(results):
    """The human-readable table: model, backend, device, batch, size, nt, train/infer frames/s,
    step time median/p90 (training when measured), peak memory; then what the figures mean."""
    rows = table_rows(results)
    columns = ["model", "backend", "device", "batch", "size", "nt", "train fps", "infer fps", "step ms median/p90", "peak memory"]
    widths = {c: max([len(c)] + [len(r[c]) for r in rows]) for c in columns}
    numeric = {"batch", "nt", "train fps", "infer fps"}

    def line(values):
        return "  ".join(values[c].rjust(widths[c]) if c in numeric else values[c].ljust(widths[c]) for c in columns).rstrip()

    out = [line({c: c for c in columns}), line({c: "-" * widths[c] for c in columns})]
    out += [line(r) for r in rows]
    if results:
        first = results[0]["config"]
        out.append("")
        out.append(
            f"fps: frames per second over {first['steps']} timed steps after {first['warmup']} warm-up step(s); "
            f"input {SYNTHETIC_DATA}."
        )
        out.append("Environment fingerprint and every step time: in the JSON (--json).")
    return "\n".join(out) + "\n"


def plot_results(results, path, title="prednet-bench throughput (synthetic input)", others=None):
    """Writes a PNG of frames/s against batch size and against frame size (pixels), one line per model,
    backend (compiled or not), precision and phase.

    `others`: {label: [(batch size, frames/s), ...]}, training figures measured by something else (another
    implementation timed beside ours), drawn dashed on the batch-size panel.

    A panel is drawn for each swept quantity that takes more than one value; with
    no sweep, one bar chart of the phases.
    """
    from prednet_keras.files.figures import new_figure, save_png

    def key(result, phase, by):
        config = result["config"]
        other = (
            f"{config['size'][0]}x{config['size'][1]}" if by == "batch" else f"batch {config['batch_size']}"
        )
        # The backend with what changes its arithmetic (torch.compile, the precision): one line each.
        return f"{config['model']} {backend_text(Runtime.from_dict(result['runtime']))} {phase}, {other}"

    batches = {r["config"]["batch_size"] for r in results}
    sizes = {tuple(r["config"]["size"]) for r in results}
    panels = [by for by, values in (("batch", batches), ("size", sizes)) if len(values) > 1] or ["none"]
    figure = new_figure(6 * len(panels), 4.2 if panels != ["none"] else 5.2)
    for index, by in enumerate(panels):
        axes = figure.add_subplot(1, len(panels), index + 1)
        if by == "none":
            labels, values = [], []
            for result in results:
                for phase in ("train", "infer"):
                    if phase in result:
                        backend = backend_text(Runtime.from_dict(result["runtime"]))
                        labels.append(f"{result['config']['model']} {backend} {phase}")
                        values.append(result[phase]["fps"])
            axes.bar(range(len(values)), values)
            axes.set_xticks(range(len(values)), labels, fontsize=7, rotation=40, ha="right")
            axes.set_ylabel("frames / s")
            continue
        lines = {}
        for result in results:
            for phase in ("train", "infer"):
                if phase not in result:
                    continue
                config = result["config"]
                x = config["batch_size"] if by == "batch" else config["size"][0] * config["size"][1]
                lines.setdefault(key(result, phase, by), []).append((x, result[phase]["fps"]))
        for label, points in sorted(lines.items()):
            points.sort()
            axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        for label, points in sorted((others or {}).items()) if by == "batch" else ():
            points = sorted(points)
            axes.plot([p[0] for p in points], [p[1] for p in points], marker="s", linestyle="--", color="gray",
                      label=label)
        axes.set_xlabel("batch size" if by == "batch" else "pixels per frame (H x W)")
        axes.set_ylabel("frames / s")
        axes.set_xscale("log", base=2)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=7)
    figure.suptitle(title, fontsize=10)
    save_png(figure, path)

