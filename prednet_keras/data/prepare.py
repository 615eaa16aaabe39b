"""From any source to frames: load_frames (in memory) and prepare (to a file).

Both stream: each frame is read, brought to the target size, scored for scene
cuts and handed on before the next is read, so prepare converts inputs far
larger than memory. Source ids are settled at the end, when scene cuts are
known (a cut splits a source into "<source>#scene0", "#scene1", ...).
"""

import sys
from datetime import datetime, timezone
from os import PathLike
from pathlib import Path

import numpy as np

from prednet_keras.data.arrays import ArraySource
from prednet_keras.data.dataset import (
    DEFAULT_MEMORY_LIMIT,
    DatasetWriter,
    FrameDataset,
    check_output,
)
from prednet_keras.data.errors import DataError
from prednet_keras.data.scenes import DEFAULT_RATIO, DEFAULT_THRESHOLD, DEFAULT_WINDOW, SceneTracker
from prednet_keras.data.source_base import Source
from prednet_keras.data.sources import open_source
from prednet_keras.data.transform import FrameTransform

SCENE_MODES = ("auto", True, False)


def _tool_version():
    try:
        from importlib.metadata import version

        return version("prednet-keras")
    except Exception:  # not installed: running from a bare checkout
        return "unknown"


def _as_paths(sources):
    if isinstance(sources, (str, PathLike, FrameDataset)):
        return [sources]
    sources = list(sources)
    if not sources:
        raise DataError("no sources given")
    return sources


def _open_all(sources, root):
    opened = []
    for item in _as_paths(sources):
        if isinstance(item, FrameDataset):
            opened.append(ArraySource(item.path or Path("<memory>"), item.frames, item.sources))
        elif isinstance(item, Source):
            opened.append(item)  # a reader made by the caller (kitti_raw's drives)
        else:
            opened.append(open_source(item, root))
    return opened


def _scene_mode(scene_cuts):
    if scene_cuts in ("auto", None):
        return "auto"
    if scene_cuts in (True, "on", "yes"):
        return True
    if scene_cuts in (False, "off", "no"):
        return False
    raise DataError(f"scene_cuts {scene_cuts!r} is not 'auto', True or False")


