"""Throughput measurement (prednet-bench): training and inference frames per second, step times, peak memory;
docs/architecture.md, the map.

This module is the package's face, what prednet-bench uses: a configuration (BenchConfig) and one process
measuring each (run_benchmark, run_configuration: runner), the results' JSON document, table and plot
(report), and torch.profiler's trace of plain torch code with where its time went (trace_torch,
summarize_profile, format_profile_summary: profiling's trace_torch, summarize and format_summary, as
scripts/port_bench.py --profile traces the port). Its other parts are reached by name: child (the measuring process, `python -m
prednet_keras.bench.child`, which this face must not import), measure (the timing and memory inside it) and
profiling (a backend's profiler around some steps, and where their time went: prednet-bench --profile), and
probes, measurements below the public faces that users run with `python -m prednet_keras.bench.probes.<probe>`:
seed_batching, chainer_unroll, torch_constants_ab, torch_scalar_operands (what each asks: probes).

None of them imports a framework at module level.
"""

from prednet_keras.bench.profiling import format_summary as format_profile_summary
from prednet_keras.bench.profiling import summarize as summarize_profile
from prednet_keras.bench.profiling import trace_torch
from prednet_keras.bench.report import document, format_table, plot_results, table_rows, write_results
from prednet_keras.bench.runner import (
    BENCH_FORMAT,
    BENCH_FORMAT_VERSION,
    MODELS,
    MODES,
    SYNTHETIC_DATA,
    BenchConfig,
    BenchError,
    run_benchmark,
    run_configuration,
)

__all__ = [
    "BENCH_FORMAT",
    "BENCH_FORMAT_VERSION",
    "MODELS",
    "MODES",
    "SYNTHETIC_DATA",
    "BenchConfig",
    "BenchError",
    "document",
    "format_profile_summary",
    "format_table",
    "plot_results",
    "run_benchmark",
    "run_configuration",
    "summarize_profile",
    "table_rows",
    "trace_torch",
    "write_results",
]
