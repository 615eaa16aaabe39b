"""Measuring one benchmark configuration inside its configured process: step times, frames/s, peak memory.

What is timed. Training: `train_on_batch` of the model as training builds it
(Lotter's PredNet: `session.recipe_training.build_model`, Adam, MAE of the weighted error;
Chainer PredNet: one truncated-BPTT window of `nt` frame steps at batch 1 through
`chainer_protocol.ChainerPredNetTrainer`, as `train_chainer_prednet` updates; the MNIST
autoencoder: Adam, MSE). Inference: `predict_on_batch` of the frame-prediction
model (`build_prediction_model`; the Chainer PredNet's `prediction_model`; the
autoencoder itself). Each step returns its loss or predictions to the host, so
every step time includes waiting for the device. The first `warmup` steps (which
compile) are left out: frames/s = batch * nt * steps / (time of the later steps).
The input is synthetic: uniform random frames in [0, 1] drawn with numpy from a
seed, already in memory, so no data pipeline is measured.

With the torch backend and jit_compile=True (`--jit-compile`), Keras' training step runs
through torch.compile; each phase records how many graphs TorchDynamo had compiled before
it, after its warm-up and after its timed steps, so a recompilation during timing shows, and
with Inductor's CUDA graphs on (TORCHINDUCTOR_CUDAGRAPHS=1), how many graphs Inductor ran without them.

Peak memory: the process's host RSS peak (`resource.getrusage`, over the whole
process up to the end of the phase) and, on a GPU, the framework's peak device
memory (jax `memory_stats()['peak_bytes_in_use']` over the process;
torch `max_memory_allocated` and TensorFlow `get_memory_info()['peak']`, reset
before each phase); "not available" where the framework has none.
"""

import os
import re
import shutil
import sys
import time

from prednet_keras import backends
from prednet_keras.session import torch_compile
from prednet_keras.session.display import FirstStep

__all__ = ["NOT_AVAILABLE", "device_peak", "host_peak_bytes", "measure", "measure_phase", "step_statistics"]

NOT_AVAILABLE = "not available"


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

    backend = backends.find(keras.backend.backend())
    try:
        if backend is not None and backend.reset_device_peak is not None:
            backend.reset_device_peak()
    except Exception:  # best effort: the peak then covers the process so far
        pass


def reset_torch_peak():
    """Starts torch's peak device memory afresh (Backend.reset_device_peak)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def reset_tensorflow_peak():
    """Starts TensorFlow's peak device memory afresh (Backend.reset_device_peak)."""
    import tensorflow as tf

    if tf.config.get_visible_devices("GPU"):
        tf.config.experimental.reset_memory_stats("GPU:0")


def device_peak():
    """(bytes or None, how it was measured or why it is not available) for the first GPU."""
    import keras

    backend = backends.find(keras.backend.backend())
    if backend is None:
        return None, NOT_AVAILABLE
    try:
        return backend.device_peak()
    except Exception as error:
        return None, f"{NOT_AVAILABLE} ({type(error).__name__}: {error})"


def jax_peak():
    """JAX's peak device memory over the process (Backend.device_peak)."""
    import jax

    device = jax.devices()[0]
    if device.platform == "cpu":
        return None, f"{NOT_AVAILABLE} (CPU run)"
    stats = device.memory_stats() or {}
    if "peak_bytes_in_use" not in stats:
        return None, f"{NOT_AVAILABLE} ({device.platform} reports no peak_bytes_in_use)"
    return int(stats["peak_bytes_in_use"]), "jax memory_stats()['peak_bytes_in_use'] (whole process)"


def torch_peak():
    """torch's peak device memory in this phase (Backend.device_peak)."""
    import torch

    if not torch.cuda.is_available():
        return None, f"{NOT_AVAILABLE} (CPU run)"
    return int(torch.cuda.max_memory_allocated()), "torch.cuda.max_memory_allocated (this phase)"