class _Bar:
    """A rich progress bar on stderr, or nothing."""

    def __init__(self, enabled, total):
        self.enabled, self.total = enabled, total
        self._progress = self._task = None

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("frames"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("frames", total=self.total)
        return self

    def describe(self, text):
        if self._progress is not None:
            self._progress.update(self._task, description=text)

    def advance(self):
        if self._progress is not None:
            self._progress.advance(self._task)

    def __exit__(self, *exc):
        if self._progress is not None:
            if exc[0] is None:
                # The total was the containers' estimate; a finished bar shows
                # the frames read, not "455/456" as if one had been lost.
                done = self._progress.tasks[0].completed
                self._progress.update(self._task, total=done)
            self._progress.__exit__(*exc)
        return False


def _stream(opened, transform, scene_mode, tracker, append, bar):
    """Reads every frame once; returns (per-frame source ids, cuts per source)."""
    runs = []  # (label, start, stop, detect)
    used = {}
    count = 0
    for source in opened:
        detect = scene_mode is True or (scene_mode == "auto" and source.kind == "video")
        bar.describe(source.path.name or str(source.path))
        for label, frames in source.runs():
            if label in used:
                used[label] += 1
                label = f"{label} ({used[label]})"
            used[label] = 1
            run, start = len(runs), count
            first_shape = first_where = None
            for frame, where in frames:
                if first_shape is None:
                    first_shape, first_where = frame.shape, where
                elif frame.shape != first_shape:
                    raise DataError(
                        f"{where}: frame is {'x'.join(map(str, frame.shape))} but {first_where} is "
                        f"{'x'.join(map(str, first_shape))}; frames of one sequence must share a size"
                    )
                out = transform(frame, where)
                if detect:
                    tracker.add(run, out)
                append(out, where)
                count += 1
                bar.advance()
            runs.append((label, start, count, detect))
    if count == 0:
        raise DataError(", ".join(str(s.path) for s in opened) + ": no frames")
    sources = np.empty(count, dtype=object)
    cuts_found = {}
    for run, (label, start, stop, detect) in enumerate(runs):
        cuts = tracker.cuts(run) if detect else []
        if not cuts:
            sources[start:stop] = label
            continue
        cuts_found[label] = cuts
        scene = np.searchsorted(np.asarray(cuts), np.arange(stop - start), side="right")
        sources[start:stop] = [f"{label}#scene{k}" for k in scene]
    return np.asarray(sources.tolist(), dtype=str), cuts_found


class _Collector:
    def __init__(self):
        self.frames, self.shape, self.first = [], None, None

    def __call__(self, frame, where):
        if self.shape is None:
            self.shape, self.first = frame.shape, where
        elif frame.shape != self.shape:
            raise DataError(
                f"{where}: frame is {'x'.join(map(str, frame.shape))} but {self.first} is "
                f"{'x'.join(map(str, self.shape))}: mixed sizes (give a size to bring them to one)"
            )
        self.frames.append(frame)


def load_frames(
    source,
    size=None,
    mode="resize_crop",
    offset=None,
    *,
    interpolation="bilinear",
    scene_cuts="auto",
    cut_threshold=DEFAULT_THRESHOLD,
    cut_ratio=DEFAULT_RATIO,
    root=None,
    in_memory=None,
    memory_limit=DEFAULT_MEMORY_LIMIT,
    progress=False,
):
    """Frames from any supported source, optionally resized, as a FrameDataset.

    A single array-like source (dataset file, KITTI .hkl, .h5, .npz, .npy)
    that needs no resizing comes back without a copy; files larger than
    `memory_limit` stay on disk and stream. Anything else is read frame by
    frame into memory (use prepare() to write a file instead).

    Args:
        source: a path (folder, list file, video, .hkl, .npz, .npy, .h5,
            dataset file), a FrameDataset, or a list of these (several list
            files = several sequences).
        size: target (H, W) or "HxW"; None keeps frames as they are (they
            must then share one size).
        mode: "resize_crop" (scale keeping the aspect ratio, centre crop) or
            "crop" (crop only).
        offset: (dy, dx) of the crop window from the centre.
        interpolation: resampling filter for resize_crop ("bilinear", the
            original's, "bicubic", "lanczos", "area", "nearest").
        scene_cuts: "auto" splits videos at detected hard cuts; True splits
            every source; False none.
        cut_threshold: absolute floor of a cut's frame difference (0-1).
        cut_ratio: how far a cut must stand above its neighbours' differences.
        root: folder that relative entries of list files are relative to.
        in_memory: for disk-backed results: True loads, False streams, None
            loads when frames take at most `memory_limit` bytes.
        memory_limit: see in_memory.
        progress: show a progress bar on stderr.

    Returns:
        A FrameDataset.
    """
    transform = FrameTransform(size, mode, offset, interpolation)
    scene_mode = _scene_mode(scene_cuts)
    if isinstance(source, FrameDataset) and transform.is_noop(source.frame_shape) and scene_mode is not True:
        return source
    opened = _open_all(source, root)
    if len(opened) == 1 and not (scene_mode is True or (scene_mode == "auto" and opened[0].kind == "video")):
        direct = opened[0].as_dataset()
        if direct is not None and transform.is_noop(direct.frame_shape):
            if in_memory or (in_memory is None and direct.nbytes <= memory_limit):
                loaded = direct.load()
                direct.close()
                return loaded
            return direct
    tracker = SceneTracker(cut_threshold, cut_ratio, DEFAULT_WINDOW)
    collect = _Collector()
    total = _total(opened)
    with _Bar(progress, total) as bar:
        sources, cuts = _stream(opened, transform, scene_mode, tracker, collect, bar)
    for item in opened:
        if getattr(item, "_handle", None) is not None:
            item._handle.close()
    provenance = {
        "inputs": [item.describe(hash_files=False) for item in opened],
        "transform": transform.config(),
        "scene_cuts": {"mode": scene_mode, **tracker.config(), "cuts": cuts},
    }
    return FrameDataset(np.stack(collect.frames), sources, provenance)


def _total(opened):
    estimates = [item.estimate() for item in opened]
    return None if any(e is None for e in estimates) else sum(estimates)


def prepare(
    sources,
    output,
    size,
    mode="resize_crop",
    offset=None,
    *,
    interpolation="bilinear",
    scene_cuts="auto",
    cut_threshold=DEFAULT_THRESHOLD,
    cut_ratio=DEFAULT_RATIO,
    root=None,
    overwrite=False,
    compression="none",
    hash_inputs=True,
    provenance=None,
    command=None,
    progress=False,
):
    """Converts sources into one dataset file (see dataset.py for the layout).

    The file is written to a temporary name beside `output` and moved into
    place only when complete; an existing `output` is never replaced unless
    `overwrite`. Nothing is read before the output is known to be writable.
    Inputs are checked as they are opened (see guards.py and pixels.py): a
    file that declares more than it holds, would unpack beyond the limits,
    or holds NaN, inf or out-of-range values is refused, naming the file,
    the place and the rule, and nothing is left behind. So is a full disk
    (see atomic.py).

    Args:
        sources: one path or a list of paths (see load_frames), or of opened data.source_base.Source
            readers.
        output: the .h5 file to write.
        size: target (H, W) or "HxW" (KITTI: 128x160); None keeps sizes.
        mode: "resize_crop" or "crop" (see load_frames).
        offset: (dy, dx) of the crop window from the centre.
        interpolation: see load_frames.
        scene_cuts: see load_frames.
        cut_threshold: see load_frames.
        cut_ratio: see load_frames.
        root: folder that relative entries of list files are relative to.
        overwrite: replace an existing output file.
        compression: "none" (default; fastest to stream), "gzip" (smaller;
            suits sets that fit in memory) or "lzf".
        hash_inputs: record the SHA-256 of each input file in the provenance.
        provenance: extra entries for the provenance record.
        command: the command line to record (default: this process's argv).
        progress: show a progress bar on stderr.

    Returns:
        The output path.
    """
    output = Path(output)
    check_output(output, overwrite)
    transform = FrameTransform(size, mode, offset, interpolation)
    scene_mode = _scene_mode(scene_cuts)
    opened = _open_all(sources, root)
    inputs = [item.describe(hash_files=hash_inputs) for item in opened]
    tracker = SceneTracker(cut_threshold, cut_ratio, DEFAULT_WINDOW)
    total = _total(opened)
    try:
        with DatasetWriter(output, overwrite, compression, total) as writer, _Bar(progress, total) as bar:
            ids, cuts = _stream(opened, transform, scene_mode, tracker, writer.append, bar)
            record = {
                "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "created_by": f"prednet-keras {_tool_version()} (prednet_keras.data.prepare)",
                "command": command if command is not None else " ".join(sys.argv),
                "inputs": inputs,
                "transform": transform.config(),
                "scene_cuts": {"mode": scene_mode, **tracker.config(), "cuts": cuts},
                "frames": int(len(ids)),
                "compression": writer.compression,
            }
            record.update(provenance or {})
            writer.finish(ids, record)
    finally:
        for item in opened:
            if getattr(item, "_handle", None) is not None:
                item._handle.close()
    return output
