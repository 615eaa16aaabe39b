"""prednet-bench: training and inference throughput, step times and peak memory."""

import os
import sys

import click

from prednet_keras.cli.common import FrameSize, IntList, ModelKindName, fail_on_user_errors
from prednet_keras.cli.options import runtime_config, runtime_options


class FrameSizeList(click.ParamType):
    """Comma-separated HxW sizes, e.g. 64x80,128x160."""

    name = "HxW,HxW,..."

    def get_metavar(self, param, ctx=None):
        return self.name

    def convert(self, value, param, ctx):
        if isinstance(value, (tuple, list)):
            return tuple(value)
        return tuple(FrameSize().convert(part.strip(), param, ctx) for part in str(value).split(",") if part.strip())


@click.command(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
    epilog="""\b
Examples:
  prednet-bench                                        # KITTI PredNet, 128x160, nt 10, batch 4, train + infer
  prednet-bench --threads 2 --steps 5 --warmup 2 --mode train
  prednet-bench --backend jax --device gpu --batch-size 4,16 --json bench.json --plot bench.png
  prednet-bench --backend jax --device gpu --sizes 64x80,128x160,256x320 --plot sizes.png
  prednet-bench --model prednet-chainer --batch-size 1   # the study's model, one window per update
  prednet-bench --model autoencoder --batch-size 1,32
  prednet-bench --backend jax --device gpu --mode train --profile traces/   # where the step time goes
  prednet-bench --backend jax --device gpu --precision mixed_bfloat16 --batch-size 4,16
  prednet-bench --backend torch --device gpu --jit-compile --mode train   # torch.compile (slow to compile)
""",
)
@click.option("--model", type=ModelKindName(bench=True), default="prednet", show_default=True, help="Lotter's PredNet, the study's Chainer-lineage PredNet (trained one window at batch 1), or the study's MNIST autoencoder.")
@click.option("--autoencoder", type=click.Choice(["conv", "dense"]), help="autoencoder only: the architecture [default: conv].")
@click.option("--mode", type=click.Choice(["train", "infer", "both"]), default="both", show_default=True, help="Measure training, inference, or both.")
@click.option("--batch-size", "batch_sizes", type=IntList(example="4,16"), multiple=True, help="Sequences per step; repeat or give a comma list (4,16) to sweep [default: 4; 1 for prednet-chainer].")
@click.option("--size", type=FrameSize(), help="Frame size HxW, each divisible by 2^(layers-1) [default: 128x160; 120x160 for prednet-chainer].")
@click.option("--sizes", type=FrameSizeList(), help="Several frame sizes to sweep, e.g. 64x80,128x160 (instead of --size).")
@click.option("--nt", type=click.IntRange(min=1), help="Frames per sequence; for prednet-chainer frame steps per truncated-BPTT window [default: 10; 20 for prednet-chainer].")
@click.option("--stack-sizes", type=IntList(), help="Channels per layer; the first is the image channels [default: 3,48,96,192 (KITTI)].")
@click.option("--unroll/--no-unroll", default=None, help="prednet and prednet-chainer: the training step's time loop unrolled or rolled [default: as prednet-train trains, prednet unrolled, prednet-chainer rolled].")
@click.option("--steps", type=click.IntRange(min=1), default=20, show_default=True, help="Timed steps per phase.")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True, help="Untimed steps first (the first compiles).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the synthetic input frames.")
@runtime_options(interop_threads=True, cudnn=False)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write every figure, step time and the environment fingerprint to this JSON file.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Write a PNG of frames/s against batch size and frame size.")
@click.option("--profile", "profile_dir", type=click.Path(file_okay=False), help="After the timed steps, trace 5 more with the backend's profiler into this folder (one subfolder per configuration and phase) and show where their time went; the summary goes into --json. Not timed.")
@click.option("--overwrite", is_flag=True, help="Replace existing --json / --plot files and --profile traces.")
@click.option("-q", "--quiet", is_flag=True, help="No per-step progress lines (on stderr).")
@fail_on_user_errors
def main(model, autoencoder, mode, batch_sizes, size, sizes, nt, stack_sizes, unroll, steps, warmup, seed, json_path,
         plot_path, profile_dir, overwrite, quiet, **runtime_values):
    """Measure training and inference throughput (frames/s) of a PredNet.

    Each configuration (batch size x frame size) runs in its own process, set
    up with the runtime options before the framework starts. Training times
    the model's optimizer step as prednet-train builds and runs it (for
    PredNet through model.fit, one step queued behind the one whose loss is
    read; a step's time is the time between two losses arriving); inference
    its frame-prediction model. After --warmup untimed steps: frames/s
    (batch x nt x steps / time), the step-time median, p10, p90, min and max,
    and peak memory (host RSS; GPU where the framework reports it). The
    input is synthetic (random frames from --seed), so no data pipeline is
    measured. The table goes to stdout; --json keeps every step time and the
    environment fingerprint beside each figure.
    """
    from prednet_keras import bench, runtime
    from prednet_keras.bench import profiling

    configs = _configs(model, autoencoder, mode, batch_sizes, size, sizes, nt, stack_sizes, unroll, steps, warmup, seed)
    runtime_config = _runtime_config(runtime_values)
    for path, flag in ((json_path, "--json"), (plot_path, "--plot")):
        if path and os.path.exists(path) and not overwrite:
            raise click.UsageError(f"{flag} {path} exists; pass --overwrite to replace it.")
    if profile_dir and os.path.exists(profile_dir) and os.listdir(profile_dir) and not overwrite:
        raise click.UsageError(f"--profile {profile_dir} is not empty; pass --overwrite to replace the traces of the configurations measured.")

    command = ["prednet-bench"] + sys.argv[1:]
    done = []

    def on_result(config, result):
        done.append(result)
        click.echo(f"{config.label()}: " + _summary(result), err=True)
        for phase in ("train", "infer"):
            profile = result.get(phase, {}).get("profile")
            if profile:
                click.echo(f"{phase} profile ({profile['steps']} steps, {profile['folder']}):", err=True)
                click.echo(profiling.format_summary(profile["summary"], steps=profile["steps"]) if profile["summary"]
                           else f"  {profile['note']}\n", err=True, nl=False)
        if json_path:  # after every configuration, so a long sweep keeps what it measured
            bench.write_results(json_path, done, command=command, overwrite=True)

    on_output = None if quiet else (lambda line: click.echo(f"  {line}", err=True))
    try:
        results = bench.run_benchmark(configs, runtime_config, on_output=on_output, on_result=on_result,
                                      profile_dir=profile_dir)
    except (bench.BenchError, runtime.RuntimeSetupError) as error:
        kept = f" ({len(done)} measured configuration(s) kept in {json_path})" if json_path and done else ""
        raise click.ClickException(f"{error}{kept}") from None
    click.echo(bench.format_table(results), nl=False)
    if json_path:
        click.echo(f"JSON written to {json_path}", err=True)
    if plot_path:
        bench.plot_results(results, plot_path)
        click.echo(f"Plot written to {plot_path}", err=True)


