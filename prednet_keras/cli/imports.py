"""prednet-import: the authors' released models as Keras 3 `.keras` files.

Two sources: Lotter et al.'s Keras 2 release (model JSON + HDF5 weights) and the
GPU-uncertainty study's Chainer PredNet (`serializers.save_npz` files).
"""

import os

import click

from prednet_keras.cli.common import fail_on_user_errors

_OUTPUT_MODES_HELP = (
    "keras2: prediction, error, all, or a layer output R{l}, E{l}, A{l}, Ahat{l}; "
    "chainer: prediction (step t predicts frame t+1), aligned_prediction (step t predicts frame t) or error"
)


def _parse_size(value):
    if value is None:
        return None
    from prednet_keras.data import parse_size

    return parse_size(value)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model", type=click.Path(dir_okay=False))
@click.argument("weights_h5", type=click.Path(dir_okay=False), required=False)
@click.option(
    "--from",
    "source",
    type=click.Choice(["keras2", "chainer"]),
    default="keras2",
    show_default=True,
    help="keras2: Lotter et al.'s model JSON + HDF5 weights; chainer: the study's Chainer .npz model file.",
)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="The .keras file to write.")
@click.option(
    "--output-mode",
    default="prediction",
    show_default=True,
    help=f"Output mode of the saved model ({_OUTPUT_MODES_HELP}); 'keep' keeps the JSON's (keras2).",
)
@click.option(
    "--nt",
    type=click.IntRange(min=1),
    help="Sequence length of the saved model [default: the JSON's; chainer: any].",
)
@click.option("--extrap-start", type=click.IntRange(min=1), help="Feed predictions back from this step on (keras2).")
@click.option(
    "--size",
    metavar="HxW",
    help="chainer: the frame size you will use; an error unless the file was trained on it "
    "(its peephole weights are per pixel).",
)
@click.option("--overwrite", is_flag=True, help="Replace OUTPUT if it exists.")
@fail_on_user_errors
def main(model, weights_h5, source, output, output_mode, nt, extrap_start, size, overwrite):
    """Convert an authors' released model into a Keras 3 model.

    \b
    prednet-import MODEL_JSON WEIGHTS_H5 -o OUT.keras
        Lotter et al.'s Keras 2 release, e.g. prednet_kitti_model.json and
        prednet_kitti_weights.hdf5. By default the model outputs frame
        predictions over the JSON's sequence length, like kitti_evaluate.py.
    prednet-import --from chainer MODEL.npz -o OUT.keras [--size HxW]
        The study's Chainer PredNet (serializers.save_npz of the
        classifier-wrapped model, e.g. fpsi_500000_20v.model); channels and
        frame size are read from the file.

    The result opens with `import prednet_keras, keras;
    keras.saving.load_model(OUTPUT)`.
    """
    if os.path.exists(output) and not overwrite:
        raise click.UsageError(f"{output} exists; pass --overwrite to replace it.")
    if not output.endswith(".keras"):
        raise click.UsageError(f"The output must be a .keras file, got {output}.")
    if source == "chainer":
        if weights_h5 is not None:
            raise click.UsageError("--from chainer takes one file (MODEL.npz), not a separate weights file.")
        if extrap_start is not None:
            raise click.UsageError("--extrap-start applies to the Keras 2 PredNet only.")
        from prednet_keras.formats.chainer import import_chainer_model

        built = import_chainer_model(
            model, size=_parse_size(size), nt=nt, output_mode="prediction" if output_mode == "keep" else output_mode
        )
    else:
        if weights_h5 is None:
            raise click.UsageError("Missing argument 'WEIGHTS_H5' (the Keras 2 weights file).")
        if size is not None:
            raise click.UsageError(
                "--size applies to --from chainer only (a Keras 2 PredNet runs on any fitting size)."
            )
        from prednet_keras.formats.keras2 import import_legacy_model

        built = import_legacy_model(
            model,
            weights_h5,
            output_mode=None if output_mode == "keep" else output_mode,
            nt=nt,
            extrap_start_time=extrap_start,
        )
    from prednet_keras.formats.keras_files import save_model_atomically

    save_model_atomically(built, output)
    layer = built.layers[-1]
    name = "ChainerPredNet" if source == "chainer" else "PredNet"
    extra = f", frames {layer.frame_size[0]}x{layer.frame_size[1]}" if source == "chainer" else ""
    click.echo(
        f"Wrote {output}: {name} {list(layer.stack_sizes)}{extra}, output_mode={layer.output_mode}, "
        f"input {tuple(built.inputs[0].shape[1:])}, {built.count_params():,} parameters."
    )


if __name__ == "__main__":
    main()
