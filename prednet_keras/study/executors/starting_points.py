"""Each seed's starting point, made once and shared by every configuration.

    DIR/seeds/seed-0003/
      initial_weights.h5       the seed's weights (`starting_point`, numpy: the
                               same numbers on every backend and machine)
      initial_weights_ulp.h5   the same with one weight nudged by one ulp (when a
                               configuration's plan asks for the 1-ulp baseline)
      seed.json                seed, checksums, the model they were made for; with
                               the 1-ulp weights, ulp_change: the weight changed
                               (`starting_point.nudge_by_ulp`)

They are made in a child process on the CPU (`python -m
prednet_keras.study.executors.starting_points -`, the request on stdin), so the process running the
study never initialises a GPU; the backend is the study process's default (the
numbers do not depend on it). The child writes the seeds in ascending order
while the study's runs start: `start` returns at once, and a run waits only for
its own seed (`StartingPoints.get`). The data order needs no file: every training
process derives it from the seed with numpy and records its checksum.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from prednet_keras.files.diskwrite import atomic_write_json
from prednet_keras.runtime import log_noise

__all__ = ["SEED_RECORD", "StartingPointError", "StartingPoints", "start", "seed_folder", "read_seed_record"]

WEIGHTS = "initial_weights.h5"
ULP_WEIGHTS = "initial_weights_ulp.h5"
SEED_RECORD = "seed.json"


class StartingPointError(ValueError):
    """The seeds' starting points could not be made."""


def seed_folder(study_dir, seed):
    """DIR/seeds/seed-NNNN."""
    return Path(study_dir) / "seeds" / f"seed-{int(seed):04d}"