def _configs(model, autoencoder, mode, batch_sizes, size, sizes, nt, stack_sizes, unroll, steps, warmup, seed):
    from prednet_keras import model_kinds
    from prednet_keras.bench import BenchConfig

    if size is not None and sizes:
        raise click.UsageError("Give --size or --sizes, not both.")
    frame_sizes = list(dict.fromkeys(sizes)) if sizes else [size]
    batches = list(dict.fromkeys(b for group in batch_sizes for b in group))
    if not batches:
        batches = [1 if model_kinds.get(model).bench.train_batch_one else 4]
    configs = []
    for frame_size in frame_sizes:
        for batch in batches:
            config = BenchConfig(
                model=model, mode=mode, batch_size=batch, size=frame_size, nt=nt, stack_sizes=stack_sizes,
                autoencoder=autoencoder, unroll=unroll, steps=steps, warmup=warmup, seed=seed,
            )
            try:
                configs.append(config.resolved())
            except ValueError as error:
                raise click.UsageError(str(error)) from None
    return configs


def _runtime_config(runtime_values):
    from prednet_keras import runtime

    config = runtime_config(runtime_values)
    # Known-unsupported combinations fail here, before a process is started.
    problems = runtime.unsupported_settings(config)
    if problems:
        raise click.UsageError(runtime.unsupported_message(config, problems))
    return config


def _summary(result):
    parts = []
    for phase in ("train", "infer"):
        if phase in result:
            stats = result[phase]["step_ms"]
            parts.append(f"{phase} {result[phase]['fps']:.2f} frames/s (step median {stats['median_ms']:.1f} ms)")
    return ", ".join(parts)


if __name__ == "__main__":
    main()
