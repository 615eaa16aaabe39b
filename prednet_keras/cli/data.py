"""prednet-data: convert footage into dataset files and describe them."""

import json
import sys

import click
import numpy as np

from prednet_keras.cli.common import fail_on_user_errors
from prednet_keras.data import (
    DataError,
    describe,
    embedded_dataset,
    embedded_mnist_path,
    load_mnist,
    open_dataset,
    parse_size,
    prepare,
    sequence_starts,
    supported_formats,
)
from prednet_keras.data.embedded import SPLITS
from prednet_keras.data.transform import INTERPOLATIONS, MODES, parse_offset


def _size(ctx, param, value):
    if value is None:
        return None
    try:
        return parse_size(value)
    except DataError as exc:
        raise click.BadParameter(str(exc)) from None


def _offset(ctx, param, value):
    if value is None:
        return None
    try:
        return parse_offset(value)
    except DataError as exc:
        raise click.BadParameter(str(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main():
    """Data for PredNet: convert footage into dataset files, describe them, fetch KITTI."""


@main.command("prepare")
@click.argument("sources", nargs=-1, required=True)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Dataset file to write (.h5).")
@click.option("--size", callback=_size, metavar="HxW", help="Frame size, e.g. 128x160 (KITTI). Default: keep.")
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default="resize_crop",
    show_default=True,
    help="resize_crop: scale keeping the aspect ratio, then centre-crop (the original KITTI "
    "preparation). crop: crop only (the Chainer PredNet's).",
)
@click.option(
    "--offset",
    callback=_offset,
    metavar="DY,DX",
    help="Shift of the crop window from the centre, in pixels (Chainer's --offset x,y is DY=y, DX=x).",
)
@click.option("--interpolation", type=click.Choice(INTERPOLATIONS), default="bilinear", show_default=True)
@click.option(
    "--scene-cuts",
    type=click.Choice(["auto", "on", "off"]),
    default="auto",
    show_default=True,
    help="Split sources at detected hard cuts (auto: videos only).",
)
@click.option(
    "--cut-threshold", type=click.FloatRange(0, 1), default=0.1, show_default=True,
    help="Minimum frame difference (0-1) of a cut."
)
@click.option(
    "--cut-ratio", type=click.FloatRange(min=1), default=3.0, show_default=True,
    help="How many times the nearby frames' median difference a cut must reach."
)
@click.option(
    "--root", type=click.Path(file_okay=False), help="Folder that relative paths in list files are relative to."
)
@click.option(
    "--compression",
    type=click.Choice(["none", "gzip", "lzf"]),
    default="none",
    show_default=True,
    help="gzip: ~30% smaller files of natural video, but streaming them decodes ~1,000 frames/s per core; "
    "fine for sets that fit in memory (read once).",
)
@click.option("--no-hash", is_flag=True, help="Do not record SHA-256 hashes of input files.")
@click.option("--overwrite", is_flag=True, help="Replace OUTPUT if it exists.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@fail_on_user_errors
def prepare_command(sources, output, size, mode, offset, interpolation, scene_cuts, cut_threshold,
                    cut_ratio, root, compression, no_hash, overwrite, quiet):
    """Convert SOURCES into one dataset file (frames, sources, provenance).

    A SOURCE is a folder of frames, a list file of frame paths (several lists =
    several sequences), a video, KITTI's X_*.hkl (sources_*.hkl beside it is
    used), an .npz/.npy/.h5 array file, or a dataset file.
    """
    path = prepare(
        list(sources),
        output,
        size,
        mode,
        offset,
        interpolation=interpolation,
        scene_cuts={"auto": "auto", "on": True, "off": False}[scene_cuts],
        cut_threshold=cut_threshold,
        cut_ratio=cut_ratio,
        root=root,
        overwrite=overwrite,
        compression=compression,
        hash_inputs=not no_hash,
        command="prednet-data " + " ".join(sys.argv[1:]),
        progress=not quiet,
    )
    info = describe(path)
    cuts = info["provenance"].get("scene_cuts", {}).get("cuts", {})
    click.echo(
        f"wrote {path}: {info['frames']} frames of {'x'.join(map(str, info['frame_shape']))}, "
        f"{_count(len(info['source_runs']), 'source')}"
        + (f", {_count(sum(len(c) for c in cuts.values()), 'scene cut')}" if cuts else "")
    )


def _count(number, noun):
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _print_info(info, nt):
    shape = "x".join(map(str, info["frame_shape"]))
    click.echo(f"{info.get('path', 'dataset')}")
    click.echo(f"  frames       {info['frames']} of {shape} uint8")
    if "bytes" in info:
        click.echo(f"  file         {info['bytes'] / 1e6:.1f} MB, compression {info.get('compression', 'none')}")
    runs = info["source_runs"]
    click.echo(f"  sources      {len(runs)}")
    for run in runs[:20]:
        click.echo(f"    {run['frames']:7d}  {run['source']}")
    if len(runs) > 20:
        click.echo(f"    ... and {len(runs) - 20} more")
    if nt:
        counts = info["sequences"]
        click.echo(f"  nt={nt} sequences: {counts['all']} ('all' starts), {counts['unique']} ('unique')")
    provenance = info["provenance"]
    for key in ("created_utc", "created_by", "command", "origin", "licence", "contents"):
        if key in provenance:
            click.echo(f"  {key:<12} {provenance[key]}")
    for item in provenance.get("inputs", []):
        digest = f"  sha256 {item['sha256']}" if "sha256" in item else ""
        click.echo(f"  input        {item.get('kind', '?')} {item.get('path')}{digest}")
    if "transform" in provenance:
        t = provenance["transform"]
        if t.get("size"):
            size = f"{t['size'][0]}x{t['size'][1]}"
            click.echo(f"  transform    {t['mode']} to {size}, offset {t['offset']}, {t['interpolation']}")


@main.command("info")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--nt", type=click.IntRange(min=1), help="Also count the sequences of NT frames.")
@click.option("--json", "as_json", is_flag=True, help="Print the description as JSON.")
@fail_on_user_errors
def info_command(file, nt, as_json):
    """Describe a dataset FILE: frames, sources, provenance."""
    info = describe(file)
    if nt:
        with open_dataset(file, in_memory=False) as data:
            info["sequences"] = {mode: int(len(sequence_starts(data, nt, mode))) for mode in ("all", "unique")}
    if as_json:
        click.echo(json.dumps(info, indent=2))
    else:
        _print_info(info, nt)


@main.command("embedded")
@fail_on_user_errors
def embedded_command():
    """List the embedded data files (real video splits, MNIST) inside the installed package."""
    for split in SPLITS:
        info = describe(embedded_dataset(split))
        click.echo(f"{split:<5}  {info['path']}  {info['frames']} frames, {_count(len(info['source_runs']), 'source')}")
    click.echo(f"mnist  {embedded_mnist_path()}")


@main.command("mnist")
@click.argument("path", required=False, type=click.Path())
@fail_on_user_errors
def mnist_command(path):
    """Check an MNIST copy (default: the embedded one): sizes, label counts, pixel statistics."""
    (x_train, y_train), (x_test, y_test) = load_mnist(path)
    click.echo(f"train {x_train.shape}  test {x_test.shape}")
    click.echo(f"train label counts {np.bincount(y_train, minlength=10).tolist()}")
    click.echo(f"test label counts  {np.bincount(y_test, minlength=10).tolist()}")
    # From the histogram of byte values: exact, without a float copy of 47M pixels.
    counts = np.bincount(x_train.ravel(), minlength=256)
    values = np.arange(256) / 255.0
    mean = (counts * values).sum() / counts.sum()
    std = np.sqrt((counts * (values - mean) ** 2).sum() / counts.sum())
    click.echo(f"train pixel mean {mean:.4f} std {std:.4f}")


@main.command("kitti")
@click.option("--raw", "raw", type=click.Path(file_okay=False),
              help="Prepare the raw KITTI drives in this folder as process_kitti.py did (camera image_03, "
              "128x160, its split) instead of fetching the authors' preprocessed files.")
@click.option("--refetch", is_flag=True,
              help="Fetch the authors' archive again and replace its files, even ones that differ from their "
              "recorded checksums.")
@click.option("--overwrite", is_flag=True, help="With --raw: replace dataset files prepared before.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Seconds to wait for the server [default: PREDNET_DOWNLOAD_TIMEOUT, or 30].")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or lines.")
@fail_on_user_errors
def kitti_command(raw, refetch, overwrite, timeout, quiet):
    """Fetch KITTI into Keras' cache folder ($KERAS_HOME/datasets, default ~/.keras/datasets).

    \b
    prednet-data kitti
        The authors' preprocessed files (their download_data.sh, about 3 GB):
        X_train.hkl, X_val.hkl, X_test.hkl and sources_*.hkl, 128x160 frames.
        A broken download continues where it stopped when run again; the
        files' checksums are recorded on arrival and checked at every use.
    prednet-data kitti --raw FOLDER
        The raw KITTI drives you downloaded, prepared as process_kitti.py
        did, into kitti_train.h5, kitti_val.h5 and kitti_test.h5.

    Then: prednet-train --data kitti, and prednet-eval RUN --data kitti.
    PREDNET_MIRROR_URL fetches the authors' files from a mirror that serves
    them by name.
    """
    from prednet_keras.data import kitti

    if raw is None and overwrite:
        raise click.UsageError("--overwrite applies to --raw (fetched files are replaced with --refetch).")
    if raw is not None and refetch:
        raise click.UsageError("--refetch applies to the authors' files, not to --raw (use --overwrite).")
    if raw is not None:
        from prednet_keras.data.kitti_raw import prepare_raw_kitti

        done = prepare_raw_kitti(raw, overwrite=overwrite, progress=not quiet, say=_say)
        click.echo(f"KITTI prepared from the raw drives in {done['folder']}: {kitti.describe_splits(done['splits'])}; "
                   f"checksums in {done['record']}.")
    else:
        done = kitti.fetch_kitti(refetch=refetch, timeout=timeout, progress=not quiet, say=_say)
        state = "fetched into" if done["fetched"] else "already in (its files match their checksums)"
        click.echo(f"KITTI (the authors' preprocessed files) {state} {done['folder']}: "
                   f"{kitti.describe_splits(done['splits'])}.")
    name = "kitti-raw" if raw is not None else "kitti"
    click.echo(f"Use it: prednet-train --data {name} (validated on its val split), then prednet-eval RUN "
               f"--data {name}.")


def _say(line):
    click.echo(line, err=True)


main.help = (main.help or "") + "\n\nSupported sources: " + supported_formats() + "."

if __name__ == "__main__":
    main()
