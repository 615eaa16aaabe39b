"""Small files in the layouts of the authors' KITTI downloads, for tests: the preprocessed-data zip
(download_data.sh), the model zips (download_models.sh) and a folder of raw drives (process_kitti.py's input)."""

import io
import zlib
import zipfile

import numpy as np
from PIL import Image

from tests.data.data_builders import write_hickle_v2
from tests.legacy_files import write_model_json, write_weights_h5

# Frames per split of the tiny archive, and the recordings (sources) of each.
SPLIT_FRAMES = {"train": (("city-2011_09_26_drive_0001_sync", 8), ("road-2011_09_26_drive_0015_sync", 6)),
                "val": (("city-2011_09_26_drive_0005_sync", 6),),
                "test": (("city-2011_09_26_drive_0104_sync", 5), ("road-2011_09_26_drive_0070_sync", 5))}


def smooth_frames(count, seed, shape=(128, 160, 3)):
    """uint8 frames that deflate well (gradients shifting over time), so archives stay small."""
    rows = np.arange(shape[0])[:, None, None]
    cols = np.arange(shape[1])[None, :, None]
    chans = np.arange(shape[2])[None, None, :]
    return np.stack([((rows + 2 * cols + 40 * chans + 7 * t + seed) % 256).astype(np.uint8) for t in range(count)])


def kitti_zip(folder, prefix="kitti_data/", frame_shape=(128, 160, 3), leave_out=()):
    """The bytes of a zip laid out as the authors' kitti_data.zip, its hkl files written in `folder`.

    Returns:
        (zip bytes, {file name: file bytes}).
    """
    files = {}
    for index, (split, recordings) in enumerate(SPLIT_FRAMES.items()):
        count = sum(n for _, n in recordings)
        sources = [name for name, n in recordings for _ in range(n)]
        write_hickle_v2(folder / f"X_{split}.hkl", smooth_frames(count, index, frame_shape))
        write_hickle_v2(folder / f"sources_{split}.hkl", sources)
        for name in (f"X_{split}.hkl", f"sources_{split}.hkl"):
            files[name] = (folder / name).read_bytes()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            if name not in leave_out:
                archive.writestr(prefix + name, data)
    return buffer.getvalue(), files


STACK, R_STACK, FILT, FRAME = (3, 4), (3, 4), 3, (8, 8)


def model_zip(folder, weights, json_name="prednet_kitti_model.json", weights_name="prednet_kitti_weights.hdf5",
              nt=10, theano_copy=True, **json_extra):
    """The bytes of a zip laid out as the authors' model zips: the model JSON, Theano-backend weights at the
    top and the TensorFlow-backend ones under tensorflow_weights/ (the converter must take those)."""
    write_model_json(folder / json_name, STACK, R_STACK, FILT, nt, FRAME, **json_extra)
    write_weights_h5(folder / "tf.hdf5", weights, full_model=True, nt=nt)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(json_name, (folder / json_name).read_bytes())
        if theano_copy:
            write_weights_h5(folder / "th.hdf5", weights, full_model=True, backend="theano", nt=nt)
            archive.writestr(weights_name, (folder / "th.hdf5").read_bytes())
        archive.writestr(f"tensorflow_weights/{weights_name}", (folder / "tf.hdf5").read_bytes())
    return buffer.getvalue()


RAW_DRIVES = {"city": ("2011_09_26_drive_0001_sync", "2011_09_26_drive_0005_sync", "2011_09_26_drive_0104_sync"),
              "residential": ("2011_09_26_drive_0019_sync", "2011_09_26_drive_0079_sync"),
              "road": ("2011_09_26_drive_0070_sync",),
              "campus": ("2011_09_28_drive_0016_sync",)}


def raw_frame(seed, size=(15, 50)):
    """A small RGB frame of KITTI's shape (about 1:3.3, like 375x1242)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size + (3,), dtype=np.uint8)


def write_raw_drives(root, frames=3, by_category=True, drives=RAW_DRIVES):
    """Drives in KITTI's raw layout: root/[category/drive/]date/drive/image_03/data/0000000000.png ...
    (by_category: process_kitti.py's folders; else every zip unpacked into root). Returns {drive: frames}."""
    written = {}
    for category, names in drives.items():
        for drive in names:
            base = (root / category / drive) if by_category else root
            folder = base / drive[:10] / drive / "image_03" / "data"
            folder.mkdir(parents=True)
            # image_02 is the other colour camera: never read.
            (base / drive[:10] / drive / "image_02" / "data").mkdir(parents=True)
            images = [raw_frame(zlib.crc32(f"{drive}-{t}".encode())) for t in range(frames)]
            for t, image in enumerate(images):
                Image.fromarray(image).save(folder / f"{t:010d}.png")
            Image.fromarray(images[0]).save(base / drive[:10] / drive / "image_02" / "data" / "0000000000.png")
            written[drive] = images
    return written
