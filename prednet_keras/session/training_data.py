"""The frames and batches of a training run (prednet-train's recipe loop).

Which frames a run trains and validates on (`load_training_data`, `split_frames`, with a checksum of each),
and the order it reads them in: `EpochBatches` is an unbroken stream of shuffled passes over all sequences,
the order a pure function of (seed, global batch index) (`pass_order`, `run_order_checksum`), so a resumed
run reads exactly the batches an uninterrupted one would; `augment_sequence` draws augmentations the same way.
"""

import concurrent.futures
import threading

import keras
import numpy as np

from prednet_keras.data import dataset_checksum
from prednet_keras.options.recipe import AUGMENTATIONS


def load_training_data(config):
    """The training and validation FrameDatasets of a run, and a description of each.

    Args:
        config: a resolved TrainConfig.

    Returns:
        (train, val, info): val is None when config.val_sequences is 0.
    """
    from prednet_keras import data as pdata

    size = config.size
    if config.data is None:
        train = pdata.load_frames(pdata.embedded_dataset("train"), size=size)
        train_origin = "embedded:train"
    else:
        train = pdata.load_frames(config.data, size=size)
        train_origin = config.data
    val, val_origin = None, None
    if config.val_sequences:
        if config.val_data is not None:
            val, val_origin = pdata.load_frames(config.val_data, size=size), config.val_data
        elif config.data is None:
            val, val_origin = pdata.load_frames(pdata.embedded_dataset("val"), size=size), "embedded:val"
        else:
            count = len(train)
            train, val = split_frames(train, config.val_fraction)
            val_origin = f"{config.data} (last {config.val_fraction:g} of frames)"
            train_origin = f"{config.data} (first {1 - config.val_fraction:g} of frames)"
            # Named here: the sequences' own check sees only the part, under the file's name.
            for part, origin in ((train, train_origin), (val, val_origin)):
                if len(part) < config.nt:
                    raise ValueError(
                        f"{origin}: {len(part)} of the file's {count} frames, fewer than nt={config.nt}; "
                        "give --val-data, another --val-fraction, or --val-sequences 0."
                    )
    if val is not None and val.frame_shape != train.frame_shape:
        raise ValueError(
            f"Validation frames are {val.frame_shape}, training frames {train.frame_shape}; give --size."
        )
    info = {"train": describe_data(train, train_origin)}
    if val is not None:
        info["val"] = describe_data(val, val_origin)
    return train, val, info


def split_frames(dataset, fraction):
    """Splits off the last `fraction` of frames for validation, at a source
    boundary when one lies within a quarter of the cut (so validation scenes
    are unseen); the two parts never share a sequence either way.

    Args:
        dataset: a FrameDataset.
        fraction: share of frames for the second part.

    Returns:
        (first, second) FrameDatasets.
    """
    count = len(dataset)
    cut = int(round(count * (1 - fraction)))
    boundaries = [start for _, start, _ in dataset.source_runs() if start > 0]
    near = [b for b in boundaries if abs(b - cut) <= max(1, count * fraction / 4)]
    if near:
        cut = min(near, key=lambda b: abs(b - cut))
    if not 0 < cut < count:
        raise ValueError(f"{count} frames are too few to hold out a validation part; give --val-data.")
    return dataset.select(slice(0, cut)), dataset.select(slice(cut, count))


def describe_data(dataset, origin):
    """What a run's manifest records of the frames it trained or validated on (`origin`: where they came from),
    for every model kind that reads frames."""
    runs_ = dataset.source_runs()
    return {
        "source": origin,
        "frames": len(dataset),
        "frame_shape": list(dataset.frame_shape),
        "source_runs": len(runs_),
        "checksum": dataset_checksum(dataset),
        "provenance": dataset.provenance,
    }


