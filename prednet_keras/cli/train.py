"""prednet-train: train PredNet with the authors' KITTI recipe into a run folder."""

import math
import os
import sys
import time

import click
from click.core import ParameterSource

from prednet_keras.cli.common import FrameSize, IntList, ModelKindName, fail_on_user_errors
from prednet_keras.cli.options import runtime_config, runtime_options
from prednet_keras.runtime.options import names as runtime_names

# Options --resume may change: the rest define the run and must stay as recorded.
RESUME_MAY_CHANGE = {"epochs", "quiet", "output", "resume", "resume_with_changed_code"}
# Lotter's recipe only: refused with the study models (issue 9), which follow their protocol.
LOTTER_ONLY = (
    "nt", "batch_size", "epochs", "steps_per_epoch", "lr", "lr_drop_epoch", "lr_drop_factor",
    "layer_loss", "val_sequences", "val_data", "val_fraction", "augment", "patience", "devices",
)
# The study models' options: refused with --model prednet.
STUDY_ONLY = ("protocol", "tbptt", "emulate_cpu_aliasing", "autoencoder", "period", "bprop", "images", "heldout_data")
# Every option a model kind may refuse (model_kinds: each kind names the options that apply to it), in the
# order an error lists them.
KIND_OPTIONS = LOTTER_ONLY + ("unroll", "stack_sizes", "r_stack_sizes", "filter_size", "size", "tbptt", "emulate_cpu_aliasing",
                              "period", "bprop", "autoencoder", "images", "protocol", "data", "heldout_data")
# Every runtime option (those prednet-train does not offer never come up).
RUNTIME_OPTIONS = runtime_names()


class LayerLoss(click.ParamType):
    """L_0, L_all, or one weight per layer (e.g. 1,0.1,0.1,0.1)."""

    name = "L_0|L_all|W,W,..."

    def get_metavar(self, param, ctx=None):
        return self.name

    def convert(self, value, param, ctx):
        if isinstance(value, (tuple, list)):
            return tuple(value)
        if value in ("L_0", "L_all"):
            return value
        try:
            weights = tuple(float(v) for v in str(value).split(","))
        except ValueError:
            self.fail(f"{value!r} is not L_0, L_all or comma-separated numbers (e.g. 1,0.1,0.1,0.1).", param, ctx)
        if not all(math.isfinite(w) and w >= 0 for w in weights):
            self.fail(f"{value!r}: layer weights must be finite and >= 0.", param, ctx)
        return weights