def read_seed_record(study_dir, seed):
    """seed.json of `seed` as a dict, or None when it is missing or unreadable."""
    try:
        with open(seed_folder(study_dir, seed) / SEED_RECORD, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def weights_path(study_dir, seed, perturbation=None):
    """The starting weights of a run of `seed` (perturbation None or "ulp")."""
    return seed_folder(study_dir, seed) / (ULP_WEIGHTS if perturbation == "ulp" else WEIGHTS)


def start(spec, study_dir, runs, backend):
    """Starts making the starting points that `runs` need and that do not exist yet (one child process, seeds
    in ascending order, each complete before the next begins), so that runs can start as their seeds appear.

    An existing seed.json made for other training options is an error, raised here: the study folder
    belongs to another spec. So are 1-ulp weights made when the baseline nudged every weight, where a 1-ulp
    run needs them: started from them, it would measure another baseline than the study's other 1-ulp runs.

    Args:
        spec: the StudySpec.
        study_dir: the study folder.
        runs: the PlannedRuns about to run: each needs its seed's weights, a 1-ulp run also the nudged ones.
        backend: the Keras backend of the child process.

    Returns:
        StartingPoints (a context manager: leaving it stops the child if it still runs).
    """
    protocol = spec.protocol_dict()
    nudged = {run.seed for run in runs if run.perturbation == "ulp"}
    records, missing, expected = {}, [], {}
    for seed in sorted({run.seed for run in runs}):
        record = read_seed_record(study_dir, seed)
        if record is not None and record.get("protocol") != protocol:
            raise StartingPointError(
                f"{seed_folder(study_dir, seed)} was made for other training options than this spec's; "
                "use another output folder for this spec."
            )
        complete = record is not None and Path(weights_path(study_dir, seed)).is_file() and (
            seed not in nudged or Path(weights_path(study_dir, seed, "ulp")).is_file()
        )
        if complete and seed in nudged and "ulp_change" not in record:
            raise StartingPointError(
                f"{seed_folder(study_dir, seed)} holds 1-ulp weights with every weight nudged, made before the "
                "baseline nudged one weight; use another output folder for this spec's 1-ulp runs."
            )
        if complete:
            records[seed] = record
            continue
        if record is not None:
            # A record without its weights files (a packed study keeps seed.json only): the weights are made
            # again, and must come out as recorded. The record goes first, because a seed counts as written
            # once its seed.json is there.
            expected[seed] = record
            os.remove(seed_folder(study_dir, seed) / SEED_RECORD)
        missing.append(seed)
    child = _start_child(spec, study_dir, missing, sorted(nudged.intersection(missing)), backend) if missing else None
    return StartingPoints(study_dir, records, child, missing, expected)


class StartingPoints:
    """The seeds' starting points: those that existed, and those the child process is writing.

    `get(seed)` answers at once (None: not written yet), `wait()` blocks until every seed is there; both
    raise StartingPointError once the child has failed or ended without writing a seed.
    """

    def __init__(self, study_dir, records, child, missing, expected=None):
        self._study_dir = study_dir
        self._records = dict(records)
        self._child = child
        self._missing = sorted(missing)
        # {seed: its earlier record}: weights made again must have the checksums recorded before.
        self._expected = dict(expected or {})

    def get(self, seed):
        """The record of `seed`, or None while the child is still making it."""
        if seed not in self._records:
            self._collect()
        return self._records.get(seed)

    def wait(self, poll_seconds=0.1):
        """{seed: record} of every seed, once all are written."""
        while self._missing:
            self._collect()
            if self._missing:
                time.sleep(poll_seconds)
        return dict(self._records)

    def _collect(self):
        # The exit status is read before the files: a child that wrote its last seed and exited between
        # the two reads must not look as if it had ended without writing it.
        code = None if self._child is None else self._child.poll()
        while self._missing:
            # seed.json is written last and atomically: once it is there, the seed's files are complete. The
            # child writes the seeds in this order, so the first one missing ends the look.
            record = read_seed_record(self._study_dir, self._missing[0])
            if record is None:
                break
            seed = self._missing[0]
            before = self._expected.get(seed)
            for key in ("checksum", "ulp_checksum"):
                if before is not None and key in before and key in record and before[key] != record[key]:
                    self.close()
                    raise StartingPointError(
                        f"{seed_folder(self._study_dir, seed)}: the initial weights made again have {key} "
                        f"{record[key]}, not the recorded {before[key]}; this machine does not make the "
                        "seed's weights as the study's earlier runs had them.")
            self._records[self._missing.pop(0)] = record
        if self._missing and code is not None:
            self._child.fail(code, self._missing)

    def close(self):
        """Stops the child if it still runs (the study stopped before its seeds were all needed)."""
        if self._child is not None:
            self._child.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _MakerProcess:
    """The child process making starting points, and its stderr captured in a file."""

    def __init__(self, process, stderr):
        self.process = process
        self.stderr = stderr

    def poll(self):
        return self.process.poll()

    def fail(self, code, missing):
        self.stderr.seek(0)
        lines = [line for line in self.stderr.read().decode("utf-8", "replace").splitlines() if line.strip()]
        self.close()
        if code != 0:
            why = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
            raise StartingPointError("Making the seeds' initial weights failed: " + (lines[-1] if lines else
                                     f"the process making them ended ({why})"))
        raise StartingPointError(f"The starting point of seed {missing[0]} was not written.")

    def close(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if not self.stderr.closed:
            self.stderr.close()


def _start_child(spec, study_dir, seeds, nudged, backend):
    """The child making the starting points of `seeds`, and the 1-ulp ones of the seeds of `nudged`."""
    from prednet_keras import runtime
    from prednet_keras.runtime import childproc

    config = runtime.RuntimeConfig(backend=backend, device="cpu")
    request = {"model": spec.model, "train": spec.train, "seeds": list(seeds), "ulp": list(nudged),
               "study_dir": os.fspath(Path(study_dir).resolve()), "protocol": spec.protocol_dict()}
    # The request goes through stdin, so a study process killed outright leaves no request file behind.
    # stderr goes to a file, not a pipe: nobody reads it while the child runs, and a full pipe would stop it.
    stderr = tempfile.TemporaryFile()
    try:
        process = childproc.start(["-m", "prednet_keras.study.executors.starting_points", "-"], config,
                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr)
    except BaseException:
        stderr.close()
        raise
    try:
        process.stdin.write(json.dumps(request).encode("utf-8"))
        process.stdin.close()
    except OSError:
        pass  # the child is already gone: its exit status and stderr say why
    return _MakerProcess(process, stderr)


def build_model(model, options):
    """The model whose weights a run of these training options starts from (in the child)."""
    from prednet_keras import model_kinds

    return model_kinds.get(model).build_for_starting_point(dict(options, model=model))


def _make(request):
    from prednet_keras.models import starting_point

    target = build_model(request["model"], request["train"])
    nudged = set(request["ulp"])
    for seed in request["seeds"]:
        folder = seed_folder(request["study_dir"], seed)
        folder.mkdir(parents=True, exist_ok=True)
        checksum = starting_point.save_initial_weights(target, folder / WEIGHTS, seed, overwrite=True)
        record = {"seed": seed, "checksum": checksum, "file": WEIGHTS, "protocol": request["protocol"],
                  "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        if seed in nudged:
            weights, _ = starting_point.read_initial_weights(folder / WEIGHTS)
            weights, record["ulp_change"] = starting_point.nudge_by_ulp(weights, seed)
            record["ulp_checksum"] = starting_point.write_initial_weights(folder / ULP_WEIGHTS, weights, seed)
            record["ulp_file"] = ULP_WEIGHTS
        # Written last: a seed folder without it is remade.
        atomic_write_json(folder / SEED_RECORD, record)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[0] == "-":
        request = json.load(sys.stdin)
    else:
        with open(argv[0], encoding="utf-8") as handle:
            request = json.load(handle)
    try:
        _make(request)
    except Exception as error:  # the parent shows the last line
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    log_noise.finish()  # its last lines out before the parent's next ones
    os._exit(code)
