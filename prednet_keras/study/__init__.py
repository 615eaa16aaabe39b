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
"""
