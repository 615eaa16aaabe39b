"""Two runs of one seed compared through their large files, where those files are: held-out predictions,
weight trajectories and the per-update losses.

A study's archive keeps each run's manifest, history and log, not its model, its
held-out predictions (`heldout_predictions.npz`, megabytes) or its weight
trajectory (`trajectory.npz`). What needs those is computed on the machine that
trained the runs, one seed at a time, and kept as small numbers:

    DIR/pairs/seed-NNNN.json.xz   every pair of the seed's complete runs:
        prediction_rms          RMS over every held-out pixel of (a - b)
        prediction_rms_per_sequence   the same per held-out sequence
        prediction_scale        RMS of b's predictions (so that a disagreement can be read relatively)
        weight_distance         at each trajectory snapshot (steps): normalised L2 |a - b| / |b| and
                                cosine distance 1 - cos(a, b) of the two runs' sampled weights
        first_differing_update  the first update whose logged loss differs (None: none differs)

A seed is written only when every planned run of it is complete: afterwards its
large files may be gone, and a later portion of the study could not add a pair.
Pure NumPy and files: no framework.
"""

import json
import lzma
import math
from pathlib import Path

import numpy as np

from prednet_keras.files import diskwrite
from prednet_keras.session.protocol_training import HELDOUT_PREDICTIONS
from prednet_keras.study.stats.divergence import normalised_distances
from prednet_keras.study.report.run_records import load_run

__all__ = ["FOLDER", "PairsError", "compare_runs", "pairs_file", "read_pairs_folder", "read_seed_pairs",
           "remove_runs", "write_seed_pairs"]

FOLDER = "pairs"
FORMAT = "prednet-keras seed pairs"


class PairsError(ValueError):
    """Two runs that cannot be compared (files missing, shapes that differ, values that are not finite)."""


def pairs_file(study_dir, seed):
    return Path(study_dir) / FOLDER / f"seed-{seed:04d}.json.xz"


def _finite(values, what):
    if not np.all(np.isfinite(values)):
        raise PairsError(f"{what}: holds NaN or inf; no distance is computed from it.")
    return values


def _predictions(run_dir):
    path = Path(run_dir) / HELDOUT_PREDICTIONS
    if not path.is_file():
        return None
    with np.load(path) as data:
        return {name: _finite(np.asarray(data[name], dtype=np.float64), f"{path} [{name}]") for name in data.files}


def _prediction_disagreement(a, b, where):
    if a is None or b is None:
        return {}
    if list(a) != list(b):
        raise PairsError(f"{where}: the two runs predicted different held-out sequences.")
    per_sequence, squares, reference, count = {}, 0.0, 0.0, 0
    for name in a:
        if a[name].shape != b[name].shape:
            raise PairsError(f"{where}: held-out sequence {name} has predictions of shape {a[name].shape} "
                             f"and {b[name].shape}.")
        # Sums of squares as dot products: a full-size run predicts 39 million values, and squaring them into
        # a temporary took about half of a pair's time.
        difference = (a[name] - b[name]).ravel()
        total = float(np.dot(difference, difference))
        per_sequence[name] = math.sqrt(total / difference.size)
        squares += total
        reference += float(np.dot(b[name].ravel(), b[name].ravel()))
        count += difference.size
    return {"prediction_rms": math.sqrt(squares / count), "prediction_rms_per_sequence": per_sequence,
            "prediction_scale": math.sqrt(reference / count)}


def _weight_distance(a, b, where):
    if a is None or b is None:
        return {}
    (steps_a, values_a), (steps_b, values_b) = a, b
    if not np.array_equal(steps_a, steps_b) or values_a.shape != values_b.shape:
        raise PairsError(f"{where}: the two runs' weight snapshots differ in steps or size.")
    l2, cosine = normalised_distances(_finite(values_a, f"{where}: weights"), _finite(values_b, f"{where}: weights"))
    return {"weight_distance": {"steps": [int(step) for step in steps_a], "normalised_l2": l2.tolist(),
                                "cosine_distance": cosine.tolist()}}


class _LoadedRun:
    """One run's records and large files, read once for every pair it is in (a full-size run's held-out
    predictions are 155 MB)."""

    def __init__(self, run_dir):
        self.where = str(run_dir)
        record = load_run(run_dir)
        self.losses = record.losses
        self.predictions = _predictions(run_dir)
        self.trajectory = record.trajectory()


def _compare_loaded(a, b):
    where = f"{a.where} against {b.where}"
    differing = [i for i, (x, y) in enumerate(zip(a.losses, b.losses), start=1) if x != y]
    if not differing and len(a.losses) != len(b.losses):
        differing = [min(len(a.losses), len(b.losses)) + 1]
    out = {"first_differing_update": differing[0] if differing else None, "updates": [len(a.losses), len(b.losses)]}
    out.update(_prediction_disagreement(a.predictions, b.predictions, where))
    out.update(_weight_distance(a.trajectory, b.trajectory, where))
    return out


def compare_runs(a_dir, b_dir):
    """What the large files say about runs `a_dir` and `b_dir` of one seed (see the module docstring).

    Raises:
        PairsError: files that do not fit together or hold non-finite values.
    """
    return _compare_loaded(_LoadedRun(a_dir), _LoadedRun(b_dir))


