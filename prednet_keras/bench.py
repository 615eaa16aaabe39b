"""Throughput measurement: training and inference frames per second, step times, peak memory.

One measured configuration (model, frame size, batch size, sequence length)
runs in its own process, set up by `runtime` before the framework is imported,
exactly as a training run is:

    parent:  results = run_benchmark(configs, runtime_config)    # no framework needed
             -> one child per configuration:
                python -m prednet_keras.bench child CONFIG_JSON RESULT_JSON
                (environment from runtime.environment_for(runtime_config))
    child:   runtime.configure_from_environment(); measure(config, jit_compile)

What is timed. Training: `train_on_batch` of the model as training builds it
(Lotter's PredNet: `train.build_model`, Adam, MAE of the weighted error;
Chainer PredNet: one truncated-BPTT window of `nt` frame steps at batch 1 through
`protocols.ChainerPredNetTrainer`, as `train_chainer_prednet` updates; the MNIST
autoencoder: Adam, MSE). Inference: `predict_on_batch` of the frame-prediction
model (`build_prediction_model`; the Chainer PredNet's `prediction_model`; the
autoencoder itself). Each step returns its loss or predictions to the host, so
every step time includes waiting for the device. The first `warmup` steps (which
compile) are left out: frames/s = batch * nt * steps / (time of the later steps).
The input is synthetic: uniform random frames in [0, 1] drawn with numpy from a
seed, already in memory, so no data pipeline is measured.

With the torch backend and jit_compile=True (`--jit-compile`), Keras' training step runs
through torch.compile; each phase records how many graphs TorchDynamo had compiled before
it, after its warm-up and after its timed steps, so a recompilation during timing shows.

Peak memory: the process's host RSS peak (`resource.getrusage`, over the whole
process up to the end of the phase) and, on a GPU, the framework's peak device
memory (jax `memory_stats()['peak_bytes_in_use']` over the process;
torch `max_memory_allocated` and TensorFlow `get_memory_info()['peak']`, reset
before each phase); "not available" where the framework has none.
"""

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from prednet_keras import model_kinds, torch_compile
from prednet_keras._options import OptionsRecord

__all__ = [
    "BENCH_FORMAT",
    "BenchConfig",
    "BenchError",
    "MODELS",
    "MODES",
    "SYNTHETIC_DATA",
    "format_table",
    "measure",
    "plot_results",
    "run_benchmark",
    "run_configuration",
    "step_statistics",
    "write_results",
]

BENCH_FORMAT = "prednet-bench"
BENCH_FORMAT_VERSION = 1
# The model kinds prednet-bench measures; each kind's sizes and runner are its own (model_kinds, `bench`).
MODELS = model_kinds.names(bench=True)
MODES = ("train", "infer", "both")
KITTI_STACK_SIZES = (3, 48, 96, 192)
SYNTHETIC_DATA = "synthetic: uniform random frames in [0, 1] drawn with numpy from the seed, held in memory (no data pipeline)"
NOT_AVAILABLE = "not available"


class BenchError(RuntimeError):
    """A measurement could not be made (the child process failed or refused its set-up)."""


