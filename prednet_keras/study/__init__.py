"""The study: run one training across a matrix of configurations and decide with statistics.

    study/
      stats.py     the statistics, on plain arrays (no files, no framework)
      report.py    run folders -> configurations -> report.md, report.json, plots
      archive.py   a study's finished runs packed in runs.tar.xz, and read or unpacked safely
      spec.py      the TOML study spec: configurations, seeds, replicates, [train]
      starting_points.py  each seed's shared initial weights
      runner.py    `prednet-study run`: run folders, resume, the local process pool
      ray_executor.py  `--executor ray`: each run a Ray task (optional extra; the only Ray import)

The report reads run folders only (manifest.json, history.csv and the optional
files named in docs/study-statistics.md) and imports no training code or
framework of its own (importing the prednet_keras package itself does import
Keras). Methods and references: docs/study-statistics.md.
"""
