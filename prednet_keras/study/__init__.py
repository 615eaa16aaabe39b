"""The study: run one training across a matrix of configurations and decide with statistics.

    study/
      stats.py     the statistics, on plain arrays (no files, no framework)
      report.py    run folders -> configurations -> report.md, report.json, plots
      (spec.py, runner.py: `prednet-study run`, to come)

The report reads run folders only (manifest.json, history.csv and the optional
files named in docs/study-statistics.md) and imports no training code or
framework of its own (importing the prednet_keras package itself does import
Keras). Methods and references: docs/study-statistics.md.
"""