def _write_seed(path, seed, folders):
    """Compares every pair of one seed's runs ({key: folder}) and writes its file; each run is read once."""
    keys = sorted(folders)
    loaded = {key: _LoadedRun(folders[key]) for key in keys}
    pairs = [{"a": a, "b": b, **_compare_loaded(loaded[a], loaded[b])}
             for i, a in enumerate(keys) for b in keys[i + 1:]]
    record = {"format": FORMAT, "seed": seed, "runs": keys, "pairs": pairs}
    text = json.dumps(record, indent=None, sort_keys=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    diskwrite.write_through_temporary(path, lambda p: Path(p).write_bytes(lzma.compress(text.encode())))
    return seed


def write_seed_pairs(study_dir, planned, overwrite=False, workers=1):
    """Writes DIR/pairs/seed-NNNN.json.xz for each seed whose planned runs are all complete.

    Args:
        study_dir: the study folder (its runs/ unpacked, with their large files).
        planned: the PlannedRuns of the spec (`StudySpec.planned_runs()`).
        overwrite: write a seed's file again when it exists (its runs' files must then still be there).
        workers: seeds compared at once, each in a process of its own (a full-size seed holds about 2 GB of
            predictions while it is compared); 1 compares them here, one after another.

    Returns:
        {"written": [seeds], "kept": [seeds already written], "incomplete": {seed: [missing run keys]}}.
    """
    study_dir = Path(study_dir)
    by_seed = {}
    for run in planned:
        by_seed.setdefault(run.seed, []).append(run)
    todo, kept, incomplete = [], [], {}
    for seed, runs in sorted(by_seed.items()):
        path = pairs_file(study_dir, seed)
        if path.exists() and not overwrite:
            kept.append(seed)
            continue
        folders = {run.key: study_dir / "runs" / run.key for run in runs}
        missing = [key for key, folder in folders.items()
                   if not (folder / "manifest.json").is_file() or load_run(folder).status != "complete"]
        if missing:
            incomplete[seed] = missing
            continue
        todo.append((path, seed, folders))
    if workers > 1 and len(todo) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(min(workers, len(todo))) as pool:
            written = list(pool.map(_write_seed, *zip(*todo)))
    else:
        written = [_write_seed(*job) for job in todo]
    return {"written": written, "kept": kept, "incomplete": incomplete}


def remove_runs(study_dir, keys):
    """Deletes the run folders `keys` (configuration/run) of DIR/runs/ that exist; returns those deleted.

    For the seeds `write_seed_pairs` left incomplete: their finished runs' large files would be gone before
    a later portion finishes the seed, so the seed is run again whole instead.
    """
    import shutil

    removed = []
    for key in keys:
        folder = Path(study_dir) / "runs" / key
        if folder.is_dir():
            shutil.rmtree(folder)
            removed.append(key)
    return removed


def read_seed_pairs(path):
    """The record of a seed's pairs file."""
    try:
        record = json.loads(lzma.decompress(Path(path).read_bytes()))
    except (OSError, lzma.LZMAError, ValueError) as error:
        raise PairsError(f"{path}: not a readable pairs file ({error}).") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        found = record.get("format") if isinstance(record, dict) else type(record).__name__
        raise PairsError(f"{path}: not a pairs file (format {found!r}).")
    return record


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _pair_problem(pair):
    """What makes a pair's numbers unusable, in words, or None."""
    if not isinstance(pair.get("a"), str) or not isinstance(pair.get("b"), str):
        return "a pair without the keys of its two runs (a, b)"
    first, updates = pair.get("first_differing_update"), pair.get("updates")
    if first is not None and not (_number(first) and first >= 1):
        return f"first_differing_update {first!r} is not an update number or None"
    if not (isinstance(updates, list) and updates and all(_number(u) for u in updates)):
        return f"updates {updates!r} are not numbers"
    if "prediction_rms" in pair:
        numbers = [pair["prediction_rms"], pair.get("prediction_scale"),
                   *(pair.get("prediction_rms_per_sequence") or {}).values()]
        if not all(_number(v) for v in numbers):
            return "a prediction disagreement that is not a finite number (NaN, inf or missing)"
        if pair["prediction_scale"] <= 0:
            return "prediction_scale 0: the disagreement has nothing to be relative to"
    if "weight_distance" in pair:
        distance = pair["weight_distance"]
        steps = distance.get("steps")
        if not isinstance(steps, list) or not steps:
            return "a weight distance without its steps"
        for key in ("normalised_l2", "cosine_distance"):
            values = distance.get(key)
            if not isinstance(values, list) or len(values) != len(steps) or not all(_number(v) for v in values):
                return f"weight_distance.{key} is not one finite number per step (NaN, inf or missing)"
    return None


def read_pairs_folder(folder):
    """{seed: record} of every pairs file in `folder` (a study's DIR/pairs/), each pair's numbers checked.

    Raises:
        PairsError: a file that is not a readable pairs file, a seed in two files, or a pair whose numbers
            are not finite (NaN, inf) or are missing; the message names the file and the pair.
    """
    records, where = {}, {}
    for path in sorted(Path(folder).glob("seed-*.json.xz")):
        record = read_seed_pairs(path)
        seed, pairs = record.get("seed"), record.get("pairs")
        if not isinstance(seed, int) or not isinstance(pairs, list):
            raise PairsError(f"{path}: not a pairs file (no seed or no list of pairs).")
        if seed in records:
            raise PairsError(f"{path}: seed {seed} is in {where[seed]} too.")
        for pair in pairs:
            problem = _pair_problem(pair) if isinstance(pair, dict) else "a pair that is not a record"
            if problem:
                names = f"{pair.get('a')} / {pair.get('b')}" if isinstance(pair, dict) else repr(pair)
                raise PairsError(f"{path}: pair {names}: {problem}.")
        records[seed], where[seed] = record, path
    return records