@click.command(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
    epilog="""\b
Examples:
  prednet-train                                   # KITTI recipe on the embedded video, CPU
  prednet-train --epochs 20 --size 64x80 -o weights/small
  prednet-train --device gpu --data kitti -o weights/kitti   # after prednet-data kitti
  prednet-train --device gpu --epochs 250 --data X_train.hkl --val-data X_val.hkl
  prednet-train --resume -o weights/small         # continue after an interruption
  prednet-train --model prednet-chainer           # the study's Chainer PredNet, paper protocol
  prednet-train --model prednet-chainer --tbptt clean --emulate-cpu-aliasing
  prednet-train --model autoencoder --autoencoder dense --protocol quick
  prednet-train --model prednet_keras.examples.mnist_cnn:small_cnn --epochs 1   # your own Keras model
""",
)
@click.option("--model", type=ModelKindName(), default="prednet", show_default=True, help="Network to train: Lotter's PredNet, the study's Chainer-lineage PredNet, the study's MNIST autoencoder, or your own Keras model: a function (MODULE:FUNCTION or FILE.py:FUNCTION) returning prednet_keras.model_kinds.UserModel(model, train_data, loss, ...); --epochs, --batch-size, --seed and --init-weights apply to it.")
@click.option("--protocol", type=click.Choice(["paper", "quick"]), help="Study models only: the study's training protocol, or a tiny one for smoke tests [default: paper].")
@click.option("--tbptt", type=click.Choice(["chainer", "clean"]), help="prednet-chainer only: truncation as the original script (chainer) or textbook (clean) [default: chainer].")
@click.option("--emulate-cpu-aliasing", is_flag=True, default=None, help="prednet-chainer only: train every frame of a window towards its last frame, as the original did on CPU.")
@click.option("--autoencoder", type=click.Choice(["conv", "dense"]), help="autoencoder only: the architecture [default: conv].")
@click.option("--period", type=click.IntRange(min=1), help="prednet-chainer only: frames to step through, instead of the protocol's (paper: 5000).")
@click.option("--bprop", type=click.IntRange(min=1), help="prednet-chainer only: frames per update (truncation length), instead of the protocol's (20).")
@click.option("--images", type=click.IntRange(min=1), help="autoencoder only: training images (updates), instead of the protocol's (paper: 60000).")
@click.option("--stack-sizes", type=IntList(), help="Channels per layer; the first is the image channels [default: 3,48,96,192 (KITTI)].")
@click.option("--r-stack-sizes", type=IntList(), help="Channels of the recurrent units per layer [default: = --stack-sizes].")
@click.option("--filter-size", type=click.IntRange(min=1), default=3, show_default=True, help="Kernel size of every convolution.")
@click.option("--data", type=click.Path(), help="Training frames: kitti (the train split of the KITTI that prednet-data kitti fetched, validated on its val split), a dataset file, frames folder, list file, video, .hkl/.npz/.h5 [default: the embedded real video, train split]; for --model autoencoder an MNIST .npz or IDX folder [default: the embedded MNIST].")
@click.option("--heldout-data", type=click.Path(), help="prednet-chainer only: frames no update trains on, scored after training (next-frame MSE per sequence, in the manifest's result.heldout; the predictions in heldout_predictions.npz): a dataset file, or 'embedded' for the three embedded video splits (with --data another set) [default: none].")
@click.option("--val-data", type=click.Path(), help="Validation frames [default: embedded val split; with --data kitti, KITTI's val split; with other --data, its last --val-fraction of frames].")
@click.option("--val-fraction", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.1, show_default=True, help="Share of --data held out for validation when --val-data is not given.")
@click.option("--size", type=FrameSize(), help="Resize frames to HxW (each divisible by 2^(layers-1)) [default: the data's size; 120x160 for prednet-chainer].")
@click.option("--epochs", type=click.IntRange(min=1), default=150, show_default=True, help="Training epochs.")
@click.option("--steps-per-epoch", type=click.IntRange(min=1), help="Steps per epoch [default: 500 // batch size = 125].")
@click.option("--batch-size", type=click.IntRange(min=1), default=4, show_default=True, help="Sequences per step: the global batch, split over --devices.")
@click.option("--nt", type=click.IntRange(min=2), default=10, show_default=True, help="Frames per sequence.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=1e-3, show_default=True, help="Adam learning rate.")
@click.option("--lr-drop-epoch", type=click.IntRange(min=0), help="Epochs at --lr; later epochs use lr x --lr-drop-factor [default: epochs // 2, kitti_train.py's rule (75 of 150), so a 4-epoch run trains epochs 3-4 at the lower rate].")
@click.option("--lr-drop-factor", type=click.FloatRange(min=0, min_open=True), default=0.1, show_default=True, help="Learning-rate factor after the drop.")
@click.option("--layer-loss", type=LayerLoss(), default="L_0", show_default=True, help="Weight of each layer's error: L_0 (pixels only), L_all (1, then 0.1), or a comma list.")
@click.option("--val-sequences", type=click.IntRange(min=0), default=100, show_default=True, help="Fixed validation sequences (0: none; the best model is then the lowest training loss).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the initial weights and of the order of training sequences.")
@click.option("--unroll/--no-unroll", default=None, help="prednet and prednet-chainer: unroll the time loop in the compiled training step: the same operations, which the compiler then optimises across time steps. prednet: 1.3x faster with JAX on an H200, no change with TensorFlow on a CPU [default: unroll]. prednet-chainer's window, at the paper's size: 13x faster with JAX on 2 CPU cores, no consistent difference with TensorFlow there, 1.2x slower with JAX on an H200 [default: no unroll, as every run before the option].")
@click.option("--augment", type=click.Choice(["flip", "reverse"]), multiple=True, help="Augment the training sequences (repeatable): flip mirrors a sequence left-right, reverse plays it backwards, each drawn with probability 1/2 per sequence from the seed [default: none, as the recipe].")
@click.option("--patience", type=click.IntRange(min=1), help="Stop early once the validation loss has not improved for N epochs (Keras' EarlyStopping); model.keras stays the best epoch's, and the manifest's result.stopped_early says when and why. An early-stopped run is complete: --resume refuses it [default: train every epoch].")
@click.option("--init-weights", type=click.Path(dir_okay=False), help="Start from these initial weights (e.g. another run's initial_weights.h5) instead of the seed's.")
@runtime_options(devices=True)
@click.option("-o", "--output", type=click.Path(file_okay=False), help="Run folder [default: weights/prednet-<date>-<time>].")
@click.option("--resume", is_flag=True, help="Continue the run in --output from its last completed epoch (a model trained by its protocol: from its last checkpoint). A complete run is continued only with --epochs raised above its epochs; a shipped model, a folder that is not a run folder, or one whose files do not match its manifest is refused, unchanged, and so is a run last trained with other prednet_keras code (--resume-with-changed-code).")
@click.option("--resume-with-changed-code", is_flag=True, help="With --resume: continue the run although the prednet_keras code now running is not the code it last trained with (their package checksums differ), which --resume refuses; the manifest's resumes record the code each resume ran and this change.")
@click.option("--overwrite", is_flag=True, help="Replace an existing run folder at --output. The old run is kept aside until the new one completes its first epoch, and put back unchanged if the new one fails or is stopped before that.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True, help="Train N times into OUTPUT/repeat-1..N and say whether the runs are bit-identical (final weights and loss curves): a determinism audit.")
@click.option("-q", "--quiet", is_flag=True, help="One log line per epoch instead of a progress bar.")
@click.pass_context
@fail_on_user_errors
def main(ctx, **options):
    """Train PredNet into a run folder.

    Defaults are the authors' KITTI recipe (kitti_train.py): nt 10, batch 4,
    500 sequences per epoch, 150 epochs, Adam 1e-3 then 1e-4 from the halfway
    epoch, L_0 loss, best model kept on 100 validation sequences. Without
    --data it trains on the real video shipped with the package.

    The learning rate drops after epochs // 2 whatever --epochs is, as
    kitti_train.py's did: a 4-epoch run trains epochs 1-2 at --lr and 3-4 at
    lr x --lr-drop-factor. --lr-drop-epoch sets another epoch; the run's first
    lines and its manifest (schedule) say which rule applied.

    The run folder gets manifest.json (options, runtime asked for and
    obtained, environment, seeds, checksums), history.csv, model.keras (best),
    a checkpoint of the last epoch for --resume, and loss.png.

    A command that is refused or fails leaves an existing run folder as it
    was: --resume refuses a complete run (unless --epochs is raised), a folder
    that is not a run folder or whose files do not match its manifest, and a
    shipped model; --overwrite keeps the old run until the new one has
    completed its first epoch, and puts it back if the new one ends earlier.

    --model prednet-chainer and --model autoencoder train the study's own
    models by its protocol (--protocol paper|quick) instead of the KITTI
    recipe: the manifest then also holds the protocol's `metric`, history.csv
    has one row per update, and --resume continues the run from its last
    checkpoint (written every few minutes and when it is stopped).
    """
    _check_combinations(ctx, options)
    if options["overwrite"] and options["resume"]:
        raise click.UsageError("--resume and --overwrite contradict each other.")
    if options["resume_with_changed_code"] and not options["resume"]:
        raise click.UsageError("--resume-with-changed-code applies only with --resume (a new run is made with the "
                               "code now running).")
    if options["repeat"] > 1:
        if options["resume"]:
            raise click.UsageError("--repeat makes new runs; it cannot be combined with --resume.")
        ctx.exit(_repeat(options))
    if options["resume"]:
        ctx.exit(_resume(ctx, options))
    ctx.exit(_train_new(options))


def _train_new(options):
    """A new run (replacing an old one with --overwrite); returns the exit status."""
    from prednet_keras import model_kinds
    from prednet_keras.session.start import start_new_run

    kind = model_kinds.get(options["model"])
    study = not kind.follows_recipe
    config = _study_config(options) if study else _checked_train_config(options)
    runtime_config = _runtime_config(options, None if study else config)
    schedule = None
    if not study:
        from prednet_keras.data.kitti import EMBEDDED_CLIP_NOTE
        from prednet_keras.options.recipe import lr_drop_rule

        schedule = {"lr_drop_epoch_rule": lr_drop_rule(options["lr_drop_epoch"], config.epochs)}
        if config.data is None:
            for line in EMBEDDED_CLIP_NOTE:
                _say(line)
    output = options["output"] or _default_output(options["model"])
    code = start_new_run(output, config, runtime_config, ["prednet-train"] + sys.argv[1:],
                         overwrite=options["overwrite"], quiet=options["quiet"], schedule=schedule, say=_say)
    if code == 0 and kind.evaluation is not None:
        _say_how_to_evaluate(output, getattr(config, "data", None), kind.evaluation)
    return code


def _say_how_to_evaluate(output, data, evaluation):
    """The last line of a training: the command that scores what it trained.

    Args:
        output: the run folder.
        data: its training data (None: the embedded data).
        evaluation: what prednet-eval scores of its kind ("prediction", "reconstruction").
    """
    import shlex

    from prednet_keras.data.kitti import name_of

    command = f"prednet-eval {shlex.quote(str(output))}"
    name = name_of(data)
    if name is not None:
        click.echo(f"Evaluate it on KITTI's test split: {command} --data {name}")
        return
    default = "the embedded held-out clip" if evaluation == "prediction" else "the embedded MNIST test set"
    click.echo(f"Evaluate it: {command}" + (f" (on {default}; --data names your own test data)" if data else ""))


def _say(line):
    click.echo(line, err=True)


def _repeat(options):
    """--repeat N: N identical runs, then the determinism audit; returns the exit status."""
    from prednet_keras.study.report.repeats import audit_repeats

    parent = options["output"] or _default_output(options["model"])
    folders = []
    for number in range(1, options["repeat"] + 1):
        each = dict(options, output=os.path.join(parent, f"repeat-{number}"))
        click.echo(f"Run {number} of {options['repeat']}: {each['output']}", err=True)
        code = _train_new(each)
        if code != 0:
            click.echo(f"Run {number} did not finish (exit status {code}); no audit.", err=True)
            return code
        folders.append(each["output"])
    audit = audit_repeats(parent, folders, options["deterministic"])
    for record in audit["runs"]:
        click.echo(f"  {record['run']}: weights {str(record['weights_checksum'])[:12]}, "
                   f"curve {str(record['curve_checksum'])[:12]}" + ("" if record["identical_to_first"] else "  DIFFERS"))
    if audit["bit_identical"]:
        click.echo(f"Bit-identical: all {audit['repeats']} runs ended with the same weights and loss curve "
                   f"({audit['path']}).")
        return 0
    click.echo(f"Not bit-identical: the runs differ ({audit['path']}).")
    if options["deterministic"]:
        click.echo("Error: --deterministic was asked for, and the repeats differ: a determinism defect.", err=True)
        return 1
    return 0


def _check_combinations(ctx, options):
    """One clear error for options that do not apply to --model."""
    from prednet_keras import model_kinds

    explicit = dict(_explicit(ctx, options))
    model = options["model"]
    kind = model_kinds.get(model)
    if options["resume"] and not kind.session_protocol.can_resume:
        raise click.UsageError(
            f"--resume is not available for --model {model}: its protocol keeps no checkpoints; "
            "start the run again (--overwrite replaces it)."
        )
    if not kind.follows_recipe:
        if options.get("precision", "float32") != "float32":
            raise click.UsageError(
                f"--precision {options['precision']} is for --model prednet only: the study's models are not "
                "made to keep their states and loss in float32 under bfloat16."
            )
        refused = [name for name in KIND_OPTIONS if name in explicit and name not in kind.options]
        if refused:
            flags = ", ".join("--" + n.replace("_", "-") for n in refused)
            how = (f"it trains by --protocol {options['protocol'] or 'paper'}" if "protocol" in kind.options
                   else "its function says how it trains")
            raise click.UsageError(
                f"{flags} {'does' if len(refused) == 1 else 'do'} not apply to --model {model} ({how})."
            )
    else:
        refused = [name for name in STUDY_ONLY if name in explicit and name not in kind.options]
        if refused:
            flags = ", ".join("--" + n.replace("_", "-") for n in refused)
            others = " or ".join(f"--model {k.name}" for k in model_kinds.kinds() if not k.follows_recipe)
            raise click.UsageError(
                f"{flags} {'applies' if len(refused) == 1 else 'apply'} only to {others}, not to --model {model}."
            )


def _study_config(options):
    """The validated options of a run of a kind trained by its protocol (--model prednet-chainer|autoencoder|
    MODULE:FUNCTION)."""
    from prednet_keras import model_kinds
    from prednet_keras.model_kinds.study_config import names_a_file

    ctx = click.get_current_context(silent=True)
    explicit = {name for name, _ in _explicit(ctx, options)} if ctx is not None else set()
    from prednet_keras.data.kitti import resolve_data

    options = dict(options, data=resolve_data(options["data"], "train"))
    config = model_kinds.get(options["model"]).config_from_options(options, explicit)
    try:
        config = config.resolved()
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    config.check_paths()
    for name in ("data", "init_weights", "heldout_data"):
        value = getattr(config, name, None)
        if names_a_file(name, value):
            setattr(config, name, os.path.abspath(value))
    return config


def _train_config(options):
    from prednet_keras.data.kitti import training_data
    from prednet_keras.options.recipe import AUGMENTATIONS, TrainConfig

    # --data kitti: the cached KITTI's train split, checked, and its val split unless --val-data is given.
    data, val_data = training_data(options["data"], options["val_data"])
    return TrainConfig(
        model=options["model"],
        stack_sizes=options["stack_sizes"],
        r_stack_sizes=options["r_stack_sizes"],
        filter_size=options["filter_size"],
        nt=options["nt"],
        batch_size=options["batch_size"],
        epochs=options["epochs"],
        steps_per_epoch=options["steps_per_epoch"],
        lr=options["lr"],
        lr_drop_epoch=options["lr_drop_epoch"],
        lr_drop_factor=options["lr_drop_factor"],
        layer_loss=options["layer_loss"],
        val_sequences=options["val_sequences"],
        data=data,
        val_data=val_data,
        val_fraction=options["val_fraction"],
        size=options["size"],
        seed=options["seed"],
        init_weights=options["init_weights"],
        unroll=True if options["unroll"] is None else options["unroll"],
        # The order the flags came in does not matter: augment_sequence applies them in one order.
        augment=tuple(name for name in AUGMENTATIONS if name in options["augment"]),
        patience=options["patience"],
    )


def _runtime_config(options, config=None):
    """The RuntimeConfig of a new run; with `config` (a --model prednet run), its batches checked against --devices."""
    from prednet_keras.runtime import distribution

    runtime = runtime_config(options)
    problem = distribution.request_problem(runtime.backend, runtime.device, runtime.devices)
    if problem is None and config is not None:
        problem = distribution.batch_problem(config.batch_size, config.val_sequences, runtime.devices)
    if problem:
        raise click.UsageError(problem)
    return runtime


def _checked_train_config(options):
    """The validated TrainConfig of a new --model prednet run (nothing is written)."""
    config = _train_config(options)
    try:
        config = config.resolved()
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    config.check_paths()
    # Absolute, so that --resume works from any working directory.
    for name in ("data", "val_data", "init_weights"):
        if getattr(config, name) is not None:
            setattr(config, name, os.path.abspath(getattr(config, name)))
    return config


def _default_output(model="prednet"):
    from prednet_keras import model_kinds

    base = os.path.join("weights", f"{model_kinds.get(model).output_name()}-" + time.strftime("%Y%m%d-%H%M%S"))
    output, n = base, 2
    while os.path.exists(output):
        output, n = f"{base}-{n}", n + 1
    return output


def _resume(ctx, options):
    """--resume: continues a run from its last completed epoch; returns the exit status.

    Everything is checked before anything is written (and again under the
    run folder's lock); the training process records the resume in the
    manifest only once it has verified the checkpoint.
    """
    from prednet_keras.session.start import resume_run

    if not options["output"]:
        raise click.UsageError("--resume needs --output RUN_FOLDER (the run to continue).")
    code = resume_run(options["output"], lambda folder: _check_resume(ctx, options, folder),
                      changed_code_ok=options["resume_with_changed_code"], quiet=options["quiet"], say=_say)
    if code == 0:
        from prednet_keras import model_kinds
        from prednet_keras.session.folder import RunFolder

        manifest = RunFolder(options["output"]).read_record()
        kind = model_kinds.find(manifest.model_kind or "prednet")
        evaluation = kind.evaluation if kind is not None else "prediction"
        if evaluation is not None:
            recorded = manifest.options
            _say_how_to_evaluate(options["output"], recorded.data if recorded is not None else None, evaluation)
    return code


def _check_resume(ctx, options, folder):
    """Fails unless --resume may continue `folder` with these options; changes nothing.

    Returns:
        (completed epochs, the run's RuntimeConfig, the resume record for the training process).
    """
    from prednet_keras import model_kinds
    from prednet_keras.session.records import Manifest
    from prednet_keras.session.start import resumable_run

    manifest, done, recorded, requested_runtime = resumable_run(folder)
    kind = model_kinds.get(Manifest.coerce(manifest).model_kind or "prednet")
    if kind.follows_recipe:
        given, may_change, only = _train_config(options), RESUME_MAY_CHANGE, "only --epochs may change"
    else:
        # The kind's own options, made as for a new run (its defaults, absolute paths); its updates are set by
        # them, so none may change.
        given = _study_config(dict(options, model=kind.name))
        may_change, only = RESUME_MAY_CHANGE - {"epochs"}, "none of its options may change"
    for name, value in _explicit(ctx, options):
        if name in may_change or name in ("overwrite",):
            continue
        if name in RUNTIME_OPTIONS:
            before = getattr(requested_runtime, name)
        elif name == "model":
            before, value = recorded.model, model_kinds.get(value).canonical()
        else:
            before = getattr(recorded, name)
            value = getattr(given, name)
            if name in ("data", "val_data", "init_weights") and value is not None:
                value = os.path.abspath(value)
        if _normalise(value) != _normalise(before):
            raise click.UsageError(
                f"--{name.replace('_', '-')} {_show(value)} differs from this run's {_show(before)}; "
                f"--resume continues a run as it was started ({only})."
            )
    explicit_epochs = ctx.get_parameter_source("epochs") in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    epochs = options["epochs"] if explicit_epochs else None
    folder.check_continuable(manifest, done, epochs)
    record = {
        "command": ["prednet-train"] + sys.argv[1:],
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "epochs": epochs if epochs is not None and epochs != recorded.epochs else None,
    }
    return done, requested_runtime, record


def _explicit(ctx, options):
    for name, value in options.items():
        if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
            yield name, value


def _normalise(value):
    if isinstance(value, (list, tuple)):
        return tuple(_normalise(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _show(value):
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


if __name__ == "__main__":
    main()
