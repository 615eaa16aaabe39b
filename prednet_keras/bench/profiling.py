"""Where a step's time goes: a backend's own profiler around some steps, and a summary of its trace.

`trace(directory)` records whatever runs inside it with the profiler of the
Keras backend in use:

    jax         jax.profiler (XLA ops and GPU kernels), written as
                DIRECTORY/plugins/profile/<run>/*.xplane.pb plus a Chrome trace
                (*.trace.json.gz) that needs no TensorFlow to read
    torch       torch.profiler (CPU ops, CUDA kernels when a GPU is used),
                written as DIRECTORY/trace.json (Chrome trace)
    tensorflow  tf.profiler, written as DIRECTORY/plugins/profile/<run>/*.xplane.pb
                (also TensorBoard's profile plugin's input)

`summarize(directory)` reads the traces found under DIRECTORY (Chrome traces;
TensorFlow's xplane files where TensorFlow is installed) and, for
each timeline (a device's streams, the host's threads), adds up the time of
the recorded events by name: how much of the traced wall time the timeline was
busy, how many events ran, and which operations took the time. Figures taken
under a profiler are slower than plain ones; use them for shares, not for
frames per second.
"""

import contextlib
import glob
import gzip
import json
import os
import re

from prednet_keras import backends

__all__ = ["ProfileError", "format_summary", "summarize", "trace"]


class ProfileError(RuntimeError):
    """No trace to read, or a trace that cannot be read (the message says which file)."""


def trace(directory):
    """Profiles the body with the current Keras backend's profiler (Backend.profiler) into `directory`."""
    import keras

    os.makedirs(directory, exist_ok=True)
    backend = backends.find(keras.backend.backend())
    if backend is None:
        raise ProfileError(f"no profiler for the {keras.backend.backend()} backend")
    return backend.profiler(directory)


@contextlib.contextmanager
def trace_jax(directory):
    """jax.profiler around the body (Backend.profiler)."""
    import jax

    jax.profiler.start_trace(directory, create_perfetto_trace=True)
    try:
        yield
    finally:
        jax.profiler.stop_trace()


@contextlib.contextmanager
def trace_torch(directory):
    """torch.profiler around the body, its Chrome trace written as trace.json (Backend.profiler)."""
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profiler:
        yield
    profiler.export_chrome_trace(os.path.join(directory, "trace.json"))


@contextlib.contextmanager
def trace_tensorflow(directory):
    """tf.profiler around the body (Backend.profiler)."""
    import tensorflow as tf

    tf.profiler.experimental.start(directory)
    try:
        yield
    finally:
        tf.profiler.experimental.stop()


def _trace_files(directory):
    # One file per profiling session: jax writes the same events as HOST.trace.json.gz and
    # perfetto_trace.json.gz (and HOST.xplane.pb); reading two would count every event twice.
    # TensorFlow writes only the xplane file.
    found = []
    sessions = {os.path.dirname(p) for pattern in ("*.json*", "*.xplane.pb")
                for p in glob.glob(os.path.join(directory, "**", pattern), recursive=True)}
    for folder in sorted(sessions):
        for pattern in ("*.trace.json.gz", "trace.json", "*.trace.json", "perfetto_trace.json.gz", "*.xplane.pb"):
            matches = sorted(glob.glob(os.path.join(folder, pattern)))
            if matches:
                found.extend(matches)
                break
    if not found:
        raise ProfileError(f"no profiler trace (*.trace.json[.gz], trace.json, *.xplane.pb) under {directory}")
    return found


def _load(path):
    """The complete events of a trace file as (process, thread, name, start_us, duration_us)."""
    if path.endswith(".xplane.pb"):
        return _load_xplane(path)
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError, EOFError) as error:
        raise ProfileError(f"{path} is not a readable Chrome trace ({error})") from None
    events = data.get("traceEvents", data) if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ProfileError(f"{path} has no traceEvents list")
    processes = {e.get("pid"): e.get("args", {}).get("name") for e in events
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e.get("pid"), e.get("tid")): e.get("args", {}).get("name") for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return [(str(processes.get(e.get("pid")) or e.get("pid")),
             str(threads.get((e.get("pid"), e.get("tid"))) or e.get("tid")),
             str(e.get("name", "?")), float(e["ts"]), float(e["dur"]))
            for e in events if e.get("ph") == "X" and "dur" in e]