# ------------------------------------------------------------------------ config
@dataclasses.dataclass
class BenchConfig(OptionsRecord):
    """One measured configuration.

    Args:
        model: "prednet" (Lotter's), "prednet-chainer" (the study's) or "autoencoder" (MNIST).
        mode: "train", "infer" or "both".
        batch_size: sequences (images for the autoencoder) per step; the
            Chainer PredNet trains at batch 1.
        size: (H, W) of the frames; None: 128x160 (120x160 for prednet-chainer);
            the autoencoder's images are 28x28.
        nt: frames per sequence; for prednet-chainer, frame steps per window
            (its bprop). None: 10 (20 for prednet-chainer).
        stack_sizes: channels per layer, the first the image channels; None: (3, 48, 96, 192).
        autoencoder: "conv" or "dense" (autoencoder only; None: conv).
        unroll: prednet only: unroll the training step's time loop (None: True,
            prednet-train's default).
        steps: timed steps per phase.
        warmup: steps run before timing (they include compilation).
        seed: seed of the synthetic input.
    """

    WHAT = "benchmark options"

    model: str = "prednet"
    mode: str = "both"
    batch_size: int = 4
    size: tuple = None
    nt: int = None
    stack_sizes: tuple = None
    autoencoder: str = None
    unroll: bool = None
    steps: int = 20
    warmup: int = 3
    seed: int = 0

    def resolved(self):
        """A copy with the model's defaults filled in, validated (ValueError names the bad setting)."""
        config = dataclasses.replace(self)
        if config.model not in MODELS:
            raise ValueError(f"--model must be one of {', '.join(MODELS)}, got {config.model!r}.")
        bench = config.kind.bench
        if not bench.unroll and config.unroll is not None:
            with_unroll = " or ".join(f"--model {k.name}" for k in model_kinds.kinds() if k.bench and k.bench.unroll)
            raise ValueError(f"--unroll/--no-unroll applies only to {with_unroll}, not to --model {config.model}.")
        if bench.unroll and config.unroll is None:
            config.unroll = True
        if bench.image_shape is not None:
            for name in ("size", "nt", "stack_sizes"):
                if getattr(config, name) is not None:
                    raise ValueError(f"{_flag(name)} does not apply to --model {config.model} ({bench.fixed_note}).")
            config.autoencoder = config.autoencoder or bench.variants[0]
            config.size = bench.image_shape[:2]
            config.nt = bench.nt
            config.stack_sizes = None
        else:
            if config.autoencoder is not None:
                with_variants = " or ".join(f"--model {k.name}" for k in model_kinds.kinds()
                                            if k.bench and k.bench.variants)
                raise ValueError(f"--autoencoder applies only to {with_variants}, not to --model {config.model}.")
            config.size = tuple(int(v) for v in (config.size or bench.size))
            config.nt = bench.nt if config.nt is None else int(config.nt)
            config.stack_sizes = tuple(int(v) for v in (config.stack_sizes or KITTI_STACK_SIZES))
        config.validate()
        return config

    def validate(self):
        """Raises ValueError naming the first bad setting."""
        from prednet_keras.layers.lotter import check_frame_size

        if self.mode not in MODES:
            raise ValueError(f"--mode must be one of {', '.join(MODES)}, got {self.mode!r}.")
        for name, low in (("batch_size", 1), ("steps", 1), ("warmup", 0), ("seed", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{_flag(name)} must be an integer >= {low}, got {value!r}.")
        bench = self.kind.bench
        if bench.image_shape is not None:
            if self.autoencoder not in bench.variants:
                raise ValueError(f"--autoencoder must be one of {', '.join(bench.variants)}, got {self.autoencoder!r}.")
            return
        low_nt = bench.min_nt
        if isinstance(self.nt, bool) or not isinstance(self.nt, int) or self.nt < low_nt:
            raise ValueError(f"--nt must be an integer >= {low_nt}, got {self.nt!r}.")
        if len(self.stack_sizes) < 1 or any(s < 1 for s in self.stack_sizes):
            raise ValueError(f"--stack-sizes must be positive channel counts, got {_show(self.stack_sizes)}.")
        if len(self.size) != 2 or min(self.size) < 1:
            raise ValueError(f"--size must be HxW with positive numbers, got {_show(self.size, 'x')}.")
        check_frame_size(self.size[0], self.size[1], len(self.stack_sizes))
        if bench.train_batch_one and self.batch_size != 1 and self.mode != "infer":
            raise ValueError(
                f"--model {self.model} trains one window at batch 1 (the study's protocol), got "
                f"--batch-size {self.batch_size}; use --batch-size 1, or --mode infer for larger batches."
            )

    @property
    def frame_shape(self):
        """(H, W, C) of one frame."""
        if self.kind.bench.image_shape is not None:
            return self.kind.bench.image_shape
        return (self.size[0], self.size[1], self.stack_sizes[0])

    @property
    def frames_per_step(self):
        """Frames one training or inference step processes (batch x nt; images for the autoencoder)."""
        return self.batch_size * self.nt

    @property
    def phases(self):
        """The phases to measure, in order."""
        return ("train", "infer") if self.mode == "both" else (self.mode,)

    def label(self):
        """A short description for progress lines."""
        return self.kind.bench_label(self)

    @property
    def kind(self):
        """The model kind (model_kinds) measured."""
        return model_kinds.get(self.model)


def _flag(name):
    return "--" + name.replace("_", "-")


def _show(values, sep=","):
    return sep.join(str(v) for v in values)


# ------------------------------------------------------------------- statistics
def step_statistics(seconds):
    """Summary of step times in milliseconds: median, p10, p90, min, max, mean.

    Args:
        seconds: step times in seconds (at least one).
    """
    import numpy as np

    ms = np.asarray(seconds, dtype=np.float64) * 1000.0
    if ms.size == 0:
        raise ValueError("No step times to summarise.")
    return {
        "median_ms": float(np.median(ms)),
        "p10_ms": float(np.percentile(ms, 10)),
        "p90_ms": float(np.percentile(ms, 90)),
        "min_ms": float(ms.min()),
        "max_ms": float(ms.max()),
        "mean_ms": float(ms.mean()),
    }


# ----------------------------------------------------------------------- memory
def host_peak_bytes():
    """Peak resident memory of this process so far, in bytes (None where the OS does not say)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def _reset_device_peak():
    import keras

    backend = keras.backend.backend()
    try:
        if backend == "torch":
            import torch

            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
        elif backend == "tensorflow":
            import tensorflow as tf

            if tf.config.get_visible_devices("GPU"):
                tf.config.experimental.reset_memory_stats("GPU:0")
    except Exception:  # best effort: the peak then covers the process so far
        pass


def device_peak():
    """(bytes or None, how it was measured or why it is not available) for the first GPU."""
    import keras

    backend = keras.backend.backend()
    try:
        if backend == "jax":
            import jax

            device = jax.devices()[0]
            if device.platform == "cpu":
                return None, f"{NOT_AVAILABLE} (CPU run)"
            stats = device.memory_stats() or {}
            if "peak_bytes_in_use" not in stats:
                return None, f"{NOT_AVAILABLE} ({device.platform} reports no peak_bytes_in_use)"
            return int(stats["peak_bytes_in_use"]), "jax memory_stats()['peak_bytes_in_use'] (whole process)"
        if backend == "torch":
            import torch

            if not torch.cuda.is_available():
                return None, f"{NOT_AVAILABLE} (CPU run)"
            return int(torch.cuda.max_memory_allocated()), "torch.cuda.max_memory_allocated (this phase)"
        if backend == "tensorflow":
            import tensorflow as tf

            if not tf.config.get_visible_devices("GPU"):
                return None, f"{NOT_AVAILABLE} (CPU run)"
            return int(tf.config.experimental.get_memory_info("GPU:0")["peak"]), "tf get_memory_info('GPU:0')['peak'] (this phase)"
    except Exception as error:
        return None, f"{NOT_AVAILABLE} ({type(error).__name__}: {error})"
    return None, NOT_AVAILABLE


def _memory():
    host = host_peak_bytes()
    device, how = device_peak()
    return {
        "host_rss_peak_bytes": host,
        "host_rss_peak_scope": "resource.getrusage ru_maxrss: the whole process up to the end of this phase",
        "device_peak_bytes": device,
        "device_peak_source": how,
    }


# ---------------------------------------------------------------------- models
class _Runner:
    """What one phase times.

    `run(count, on_step)` runs `count` steps and calls `on_step()` as each
    step's result reaches the host, in order; the time between two calls is
    that step's time.
    """

    def __init__(self, run, parameters, frames_per_step, notes):
        self.run = run
        self.parameters = parameters
        self.frames_per_step = frames_per_step
        self.notes = notes


def _one_by_one(step):
    """A runner loop of `step()` calls, each returning when its result is on the host."""

    def run(count, on_step):
        for _ in range(count):
            step()
            on_step()

    return run


def _fit_loop(model, x, y):
    """A runner loop through `model.fit`, read as prednet-train reads it.

    Fit moves the next batch to the device while a step runs, and the losses
    are read by training_callbacks.StepLosses, as prednet-train's run recorder reads them.
    """
    import keras

    from prednet_keras.training_callbacks import StepLosses

    losses = StepLosses(model)

    class _StepDone(keras.callbacks.Callback):
        def __init__(self, count, on_step):
            super().__init__()
            self.count = count
            self.on_step = on_step
            self.done = 0

        def on_train_batch_end(self, batch, logs=None):
            for _ in losses.add(batch, logs):
                if self.done < self.count:
                    self.done += 1
                    self.on_step()

    def batches():
        while True:
            yield x, y

    def run(count, on_step):
        # Every time is taken in a step's callback, never at the end of fit,
        # which also copies the trained state back to the model.
        model.fit(batches(), steps_per_epoch=count + losses.lag, epochs=1, shuffle=False, verbose=0,
                  callbacks=[_StepDone(count, on_step)])

    return run


def _synthetic(rng, shape):
    import numpy as np

    return rng.random(shape, dtype=np.float32)


class _Kit:
    """What a model kind's bench_runner builds its runner from."""

    Runner = _Runner
    fit_loop = staticmethod(_fit_loop)
    one_by_one = staticmethod(_one_by_one)
    synthetic = staticmethod(_synthetic)


# --------------------------------------------------------------------- measure
def measure_phase(config, phase, jit_compile, progress=None, profile_dir=None):
    """Builds the model for `phase` ("train" or "infer") and times it.

    Call in a process whose runtime is configured. Returns a JSON-ready dict:
    fps, frames_per_step, steps, warmup, warmup_seconds (the first one
    includes compilation), step_ms statistics, step_seconds (every timed
    step), memory, build_seconds, parameters, what. With `profile_dir`, after
    the timed steps, PROFILED_STEPS more steps run under the backend's
    profiler (`profiling.trace`) into profile_dir/<label>-<phase> (an earlier
    trace there is replaced), and the
    result gains "profile": the trace folder and the summary of its busiest
    timelines; the profiled steps are not in the timing.
    """
    import numpy as np

    rng = np.random.default_rng([config.seed, 0 if phase == "train" else 1])
    _reset_device_peak()
    started = time.perf_counter()
    runner = config.kind.bench_runner(config, phase, jit_compile, rng, _Kit)
    build_seconds = time.perf_counter() - started

    warmup_seconds, step_seconds = [], []
    last = [time.perf_counter()]
    graphs = {"before": torch_compile.compiled_graphs()}

    def on_step():
        now = time.perf_counter()
        seconds, last[0] = now - last[0], now
        if len(warmup_seconds) < config.warmup:
            warmup_seconds.append(seconds)
            _say(progress, f"{phase} warm-up step {len(warmup_seconds)}/{config.warmup}: {seconds:.3f} s")
            if len(warmup_seconds) == config.warmup:
                graphs["after_warmup"] = torch_compile.compiled_graphs()
        else:
            step_seconds.append(seconds)
            _say(progress, f"{phase} step {len(step_seconds)}/{config.steps}: {seconds * 1000:.1f} ms")

    runner.run(config.warmup + config.steps, on_step)
    graphs["after_timed_steps"] = torch_compile.compiled_graphs()
    frames = runner.frames_per_step * config.steps
    profile = None if profile_dir is None else _profile(runner, config, phase, profile_dir, progress)
    return {
        "fps": frames / sum(step_seconds),
        "frames_per_step": runner.frames_per_step,
        "steps": config.steps,
        "warmup": config.warmup,
        "warmup_seconds": [round(s, 6) for s in warmup_seconds],
        "step_ms": step_statistics(step_seconds),
        "step_seconds": [round(s, 6) for s in step_seconds],
        "memory": _memory(),
        "build_seconds": round(build_seconds, 3),
        "parameters": runner.parameters,
        "what": runner.notes,
        # torch only: graphs torch.compile had made before the phase, after its warm-up and after its timed
        # steps; a timed step that compiled would show as a difference between the last two.
        **({"torch_compiled_graphs": graphs} if graphs["before"] is not None else {}),
        **({"profile": profile} if profile else {}),
    }


PROFILED_STEPS = 5


def _profile(runner, config, phase, profile_dir, progress):
    """Traces PROFILED_STEPS steps into profile_dir/<label>-<phase>, replacing an earlier trace there."""
    from prednet_keras import profiling

    folder = os.path.join(profile_dir, re.sub(r"[^A-Za-z0-9.]+", "-", config.label()) + f"-{phase}")
    # jax and TensorFlow add a new session folder beside earlier ones; the summary must read this one only.
    shutil.rmtree(folder, ignore_errors=True)
    with profiling.trace(folder):
        runner.run(PROFILED_STEPS, lambda: None)
    _say(progress, f"{phase}: profile of {PROFILED_STEPS} steps in {folder}")
    try:
        summary = profiling.summarize(folder)
    except profiling.ProfileError as error:  # a trace this machine cannot read: kept for other tools
        return {"folder": folder, "steps": PROFILED_STEPS, "summary": None, "note": str(error)}
    summary["timelines"] = summary["timelines"][:8]
    return {"folder": folder, "steps": PROFILED_STEPS, "summary": summary}


def measure(config, jit_compile, progress=None, profile_dir=None):
    """Measures every phase of `config` in this (configured) process.

    Args:
        config: a resolved BenchConfig.
        jit_compile: Model.compile's jit_compile.
        progress: called with a line of text after every step (None: silent).
        profile_dir: where to write a profiler trace of each phase (see
            measure_phase); None: no profiling.

    Returns:
        {"train": ..., "infer": ...} for the phases measured (see measure_phase).
    """
    import keras

    out = {}
    for phase in config.phases:
        keras.backend.clear_session()
        out[phase] = measure_phase(config, phase, jit_compile, progress, profile_dir)
        _say(progress, f"{phase}: {out[phase]['fps']:.2f} frames/s")
    return out


def _say(progress, text):
    if progress is not None:
        progress(text)


# ------------------------------------------------------------------ processes
def run_configuration(config, runtime_config, on_output=None, profile_dir=None):
    """Measures `config` in a fresh process set up for `runtime_config`.

    Args:
        config: a resolved BenchConfig.
        runtime_config: a runtime.RuntimeConfig.
        on_output: called with every line the child prints (progress, framework
            warnings); None: they are kept only for an error message.
        profile_dir: also trace some steps with the backend's profiler into
            this folder (measure_phase); None: no profiling.

    Returns:
        dict with config, runtime {requested, effective, jit_compile_used}, fingerprint,
        data, the phases' results, and seconds (wall time of the child).

    Raises:
        BenchError: the child refused its set-up or failed (the message says why).
    """
    from prednet_keras import childproc

    with tempfile.TemporaryDirectory(prefix="prednet-bench-") as scratch:
        result_path = os.path.join(scratch, "result.json")
        args = [
            "-m", "prednet_keras.bench", "child",
            json.dumps(config.to_dict(), sort_keys=True), result_path,
        ] + (["--profile", os.path.abspath(profile_dir)] if profile_dir else [])
        started = time.perf_counter()
        tail = []
        # Unbuffered: the measurement's lines arrive as they are printed.
        unbuffered = {"PYTHONUNBUFFERED": os.environ.get("PYTHONUNBUFFERED", "1")}
        try:
            child = childproc.start(args, runtime_config, env=unbuffered, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, bufsize=1)
        except ValueError as error:  # environment_for: e.g. a GPU index out of range
            raise BenchError(str(error)) from None
        try:
            for line in child.stdout:
                line = line.rstrip("\n")
                tail = (tail + [line])[-30:]
                if on_output is not None:
                    on_output(line)
            code = child.wait()
        except BaseException:
            if child.poll() is None:
                child.kill()
                child.wait()
            raise
        seconds = time.perf_counter() - started
        if not os.path.exists(result_path):
            shown = "\n".join(tail[-15:])
            raise BenchError(f"The measurement process for {config.label()} failed (exit {code}):\n{shown}")
        with open(result_path) as handle:
            result = json.load(handle)
    if not result.get("ok"):
        raise BenchError(f"{config.label()}: {result.get('error', 'unknown error')}")
    result.pop("ok")
    result["seconds"] = round(seconds, 3)
    return result


def run_benchmark(configs, runtime_config, on_output=None, on_result=None, profile_dir=None):
    """Measures each configuration in its own process, one after the other.

    Args:
        configs: resolved BenchConfigs.
        runtime_config: the runtime.RuntimeConfig every process is set up with.
        on_output: see run_configuration.
        on_result: called with (config, result) after each configuration.
        profile_dir: see run_configuration.

    Returns:
        the list of results (see run_configuration).
    """
    results = []
    for config in configs:
        result = run_configuration(config, runtime_config, on_output=on_output, profile_dir=profile_dir)
        results.append(result)
        if on_result is not None:
            on_result(config, result)
    return results


def _child(config_text, result_path, profile_dir=None):
    """Runs inside the configured child process: set up, measure, write the result file."""
    from prednet_keras import runtime

    try:
        config = BenchConfig.from_dict(json.loads(config_text))  # resolved by the parent
        config.validate()
        runtime_config, effective = runtime.configure_from_environment()
        from prednet_keras.train import jit_compile_for

        jit_compile = jit_compile_for(runtime_config.to_dict(), effective)
        print(f"measuring {config.label()} on {runtime_config.backend} / {runtime_config.device} "
              f"(jit_compile={jit_compile})", flush=True)
        phases = measure(config, jit_compile, progress=lambda text: print(text, flush=True), profile_dir=profile_dir)
        result = {
            "ok": True,
            "config": config.to_dict(),
            "data": SYNTHETIC_DATA,
            "runtime": {"requested": runtime_config.to_dict(), "effective": effective, "jit_compile_used": jit_compile},
            "fingerprint": runtime.fingerprint(),
            **phases,
        }
    except (ValueError, runtime.RuntimeSetupError) as error:
        if os.environ.get("PREDNET_DEBUG"):
            raise
        result = {"ok": False, "error": " ".join(str(error).split())}
    except Exception as error:  # a bug: the parent shows it with the child's output
        import traceback

        traceback.print_exc()
        result = {"ok": False, "error": f"{type(error).__name__}: {error}"}
    from prednet_keras import runs

    runs.atomic_write_json(result_path, result)
    return 0 if result["ok"] else 1


# --------------------------------------------------------------------- reports
def document(results, command=None):
    """The JSON document of a benchmark: format, time, command, data, results (each with its fingerprint)."""
    from prednet_keras import __version__

    return {
        "format": BENCH_FORMAT,
        "format_version": BENCH_FORMAT_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": list(command) if command else None,
        "prednet_keras_version": __version__,
        "data": SYNTHETIC_DATA,
        "fps_definition": "batch * nt * timed steps / sum of timed step times (warm-up steps, which compile, excluded)",
        "results": results,
    }


def write_results(path, results, command=None, overwrite=False):
    """Writes the benchmark JSON to `path` atomically; refuses to replace a file unless `overwrite`."""
    from prednet_keras import runs

    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; pass --overwrite to replace it.")
    runs.atomic_write_json(path, document(results, command))


def _mib(value):
    return None if value is None else value / 2**20


def _peak_text(result):
    host = device = None
    for phase in ("train", "infer"):
        memory = (result.get(phase) or {}).get("memory") or {}
        if memory.get("host_rss_peak_bytes") is not None:
            host = max(host or 0, memory["host_rss_peak_bytes"])
        if memory.get("device_peak_bytes") is not None:
            device = max(device or 0, memory["device_peak_bytes"])
    parts = []
    parts.append(f"host {_mib(host):.0f} MiB" if host is not None else f"host {NOT_AVAILABLE}")
    if device is not None:
        parts.append(f"GPU {_mib(device):.0f} MiB")
    elif result["runtime"]["requested"].get("device", "cpu") != "cpu":
        parts.append(f"GPU {NOT_AVAILABLE}")
    return ", ".join(parts)


def table_rows(results):
    """One row (dict of display strings) per result."""
    rows = []
    for result in results:
        config = result["config"]
        effective = result["runtime"]["effective"]
        device = result["runtime"]["requested"]["device"]
        if effective.get("device") == "gpu":
            names = ((result.get("fingerprint") or {}).get("gpu") or {}).get("nvidia_smi") or {}
            gpus = names.get("gpus") or []
            if gpus:
                device = f"{device} ({gpus[0].get('name')})"
        timed = result.get("train") or result.get("infer")
        model = model_kinds.get(config["model"]).bench_row_name(config)
        rows.append({
            "model": model,
            "backend": _backend_text(result["runtime"]),
            "device": device,
            "batch": str(config["batch_size"]),
            "size": f"{config['size'][0]}x{config['size'][1]}",
            "nt": str(config["nt"]),
            "train fps": f"{result['train']['fps']:.2f}" if "train" in result else "-",
            "infer fps": f"{result['infer']['fps']:.2f}" if "infer" in result else "-",
            "step ms median/p90": f"{timed['step_ms']['median_ms']:.1f}/{timed['step_ms']['p90_ms']:.1f}"
            + (" (train)" if "train" in result and "infer" in result else ""),
            "peak memory": _peak_text(result),
        })
    return rows


def _backend_text(runtime):
    """The backend, with what changes its arithmetic: torch.compile, a mixed precision."""
    requested = runtime["requested"]
    text = requested["backend"]
    if text == "torch" and runtime.get("jit_compile_used") is True:
        text += " compiled"
    precision = (runtime.get("effective") or {}).get("precision") or requested.get("precision") or "float32"
    return text if precision == "float32" else f"{text} {precision}"


def format_table(results):
    """The human-readable table: model, backend, device, batch, size, nt, train/infer frames/s,
    step time median/p90 (training when measured), peak memory; then what the figures mean."""
    rows = table_rows(results)
    columns = ["model", "backend", "device", "batch", "size", "nt", "train fps", "infer fps", "step ms median/p90", "peak memory"]
    widths = {c: max([len(c)] + [len(r[c]) for r in rows]) for c in columns}
    numeric = {"batch", "nt", "train fps", "infer fps"}

    def line(values):
        return "  ".join(values[c].rjust(widths[c]) if c in numeric else values[c].ljust(widths[c]) for c in columns).rstrip()

    out = [line({c: c for c in columns}), line({c: "-" * widths[c] for c in columns})]
    out += [line(r) for r in rows]
    if results:
        first = results[0]["config"]
        out.append("")
        out.append(
            f"fps: frames per second over {first['steps']} timed steps after {first['warmup']} warm-up step(s); "
            f"input {SYNTHETIC_DATA}."
        )
        out.append("Environment fingerprint and every step time: in the JSON (--json).")
    return "\n".join(out) + "\n"


def plot_results(results, path):
    """Writes a PNG of frames/s against batch size and against frame size (pixels), per phase.

    A panel is drawn for each swept quantity that takes more than one value; with
    no sweep, one bar chart of the phases.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    from prednet_keras import runs

    def key(result, phase, by):
        config = result["config"]
        other = (
            f"{config['size'][0]}x{config['size'][1]}" if by == "batch" else f"batch {config['batch_size']}"
        )
        return f"{config['model']} {result['runtime']['requested']['backend']} {phase}, {other}"

    batches = {r["config"]["batch_size"] for r in results}
    sizes = {tuple(r["config"]["size"]) for r in results}
    panels = [by for by, values in (("batch", batches), ("size", sizes)) if len(values) > 1] or ["none"]
    figure = Figure(figsize=(6 * len(panels), 4.2), dpi=100)
    for index, by in enumerate(panels):
        axes = figure.add_subplot(1, len(panels), index + 1)
        if by == "none":
            labels, values = [], []
            for result in results:
                for phase in ("train", "infer"):
                    if phase in result:
                        labels.append(f"{result['config']['model']}\n{phase}")
                        values.append(result[phase]["fps"])
            axes.bar(range(len(values)), values)
            axes.set_xticks(range(len(values)), labels)
            axes.set_ylabel("frames / s")
            continue
        lines = {}
        for result in results:
            for phase in ("train", "infer"):
                if phase not in result:
                    continue
                config = result["config"]
                x = config["batch_size"] if by == "batch" else config["size"][0] * config["size"][1]
                lines.setdefault(key(result, phase, by), []).append((x, result[phase]["fps"]))
        for label, points in sorted(lines.items()):
            points.sort()
            axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        axes.set_xlabel("batch size" if by == "batch" else "pixels per frame (H x W)")
        axes.set_ylabel("frames / s")
        axes.set_xscale("log", base=2)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=7)
    figure.suptitle("prednet-bench throughput (synthetic input)", fontsize=10)
    figure.tight_layout()
    runs.write_through_temporary(path, lambda temporary: figure.savefig(temporary, format="png"))


# ------------------------------------------------------------------------- main
def main(argv=None):
    """Entry point of `python -m prednet_keras.bench child CONFIG_JSON RESULT_JSON` (started by run_configuration)."""
    parser = argparse.ArgumentParser(prog="python -m prednet_keras.bench")
    commands = parser.add_subparsers(dest="command", required=True)
    child = commands.add_parser("child", help="measure one configuration in this (runtime-configured) process")
    child.add_argument("config", help="BenchConfig as JSON")
    child.add_argument("result", help="where to write the result JSON")
    child.add_argument("--profile", help="folder for profiler traces of each phase")
    args = parser.parse_args(argv)
    return _child(args.config, args.result, args.profile)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The result file is complete; skip interpreter teardown (TensorFlow's noise at exit).
    os._exit(code)
