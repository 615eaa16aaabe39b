"""The authors' released models by name: fetched once, converted, cached as .keras files.

    names()                  "prednet-kitti", "prednet-kitti-extrapolation"
    model_path(name)         the cached .keras file: on first use the authors' zip (their download_models.sh)
                             is fetched, its Keras 2 JSON and TensorFlow-backend weights are converted by
                             formats.keras2.import_legacy_model, and the result is saved whole into
                             $KERAS_HOME/models/prednet-kitti/ with its checksum; later uses check the
                             checksum and need no network
    load(name)               the Keras model (keras_files.load_model: safe mode, checked archive)

"prednet-kitti" is kitti_train.py's model (next-frame prediction, L_0 loss), outputting frame predictions
over 10 steps, as kitti_evaluate.py ran it (published KITTI test MSE 0.006995, previous frame 0.021246).
"prednet-kitti-extrapolation" is that model fine-tuned by kitti_extrap_finetune.py to predict several frames
ahead: 15 steps, its own predictions fed back as input from step 10 on.
"""

import shutil
import zipfile
from collections import namedtuple

from prednet_keras.data.errors import DataError
from prednet_keras.data.guards import ZIP_ERRORS, check_unpacking
from prednet_keras.files.diskwrite import temp_path_for
from prednet_keras.files.downloads import cache_dir, fetch, folder_lock, source_url
from prednet_keras.files.records import FileRecord
from prednet_keras.formats.keras2 import LegacyFormatError

__all__ = ["RELEASES", "Release", "is_cached", "load", "model_folder", "model_path", "names"]

Release = namedtuple("Release", "zip_name url json_name weights_name about")

RELEASES = {
    "prednet-kitti": Release(
        "prednet_kitti_model.zip", "https://www.dropbox.com/s/f5cn9nsqg9gxd6e/prednet_kitti_model.zip?dl=1",
        "prednet_kitti_model.json", "prednet_kitti_weights.hdf5",
        "the authors' KITTI model, next-frame prediction (kitti_train.py)"),
    "prednet-kitti-extrapolation": Release(
        "prednet_kitti_model-extrapfinetuned.zip",
        "https://www.dropbox.com/s/whcnajvnhwi2lxp/prednet_kitti_model-extrapfinetuned.zip?dl=1",
        "prednet_kitti_model-extrapfinetuned.json", "prednet_kitti_weights-extrapfinetuned.hdf5",
        "the authors' KITTI model fine-tuned to extrapolate from step 10 of 15 (kitti_extrap_finetune.py)"),
}


def names():
    """The names of the authors' released models."""
    return tuple(RELEASES)


def model_folder():
    """Where the converted models are cached: $KERAS_HOME/models/prednet-kitti."""
    return cache_dir("models", "prednet-kitti")


def is_cached(path):
    """Whether `path` is a model file of this cache (its results belong elsewhere)."""
    try:
        return path.resolve().parent == model_folder().resolve()
    except OSError:
        return False


def _release(name):
    if name not in RELEASES:
        raise ValueError(f"no released model named {name!r}; released: {', '.join(RELEASES)}")
    return RELEASES[name]


def model_path(name, *, timeout=None, progress=True, say=None):
    """The cached .keras file of released model `name`, fetched and converted on first use.

    Args:
        name: one of names().
        timeout: seconds to wait for the server (downloads.download_timeout).
        progress: show the download.
        say: prints one line (default: to stderr).

    Raises:
        DownloadError: no network, no answer, a broken transfer (run again: it continues), no room.
        ChecksumError: the cached file differs from its record (delete it to fetch it again).
        LegacyFormatError, DataError: the zip does not hold the authors' model (it is removed).
    """
    release = _release(name)
    target = f"{name}.keras"
    folder = model_folder()
    remedy = f"delete it to fetch and convert {name} again"
    if (folder / target).is_file() and FileRecord(folder).get(target) is not None:
        return FileRecord(folder).check(target, remedy)
    with folder_lock(folder, f"fetch of {name}"):
        record = FileRecord(folder)
        if (folder / target).is_file() and record.get(target) is not None:
            return record.check(target, remedy)  # another process fetched it meanwhile
        say = say or _say
        archive = folder / release.zip_name
        url = source_url(release.url, release.zip_name)
        known = record.get(release.zip_name)
        say(f"Fetching {name}, {release.about} ({url}) ...")
        sha256 = fetch(url, archive, sha256=known and known.get("sha256"), timeout=timeout, progress=progress,
                       unpacked_ratio=1.0, say=say)
        if known is None:
            record.add(release.zip_name, sha256=sha256, url=url, removed_after_conversion=True)
        try:
            members = _convert(archive, release, folder / target)
        except (LegacyFormatError, DataError, *ZIP_ERRORS) as error:
            # Not the authors' model: only fetching it again can help, so it is not kept.
            archive.unlink(missing_ok=True)
            record.remove(release.zip_name)
            if isinstance(error, ZIP_ERRORS):
                raise DataError(f"{archive}: truncated or damaged zip archive ({error}); removed: try again to "
                                "download it anew.") from None
            raise
        record.add(target, url=url, converted_from=members, by="prednet_keras.formats.keras2.import_legacy_model")
        archive.unlink(missing_ok=True)
        say(f"Converted {name} into {folder / target}; its checksum is in {record.path}.")
        return folder / target


def _convert(archive, release, target):
    """Converts the model in `archive` into `target` (.keras, written whole); returns the members used."""
    from prednet_keras.formats.keras2 import import_legacy_model
    from prednet_keras.formats.keras_files import save_model_atomically

    staging = target.with_name(f".staging-{temp_path_for(target).name}")
    with zipfile.ZipFile(archive) as opened:
        json_member = _member(opened, archive, release.json_name)
        weights_member = _member(opened, archive, release.weights_name)
        staging.mkdir(parents=True, exist_ok=True)
        try:
            paths = []
            for info in (json_member, weights_member):
                check_unpacking(f"{archive}: member {info.filename!r}", info.file_size, info.compress_size)
                path = staging / info.filename.rsplit("/", 1)[-1]
                with opened.open(info) as source, open(path, "wb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
                paths.append(path)
            model = import_legacy_model(str(paths[0]), str(paths[1]), output_mode="prediction")
            save_model_atomically(model, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return {"json": json_member.filename, "weights": weights_member.filename}


def _member(opened, archive, name):
    """The member named `name` at any depth; of several, the TensorFlow-backend one (tensorflow_weights/):
    the Theano-backend weights have flipped kernels."""
    found = [info for info in opened.infolist()
             if info.filename.rsplit("/", 1)[-1] == name and not info.filename.startswith("__MACOSX/")]
    if not found:
        raise DataError(f"{archive}: not the authors' model archive ({name} missing); removed.")
    found.sort(key=lambda info: "tensorflow" not in info.filename.lower())
    return found[0]


def load(name, compile=False, **fetching):
    """Released model `name` as a Keras model (fetched and converted on first use; see model_path).

    Args:
        name: one of names().
        compile: also restore the training configuration (the converted files have none).
        fetching: timeout, progress, say (see model_path).
    """
    from prednet_keras.formats.keras_files import load_model

    return load_model(model_path(name, **fetching), compile=compile)


def _say(line):
    import sys

    print(line, file=sys.stderr, flush=True)
