"""prednet-import: the authors' released Keras 2 model (JSON + HDF5) as a Keras 3 `.keras` file."""

import os

import click

from prednet_keras.cli.common import fail_on_user_errors

_OUTPUT_MODES_HELP = "prediction, error, all, or a layer output R{l}, E{l}, A{l}, Ahat{l}"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model_json", type=click.Path(dir_okay=False))
@click.argument("weights_h5", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="The .keras file to write.")
@click.option(
    "--output-mode",
    default="prediction",
    show_default=True,
    help=f"Output mode of the saved model ({_OUTPUT_MODES_HELP}); 'keep' keeps the JSON's.",
)
@click.option("--nt", type=click.IntRange(min=1), help="Sequence length of the saved model [default: the JSON's].")
@click.option("--extrap-start", type=click.IntRange(min=1), help="Feed predictions back from this step on.")
@click.option("--overwrite", is_flag=True, help="Replace OUTPUT if it exists.")
@fail_on_user_errors
def main(model_json, weights_h5, output, output_mode, nt, extrap_start, overwrite):
    """Convert MODEL_JSON + WEIGHTS_H5 (e.g. prednet_kitti_model.json and
    prednet_kitti_weights.hdf5 from the authors' release) into a Keras 3 model.

    The result opens with `import prednet_keras, keras;
    keras.saving.load_model(OUTPUT)`. By default it outputs frame predictions
    over the JSON's sequence length, like the authors' kitti_evaluate.py.
    """
    from prednet_keras.legacy import import_legacy_model

    if os.path.exists(output) and not overwrite:
        raise click.UsageError(f"{output} exists; pass --overwrite to replace it.")
    if not output.endswith(".keras"):
        raise click.UsageError(f"The output must be a .keras file, got {output}.")
    model = import_legacy_model(
        model_json,
        weights_h5,
        output_mode=None if output_mode == "keep" else output_mode,
        nt=nt,
        extrap_start_time=extrap_start,
    )
    from prednet_keras.saving import save_model_atomically

    save_model_atomically(model, output)
    layer = model.layers[-1]
    click.echo(
        f"Wrote {output}: PredNet {list(layer.stack_sizes)}, output_mode={layer.output_mode}, "
        f"input {tuple(model.inputs[0].shape[1:])}, {model.count_params():,} parameters."
    )


if __name__ == "__main__":
    main()