def tensorflow_peak():
    """TensorFlow's peak device memory in this phase (Backend.device_peak)."""
    import tensorflow as tf

    if not tf.config.get_visible_devices("GPU"):
        return None, f"{NOT_AVAILABLE} (CPU run)"
    return int(tf.config.experimental.get_memory_info("GPU:0")["peak"]), "tf get_memory_info('GPU:0')['peak'] (this phase)"


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
    are read by session.callbacks.StepLosses, as prednet-train's run recorder reads them: async-safe where
    it is (JAX), before each step in fit's thread, Keras converting the logs in its thread pool.
    """
    import keras

    from prednet_keras.session.callbacks import StepLosses

    losses = StepLosses(model)

    class _StepDone(keras.callbacks.Callback):
        async_safe = losses.async_safe

        def __init__(self, count, on_step):
            super().__init__()
            self.count = count
            self.on_step = on_step
            self.done = 0

        def on_train_batch_begin(self, batch, logs=None):
            if self.async_safe:
                self._read(losses.begin(batch))

        def on_train_batch_end(self, batch, logs=None):
            if self.async_safe:
                losses.arrive(batch, logs)
            else:
                self._read(losses.add(batch, logs))

        def on_train_end(self, logs=None):
            # The steps run only to read the last timed one: read here, so a later fit starts afresh.
            self._read(losses.flush())

        def _read(self, read):
            for _ in read:
                if self.done < self.count:
                    self.done += 1
                    self.on_step()

    def batches():
        while True:
            yield x, y

    # Steps dispatched after a step before its loss is read in a callback: `lag`, and one more where
    # the loss is read before the next step rather than after the step.
    unread = losses.lag + (1 if losses.async_safe else 0)

    def run(count, on_step):
        # Every time is taken in a step's callback, never at the end of fit,
        # which also copies the trained state back to the model.
        model.fit(batches(), steps_per_epoch=count + unread, epochs=1, shuffle=False, verbose=0,
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
    step), memory, build_seconds, dtype_policy (the Keras dtype policy the
    model was built under), parameters, what. With `profile_dir`, after
    the timed steps, PROFILED_STEPS more steps run under the backend's
    profiler (`profiling.trace`) into profile_dir/<label>-<phase> (an earlier
    trace there is replaced), and the
    result gains "profile": the trace folder and the summary of its busiest
    timelines; the profiled steps are not in the timing.
    """
    import numpy as np

    import keras

    rng = np.random.default_rng([config.seed, 0 if phase == "train" else 1])
    # The policy the model is built under (its layers take it at construction): what was measured.
    dtype_policy = keras.config.dtype_policy().name
    _reset_device_peak()
    started = time.perf_counter()
    runner = config.kind.bench_runner(config, phase, jit_compile, rng, _Kit)
    build_seconds = time.perf_counter() - started

    warmup_seconds, step_seconds = [], []
    # The first step compiles (227 s for torch.compile on an H200) and prints nothing by itself.
    compiles = backends.named(keras.backend.backend()).steps_compile(jit_compile)
    first = FirstStep(f"{phase} step", f"{phase} step", "first step", compiles) if progress is not None else None
    if first is not None:
        first.begin()
    last = [time.perf_counter()]
    graphs = {"before": torch_compile.compiled_graphs()}

    def on_step():
        now = time.perf_counter()
        seconds, last[0] = now - last[0], now
        if first is not None and not first.done:
            first.end()
            if cache_line := torch_compile.inductor_cache_line():
                _say(progress, cache_line)
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
        "dtype_policy": dtype_policy,
        "parameters": runner.parameters,
        "what": runner.notes,
        # torch only: graphs torch.compile had made before the phase, after its warm-up and after its timed
        # steps; a timed step that compiled would show as a difference between the last two.
        **({"torch_compiled_graphs": graphs} if graphs["before"] is not None else {}),
        # torch with Inductor's CUDA graphs on: the graphs Inductor ran without them (0: every graph as a CUDA graph).
        **({"torch_cudagraph_skips": skips} if (skips := torch_compile.cudagraph_skips()) is not None else {}),
        # torch.compile: the graphs of the process so far that Inductor loaded from its cache (hits) or compiled.
        **({"torch_inductor_cache": cache} if (cache := torch_compile.inductor_cache_use()) is not None else {}),
        **({"profile": profile} if profile else {}),
    }


PROFILED_STEPS = 5


def _profile(runner, config, phase, profile_dir, progress):
    """Traces PROFILED_STEPS steps into profile_dir/<label>-<phase>, replacing an earlier trace there."""
    from prednet_keras.bench import profiling

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

    # clear_session resets all of Keras' global state, the dtype policy runtime.configure set with it:
    # without setting it again, a mixed_bfloat16 benchmark would build and time a float32 model.
    policy = keras.config.dtype_policy()
    out = {}
    for phase in config.phases:
        keras.backend.clear_session()
        keras.config.set_dtype_policy(policy)
        out[phase] = measure_phase(config, phase, jit_compile, progress, profile_dir)
        _say(progress, f"{phase}: {out[phase]['fps']:.2f} frames/s")
    return out


def _say(progress, text):
    if progress is not None:
        progress(text)

