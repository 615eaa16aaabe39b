"""`prednet-train --repeat N`'s audit: are N runs of one configuration bit-identical?

The study's determinism audit (`determinism_audit`), on the repeats one command made: each run folder
read as the report reads it (`run_records`), each repeat compared with the first by its final weights
and its loss curve, the outcome written to OUTPUT/repeat.json.
"""

import os

from prednet_keras.files.diskwrite import atomic_write_json
from prednet_keras.study.stats.determinism_audit import determinism_audit
from prednet_keras.study.report.run_records import load_run

__all__ = ["REPEAT_FILE", "audit_repeats"]

REPEAT_FILE = "repeat.json"


def audit_repeats(parent, folders, deterministic_requested):
    """Compares the repeats in `folders` (the first is the reference) and writes `parent`/repeat.json.

    Args:
        parent: the folder holding the repeats (OUTPUT).
        folders: the repeats' run folders, in the order they ran.
        deterministic_requested: whether the runs asked for deterministic kernels.

    Returns:
        The record written: repeats, bit_identical, deterministic_requested, runs (one per repeat:
        run, weights_checksum, curve_checksum, initial_weights_checksum, identical_to_first), and path.
    """
    loaded = [load_run(folder) for folder in folders]
    # One seed: determinism_audit compares every run after the first with the first.
    compared = [{"seed": 0, "weights_checksum": run.weights_checksum, "curve_checksum": run.curve_checksum}
                for run in loaded]

    def identical(entries):
        return determinism_audit(entries, deterministic_requested)["status"] == "deterministic"

    records = [
        {
            "run": str(run.path),
            "weights_checksum": entry["weights_checksum"],
            "curve_checksum": entry["curve_checksum"],
            "initial_weights_checksum": run.initial_checksum,
            "identical_to_first": identical([compared[0], entry]),
        }
        for run, entry in zip(loaded, compared)
    ]
    audit = {"repeats": len(records), "bit_identical": identical(compared),
             "deterministic_requested": bool(deterministic_requested), "runs": records}
    path = os.path.join(parent, REPEAT_FILE)
    atomic_write_json(path, audit)
    return dict(audit, path=path)
