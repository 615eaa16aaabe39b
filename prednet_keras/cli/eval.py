"""prednet-eval: score trained models on held-out video, as kitti_evaluate.py did."""

import sys
import time
from pathlib import Path

import click

from prednet_keras.cli.common import fail_on_user_errors
from prednet_keras.cli.options import precision_option, runtime_config, runtime_option


@click.command(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
    epilog="""\b
Examples:
  prednet-eval weights/small                     # one run folder
  prednet-eval weights/                          # every run in weights/, plus a comparison
  prednet-eval model.keras --data X_test.hkl -o results/
  prednet-eval weights/kitti --data kitti        # KITTI's test split (prednet-data kitti)
  prednet-eval prednet-kitti --data kitti        # the authors' released model, fetched once
  prednet-eval weights/small --extrap-start 10 --nt 15
  prednet-eval weights/small --precision mixed_bfloat16 -o eval-bf16/
""",
)
@click.argument("models", nargs=-1, required=True, type=click.Path())
@click.option("--data", type=click.Path(), help="Test frames (any source prednet-train takes), or kitti for the test split of the KITTI that prednet-data kitti fetched [default: the embedded test video].")
@click.option("--nt", type=click.IntRange(min=2), help="Frames per test sequence [default: each model's training nt].")
@click.option("--extrap-start", type=click.IntRange(min=1), help="Feed predictions back from this step on (multi-step prediction); needs nt > T.")
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True, help="Sequences per forward pass.")
@click.option("--plots", type=click.IntRange(min=0), default=10, show_default=True, help="Sequences drawn as Actual/Predicted grids.")
@click.option("-o", "--output", type=click.Path(file_okay=False), help="Output folder [default: <run>/eval, or <run>/eval-<data>-nt<N>-extrap<T> naming what differs from the default evaluation; <stem>-eval/ beside a loose .keras file; with several models, also <parent>/eval-comparison/].")
@click.option("--overwrite", is_flag=True, help="Replace earlier results in the output folders.")
@runtime_option("backend")
@runtime_option("device")
@click.option("--xla/--no-xla", default=None, help="XLA for the forward pass [default: off on TensorFlow, Keras' choice elsewhere].")
@precision_option()
@fail_on_user_errors
def main(models, data, nt, extrap_start, batch_size, plots, output, overwrite, backend, device, xla, precision):
    """Score MODELS (.keras files, run folders, folders of run folders, or a model's name) on test video.

    A name is a shipped model (prednet-embedded) or one the authors released
    (prednet-kitti, prednet-kitti-extrapolation: fetched and converted on first
    use, then read from Keras' cache folder).

    Writes prediction_scores.json and .txt (the authors' "Model MSE" and
    "Previous Frame MSE", first step excluded, plus SSIM, PSNR and every metric
    per time step), per_step.png and prediction_plots/ (rows Actual /
    Predicted; plot_NN_sequence_III.png is plot NN, drawing test sequence III).
    With several models, also comparison.{txt,csv,json,png}.

    \b
    Where results go (unless -o is given):
      <run>/eval/                     the default evaluation of a run folder
      <run>/eval-<data>-nt<N>-extrap<T>/   another evaluation: the name says what
                                      differs (--data's file stem, --nt,
                                      --extrap-start), so none overwrites another
      <stem>-eval/                    beside a loose .keras file
      <parent>/eval-comparison/       with several models, their comparison

    A model.keras in a run folder must hold the weights its manifest records
    (result.model_weights_checksum); one that does not is refused.
    """
    from prednet_keras import runtime

    # The backend and device by the rule every command follows, set before Keras starts (here, in this process).
    # A caller already running Keras (a notebook, a test calling main) keeps its set-up unless it asks.
    if backend is not None or device != "cpu" or "keras" not in sys.modules:
        try:
            runtime.configure(runtime_config({"backend": backend, "device": device}))
        except runtime.RuntimeSetupError as error:
            raise click.ClickException(str(error)) from None
    from prednet_keras.evaluate import files, model_refs, prediction, scoring

    # A model is evaluated in float32 unless --precision says otherwise, whatever precision it trained in
    # (its weights are float32 either way).
    if precision != "float32":
        problem = runtime.precision_problem(precision)
        if problem is not None:
            raise click.ClickException(f"--precision {precision} is not available here: {problem}.")
    from prednet_keras.data.kitti import resolve_data

    # --data kitti: the cached KITTI's test split, checked against its checksums before any model loads.
    data_path = resolve_data(data, "test")
    refs = model_refs.resolve_models(models)
    model_refs.check_evaluable(refs)
    suffix = _suffix(data, nt, extrap_start)
    several = len(refs) > 1
    targets = []
    for ref in refs:
        if output is None:
            targets.append(ref.default_output(suffix))
        else:
            targets.append(Path(output) / _safe(ref.name) if several else Path(output))
    comparison_dir = None
    if several:
        comparison_dir = Path(output) if output else _common_parent(refs) / f"{suffix}-comparison"
    _check_outputs(targets, comparison_dir, overwrite)

    cache = {}
    results = []
    for ref, target in zip(refs, targets):
        started = time.perf_counter()
        model = model_refs.load_run_model(ref)
        # The run's manifest says what it is (its kind, through the registry); a loose .keras file, its shape.
        kind_evaluates = model_refs.evaluation(ref)
        if kind_evaluates == "reconstruction" or (kind_evaluates is None and prediction.is_image_model(model)):
            # A --model autoencoder run: reconstruction MSE on MNIST's test set, and a grid.
            if extrap_start is not None or nt or precision != "float32":
                raise click.UsageError(f"{ref.name} is an autoencoder: --nt, --extrap-start and --precision do not apply.")
            ae_scores = prediction.evaluate_autoencoder(model, data_path, target, plots=plots)
            click.echo(
                f"{ref.name}: autoencoder test MSE {ae_scores['test_mse']:.6f} vs mean image "
                f"{ae_scores['mean_image_test_mse']:.6f} on {ae_scores['test_images']} images -> {target}"
            )
            continue
        model_nt, frame_shape = prediction.model_geometry(model)
        use_nt = nt or model_nt or 10
        if extrap_start is not None and extrap_start >= use_nt:
            raise click.UsageError(
                f"--extrap-start {extrap_start} leaves nothing to extrapolate with nt {use_nt}; "
                f"give --nt larger than {extrap_start} (the original fine-tuning used --extrap-start 10 --nt 15)."
            )
        size = tuple(frame_shape[:2]) if None not in frame_shape[:2] else None
        key = (use_nt, size)
        if key not in cache:
            cache[key] = prediction.load_sequences(data_path, use_nt, size)
        X, data_info = cache[key]
        Xhat = prediction.predict(model, X, nt=use_nt, extrap_start=extrap_start, batch_size=batch_size, jit_compile=xla,
                                precision=precision)
        scores = scoring.compute_scores(X, Xhat, extrap_start)
        scores["model"] = {
            "name": ref.name,
            "path": str(ref.path),
            "run_folder": str(ref.run_folder) if ref.run_folder else None,
            "checksum": model_refs.file_checksum(ref.path),
        }
        scores["data"] = data_info
        scores["extrap_start"] = extrap_start
        scores["environment"] = dict(prediction.describe_environment(), precision=precision)
        scores["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        scores["seconds"] = round(time.perf_counter() - started, 3)
        files.write_scores(target, scores, X, Xhat, plots=plots, name=ref.name, extrap_start=extrap_start)
        results.append((ref.name, scores))
        precision_note = "" if precision == "float32" else f" ({precision})"
        click.echo(f"{ref.name}: {files.summary_line(scores)} on {scores['sequences']} sequences{precision_note} "
                   f"-> {target}")
    if several and len(results) > 1:
        rows, _ = files.write_comparison(comparison_dir, results)
        click.echo("")
        click.echo(files.comparison_text(rows), nl=False)
        click.echo(f"Comparison written to {comparison_dir}")


def _suffix(data, nt, extrap_start):
    """Output folder name: "eval", plus what differs from the default evaluation,
    so evaluations on other data or settings do not collide."""
    parts = ["eval"]
    if data:
        path = Path(data)
        if path.suffix.lower() == ".xz":
            path = Path(path.stem)  # NAME.h5.xz is NAME.h5 compressed: "eval-NAME", as for NAME.h5
        parts.append(_safe(path.stem or path.name))
    if nt:
        parts.append(f"nt{nt}")
    if extrap_start:
        parts.append(f"extrap{extrap_start}")
    return "-".join(parts)


def _safe(name):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))


def _common_parent(refs):
    import os

    places = [str((ref.run_folder or ref.path).resolve().parent) for ref in refs]
    return Path(os.path.commonpath(places))


def _check_outputs(targets, comparison_dir, overwrite):
    from prednet_keras.files import diskwrite
    from prednet_keras.evaluate import files

    if len({t.resolve() for t in targets}) != len(targets):
        raise click.UsageError("Two models would write to the same output folder; give -o.")
    for folder in targets + ([comparison_dir] if comparison_dir is not None else []):
        diskwrite.require_writable_folder(folder)  # before any model is loaded or any frame predicted
    if overwrite:
        return
    for target in targets:
        existing = target / files.SCORES_JSON
        if existing.exists():
            raise click.UsageError(f"{existing} exists; pass --overwrite to replace it, or -o elsewhere.")
    if comparison_dir is not None and (comparison_dir / "comparison.json").exists():
        raise click.UsageError(
            f"{comparison_dir / 'comparison.json'} exists; pass --overwrite to replace it, or -o elsewhere."
        )


if __name__ == "__main__":
    main()
