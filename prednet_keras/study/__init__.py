"""The study: run one training across a matrix of configurations and decide with statistics.

    study/
      spec/        the TOML study spec: configurations, seeds, replicates, [train]; rules.py each key's rule
      factors.py   what two arms may differ in, and whether they are then compared (STUDY_FACTORS)
      runner.py    `prednet-study run`: the study folder, its plan, resume
      executors/   where runs train: local_executor.py (the local process pool), ray_executor.py
                   (`--executor ray`: each run a Ray task; optional extra, the only Ray import), one_run.py
                   (what a run is, for either), starting_points.py (each seed's shared initial weights)
      stats/       the statistics, on plain arrays (no files, no framework)
      report/      run folders -> configurations -> report.md, report.json, plots
      archive.py   a study's finished runs packed in runs.tar.xz, and read or unpacked safely

The report reads run folders only (manifest.json, history.csv and the optional
files named in docs/study-statistics.md) and imports no training code or
framework of its own (importing the prednet_keras package itself does import
Keras). Methods and references: docs/study-statistics.md.

This face names one thing, loaded on first use (PEP 562): `load_run(folder)`, a run folder read as the report
reads it (a `Run`: its manifest, history, seed, replicate, status, the checksums of its final weights and of
its loss curve), which is how two runs are compared; the modules are reached by name.
"""

import importlib

# Public name -> the module that defines it.
_PUBLIC = {"Run": "prednet_keras.study.report.run_records", "load_run": "prednet_keras.study.report.run_records"}

__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
