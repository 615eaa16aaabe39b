"""Each seed's starting point, made once and shared by every configuration.

    DIR/seeds/seed-0003/
      initial_weights.h5       the seed's weights (`starting_point`, numpy: the
                               same numbers on every backend and machine)
      initial_weights_ulp.h5   the same, every weight nudged by one ulp (when the
                               spec asks for the 1-ulp baseline)
      seed.json                seed, checksums, the model they were made for

They are made in a child process on the CPU (`python -m
prednet_keras.study.starting_points REQUEST.json`), so the process running the
study never initialises a GPU; the backend is the study process's default (the
numbers do not depend on it). The data order needs no file: every training
process derives it from the seed with numpy and records its checksum.
"""

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from prednet_keras import runs

__all__ = ["SEED_RECORD", "StartingPointError", "ensure_starting_points", "seed_folder", "read_seed_record"]

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


def ensure_starting_points(spec, study_dir, seeds, backend):
    """Makes the starting points of `seeds` that do not exist yet (one child process).

    An existing seed.json made for other training options is an error: the
    study folder belongs to another spec.

    Args:
        spec: the StudySpec.
        study_dir: the study folder.
        seeds: the seeds that need starting points.
        backend: the Keras backend of the child process.

    Returns:
        {seed: seed record}.
    """
    protocol = spec.protocol_dict()
    records, missing = {}, []
    for seed in seeds:
        record = read_seed_record(study_dir, seed)
        complete = record is not None and Path(weights_path(study_dir, seed)).is_file() and (
            not spec.ulp_baseline or Path(weights_path(study_dir, seed, "ulp")).is_file()
        )
        if complete and record.get("protocol") != protocol:
            raise StartingPointError(
                f"{seed_folder(study_dir, seed)} was made for other training options than this spec's; "
                "use another output folder for this spec."
            )
        if complete:
            records[seed] = record
        else:
            missing.append(seed)
    if missing:
        _make_in_child(spec, study_dir, missing, backend)
        for seed in missing:
            record = read_seed_record(study_dir, seed)
            if record is None:
                raise StartingPointError(f"The starting point of seed {seed} was not written.")
            records[seed] = record
    return records


def _make_in_child(spec, study_dir, seeds, backend):
    from prednet_keras import childproc, runtime

    config = runtime.RuntimeConfig(backend=backend, device="cpu")
    request = {"model": spec.model, "train": spec.train, "seeds": list(seeds), "ulp": spec.ulp_baseline,
               "study_dir": os.fspath(Path(study_dir).resolve()), "protocol": spec.protocol_dict()}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as handle:
        json.dump(request, handle)
    try:
        result = childproc.run(["-m", "prednet_keras.study.starting_points", handle.name], config,
                               capture_output=True, text=True)
    finally:
        os.unlink(handle.name)
    if result.returncode != 0:
        lines = [line for line in (result.stderr or "").strip().splitlines() if line.strip()]
        raise StartingPointError("Making the seeds' initial weights failed: " + (lines[-1] if lines else
                                 f"exit status {result.returncode}"))


def build_model(model, options):
    """The model whose weights a run of these training options starts from (in the child)."""
    from prednet_keras import model_kinds

    return model_kinds.get(model).build_for_starting_point(dict(options, model=model))


def _make(request):
    from prednet_keras import starting_point

    target = build_model(request["model"], request["train"])
    for seed in request["seeds"]:
        folder = seed_folder(request["study_dir"], seed)
        folder.mkdir(parents=True, exist_ok=True)
        checksum = starting_point.save_initial_weights(target, folder / WEIGHTS, seed, overwrite=True)
        record = {"seed": seed, "checksum": checksum, "file": WEIGHTS, "protocol": request["protocol"],
                  "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        if request["ulp"]:
            weights, _ = starting_point.read_initial_weights(folder / WEIGHTS)
            record["ulp_checksum"] = starting_point.write_initial_weights(
                folder / ULP_WEIGHTS, starting_point.nudge_by_ulp(weights), seed
            )
            record["ulp_file"] = ULP_WEIGHTS
        # Written last: a seed folder without it is remade.
        runs.atomic_write_json(folder / SEED_RECORD, record)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
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
    sys.stderr.flush()
    os._exit(code)
