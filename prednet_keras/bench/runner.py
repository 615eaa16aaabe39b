"""The parent side of a benchmark: what a configuration is, and one process measuring each.

One measured configuration (model, frame size, batch size, sequence length)
runs in its own process, set up by `runtime` before the framework is imported,
exactly as a training run is:

    parent:  results = run_benchmark(configs, runtime_config)    # no framework needed
             -> one child per configuration:
                python -m prednet_keras.bench.child CONFIG_JSON RESULT_JSON
                (environment from runtime.environment_for(runtime_config))
    child:   runtime.configure_from_environment(); measure(config, jit_compile)   (bench.child)

What is timed and how: bench.measure. The results' JSON document, table and plot: bench.report.
"""

import dataclasses
import json
import os
import subprocess
import tempfile
import time

from prednet_keras import model_kinds
from prednet_keras.options.record import OptionsRecord

__all__ = [
    "BENCH_FORMAT",
    "BenchConfig",
    "BenchError",
    "MODELS",
    "MODES",
    "SYNTHETIC_DATA",
    "run_benchmark",
    "run_configuration",
]

BENCH_FORMAT = "prednet-bench"
BENCH_FORMAT_VERSION = 1
# The model kinds prednet-bench measures; each kind's sizes and runner are its own (model_kinds, `bench`).
MODELS = model_kinds.names(bench=True)
MODES = ("train", "infer", "both")
KITTI_STACK_SIZES = (3, 48, 96, 192)
SYNTHETIC_DATA = "synthetic: uniform random frames in [0, 1] drawn with numpy from the seed, held in memory (no data pipeline)"


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
        unroll: prednet and prednet-chainer: unroll the training step's time loop
            (None: prednet-train's default, True for prednet, False for prednet-chainer).
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
            config.unroll = bench.unroll_default
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
    from prednet_keras.runtime import childproc

    with tempfile.TemporaryDirectory(prefix="prednet-bench-") as scratch:
        result_path = os.path.join(scratch, "result.json")
        args = [
            "-m", "prednet_keras.bench.child",
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