class EpochBatches(keras.utils.PyDataset):
    """Training batches of an unbroken stream of shuffled passes over all sequences.

    Batch b (counted over the whole run) holds stream positions
    b*batch_size ... (b+1)*batch_size - 1; position p is sequence
    order(p // N)[p % N], where order(k) is pass k's permutation, a function
    of (seed, k) only. So an epoch of 125 steps continues where the last one
    stopped, like the original's generator, and a resumed run (first_epoch > 0)
    reads the very batches an uninterrupted run would, on any backend.

    Args:
        sequences: a SequenceGenerator with batch_size=1 and no shuffling
            (item j is sequence j).
        batch_size: sequences per batch.
        steps_per_epoch: batches per epoch.
        first_epoch: 0-based epoch this dataset starts at.
        epochs: total epochs of the run.
        seed: order seed.
        augment: augmentations drawn per sequence (see augment_sequence).
    """

    PREFETCH = 3  # batches made ahead, by two threads

    def __init__(self, sequences, batch_size, steps_per_epoch, first_epoch, epochs, seed, augment=()):
        super().__init__()
        self.sequences = sequences
        self.count = len(sequences)
        self.batch_size = batch_size
        self.steps_per_epoch = steps_per_epoch
        self.first_batch = first_epoch * steps_per_epoch
        self.total = (epochs - first_epoch) * steps_per_epoch
        self.seed = seed
        self.augment = tuple(augment)
        self._orders = {}
        self._orders_lock = threading.Lock()
        # Batches are read in order, so the next ones are made in a thread while the device runs a step:
        # at batch 16 of 128x160 frames, making one takes longer than a GPU step (about 35 ms here). Each
        # batch is a function of its index alone, so prefetching changes no number.
        self._pool = None
        self._made = {}

    def __len__(self):
        return self.total

    def order(self, k):
        """The permutation of sequence indices used by pass k over the data."""
        with self._orders_lock:
            if k not in self._orders:
                if len(self._orders) > 4:
                    self._orders.clear()
                self._orders[k] = pass_order(self.count, self.seed, k)
            return self._orders[k]

    def indices(self, batch):
        """Sequence indices of run-wide batch number `batch`."""
        positions = np.arange(batch * self.batch_size, (batch + 1) * self.batch_size)
        return np.array([self.order(int(p // self.count))[p % self.count] for p in positions])

    def __getitem__(self, index):
        if not 0 <= index < self.total:
            raise IndexError(f"batch {index} out of range for {self.total} batches")
        made = self._made.pop(index, None)
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="prednet-batches")
        for ahead in range(index + 1, min(index + 1 + self.PREFETCH, self.total)):
            if ahead not in self._made:
                self._made[ahead] = self._pool.submit(self.make, ahead)
        # A jump (a new epoch's iterator, a test reading one batch) leaves stale prefetches behind.
        for stale in [i for i in self._made if not index < i <= index + self.PREFETCH]:
            self._made.pop(stale).cancel()
        return made.result() if made is not None else self.make(index)

    def __del__(self):
        if getattr(self, "_pool", None) is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def make(self, index):
        """Batch `index` of this dataset (counted from its first epoch): (frames, zero targets)."""
        batch = self.first_batch + index
        chosen = self.indices(batch)
        first = batch * self.batch_size
        frames = np.concatenate([
            augment_sequence(self.sequences[int(j)][0], self.augment, self.seed, first + i)
            for i, j in enumerate(chosen)
        ])
        return frames, np.zeros((len(chosen), 1), np.float32)


def augment_sequence(frames, augment, seed, position):
    """A training sequence as augmentation draws it for one stream position.

    Each name in `augment` is applied with probability 1/2, the coin flips
    coming from numpy.random.default_rng([seed, position, 1]): a function of
    the run's seed and the sequence's run-wide position only, so a resumed run
    sees the same augmented batches as an uninterrupted one, on any backend.
    Both changes keep a sequence a plausible video: mirrored scenes, and
    motion played backwards.

    Args:
        frames: (..., nt, H, W, C) array.
        augment: names from AUGMENTATIONS ("flip": left-right, "reverse": time).
        seed: the run's seed.
        position: the sequence's position in the run's stream of sequences.

    Returns:
        The sequence, changed or not (a view when changed).
    """
    if not augment:
        return frames
    heads = np.random.default_rng([seed, position, 1]).random(len(AUGMENTATIONS)) < 0.5
    drawn = {name for name, head in zip(AUGMENTATIONS, heads) if head}
    if "flip" in augment and "flip" in drawn:
        frames = frames[..., ::-1, :]
    if "reverse" in augment and "reverse" in drawn:
        frames = frames[..., ::-1, :, :, :]
    return frames


def pass_order(count, seed, k):
    """Permutation of range(count) for pass k over the data, from (seed, k) only.

    The same orders as SequenceGenerator(shuffle=True, seed=seed) uses for its
    epochs: pass 0 is `starting_point.data_order(count, seed)`, pass k
    `data_order(count, seed, epoch=k)`.
    """
    from prednet_keras.models import starting_point

    return starting_point.data_order(count, seed, epoch=k if k else None)


def run_order_checksum(count, config):
    """Checksum of every sequence index the whole run visits, in order (EpochBatches' stream)."""
    from prednet_keras.models import starting_point

    positions = config.epochs * config.steps_per_epoch * config.batch_size
    passes = -(-positions // count)
    stream = np.concatenate([pass_order(count, config.seed, k) for k in range(passes)])[:positions]
    return starting_point.order_checksum(stream)