def _load_xplane(path):
    # The XSpace protocol buffer ships with TensorFlow only, the one backend that writes no Chrome trace.
    try:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2
    except ImportError:
        raise ProfileError(f"{path} is an xplane file; reading it needs TensorFlow installed") from None
    space = xplane_pb2.XSpace()
    try:
        with open(path, "rb") as handle:
            space.ParseFromString(handle.read())
    except Exception as error:  # protobuf's DecodeError, OSError
        raise ProfileError(f"{path} is not a readable xplane file ({error})") from None
    events = []
    for plane in space.planes:
        for line in plane.lines:
            thread = line.display_name or line.name
            for event in line.events:
                metadata = plane.event_metadata[event.metadata_id]
                # TensorFlow names an op event "scope/name:Type" and gives the op type as display_name.
                events.append((plane.name, thread, metadata.display_name or metadata.name,
                               (line.timestamp_ns * 1000 + event.offset_ps) / 1e6, event.duration_ps / 1e6))
    return events


def _busy_us(intervals):
    """Time covered by the union of (start, end) intervals: nested or overlapping events count once."""
    busy, reach = 0.0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            busy += end - start
            reach = end
        elif end > reach:
            busy += end - reach
            reach = end
    return busy


def operation_kind(name):
    """An event's name without XLA's instance number (`fusion.12` -> `fusion`), so repeats add up."""
    return re.sub(r"\.\d+$", "", name)


def summarize(directory, top=15):
    """Per timeline of the traces under `directory`: busy time, event count, the operations taking the time.

    Events are grouped by `operation_kind`. On host threads events nest (a
    step encloses the calls it makes), so their shares overlap; a GPU stream's
    kernels do not.

    Returns:
        {"files": [...], "timelines": [{"process", "thread", "span_ms", "busy_ms",
        "busy_share", "events", "top": [{"name", "total_ms", "share", "count",
        "mean_us"}]}]}, timelines ordered by busy time. `share` is the name's
        part of the timeline's summed event time.
    """
    files = _trace_files(directory)
    timelines = {}
    for path in files:
        for process, thread, name, start, duration in _load(path):
            line = timelines.setdefault((path, process, thread), {
                "process": process, "thread": thread, "intervals": [], "names": {}})
            line["intervals"].append((start, start + duration))
            kind = operation_kind(name)
            total, count = line["names"].get(kind, (0.0, 0))
            line["names"][kind] = (total + duration, count + 1)
    summary = []
    for line in timelines.values():
        starts = [s for s, _ in line["intervals"]]
        ends = [e for _, e in line["intervals"]]
        span = max(ends) - min(starts)
        busy = _busy_us(line["intervals"])
        summed = sum(total for total, _ in line["names"].values()) or 1.0
        ranked = sorted(line["names"].items(), key=lambda item: -item[1][0])[:top]
        summary.append({
            "process": line["process"],
            "thread": line["thread"],
            "span_ms": round(span / 1000, 3),
            "busy_ms": round(busy / 1000, 3),
            "busy_share": round(busy / span, 4) if span else None,
            "events": sum(count for _, count in line["names"].values()),
            "top": [{"name": name, "total_ms": round(total / 1000, 3), "share": round(total / summed, 4),
                     "count": count, "mean_us": round(total / count, 2)} for name, (total, count) in ranked],
        })
    summary.sort(key=lambda line: -line["busy_ms"])
    return {"files": files, "timelines": summary}


def format_summary(summary, timelines=6, names=10, steps=None):
    """A readable text of `summarize`'s result (the busiest timelines; per step where `steps` is given)."""
    out = []
    for line in summary["timelines"][:timelines]:
        per_step = f", {line['events'] / steps:.0f} events per step" if steps else ""
        out.append(f"{line['process']} / {line['thread']}: busy {line['busy_ms']:.1f} of {line['span_ms']:.1f} ms "
                   f"({100 * (line['busy_share'] or 0):.0f}%), {line['events']} events{per_step}")
        for entry in line["top"][:names]:
            out.append(f"  {100 * entry['share']:5.1f}%  {entry['total_ms']:9.2f} ms  {entry['count']:6d} x "
                       f"{entry['mean_us']:9.1f} us  {entry['name'][:90]}")
    return "\n".join(out) + "\n"
