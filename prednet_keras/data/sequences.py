"""Training sequences: the authors' SequenceGenerator on keras.utils.PyDataset.

Semantics follow coxlab's data_utils.py:
  - possible starts: 'all' is every frame i whose nt frames i..i+nt-1 come
    from one source; 'unique' walks each source from its first frame in steps
    of nt (non-overlapping sequences, each frame in at most one);
  - shuffle permutes the starts once, then N_seq keeps the first N_seq;
  - a batch is frames / 255 as float32, shape (batch, nt, H, W, C); the
    target is zeros of shape (batch, 1) in 'error' mode (the training model's
    output) or the batch itself in 'prediction' mode;
  - the last batch may be smaller (drop_remainder=True drops it).

"One source" here means one run of equal consecutive source ids: the
original compared only the first and last frame's ids, which is the same
whenever each source's frames are contiguous (as in every KITTI file).
"""

import math

import keras
import numpy as np

from prednet_keras.data.dataset import FrameDataset
from prednet_keras.data.errors import DataError
from prednet_keras.data.starts import sequence_starts

OUTPUT_MODES = ("error", "prediction")


def _describe_source(data):
    return str(data.path) if data.path is not None else "dataset"


class SequenceGenerator(keras.utils.PyDataset):
    """Batches of nt-frame sequences that never cross from one source to another.

    Order: with shuffle, the starts are permuted once by
    numpy.random.default_rng(seed) (then cut to N_seq): that is order 0, the
    order of possible_starts. Each call of on_epoch_end moves to the next
    order; order k > 0 visits possible_starts[
    numpy.random.default_rng([seed, k]).permutation(N_sequences)]. It depends
    only on (seed, k): the same on every backend and machine. set_epoch(k)
    jumps to order k (for resuming). Keras 3's fit calls on_epoch_end once
    before its first epoch (EpochIterator.reset, on all three backends), so
    fit's epoch e (0-based) uses order e + 1. Without shuffle every order is
    possible_starts.

    Args:
        data: a FrameDataset, or a path to anything load_frames reads.
        nt: frames per sequence.
        batch_size: sequences per batch.
        sequence_start_mode: "all" or "unique" (see sequence_starts).
        N_seq: keep at most this many sequences (after shuffling).
        shuffle: shuffle the starts, and reshuffle each epoch.
        seed: integer seed; None draws one from the OS (kept in .seed, so a
            run can record it).
        output_mode: "error" (targets are zeros (batch, 1)) or "prediction"
            (targets are the inputs).
        drop_remainder: leave out a last batch smaller than batch_size.
        **pydataset_kwargs: workers, use_multiprocessing, max_queue_size.
            Threads suit in-memory data; HDF5 reads take a global lock.

    Attributes:
        possible_starts: int64 array of the starts used, in epoch-0 order.
        N_sequences: len(possible_starts).
        seed: the seed in use.
        epoch: the order __getitem__ follows (the number of on_epoch_end calls).
    """

    def __init__(
        self,
        data,
        nt,
        batch_size=4,
        sequence_start_mode="all",
        N_seq=None,
        shuffle=False,
        seed=None,
        output_mode="error",
        drop_remainder=False,
        **pydataset_kwargs,
    ):
        super().__init__(**pydataset_kwargs)
        if not isinstance(data, FrameDataset):
            from prednet_keras.data.prepare import load_frames

            data = load_frames(data)
        if output_mode not in OUTPUT_MODES:
            raise DataError(f"output_mode {output_mode!r} is not one of {', '.join(OUTPUT_MODES)}")
        if int(batch_size) != batch_size or batch_size < 1:
            raise DataError(f"batch_size must be a positive integer, got {batch_size!r}")
        if N_seq is not None and (int(N_seq) != N_seq or N_seq < 1):
            raise DataError(f"N_seq must be a positive integer or None, got {N_seq!r}")
        starts = sequence_starts(data, nt, sequence_start_mode)
        where = _describe_source(data)
        if len(data) < nt:
            raise DataError(f"{where}: {len(data)} frames, fewer than nt={nt}")
        if not len(starts):
            longest = max(stop - start for _, start, stop in data.source_runs())
            raise DataError(
                f"{where}: no sequence of nt={nt} frames within one source "
                f"(the longest source has {longest} frames)"
            )
        self.data = data
        self.nt = int(nt)
        self.batch_size = int(batch_size)
        self.sequence_start_mode = sequence_start_mode
        self.output_mode = output_mode
        self.shuffle = bool(shuffle)
        self.drop_remainder = bool(drop_remainder)
        self.seed = int(np.random.SeedSequence().entropy) if seed is None else int(seed)
        if self.shuffle:
            starts = np.random.default_rng(self.seed).permutation(starts)
        if N_seq is not None and len(starts) > N_seq:
            starts = starts[: int(N_seq)]
        self.possible_starts = starts
        self.N_sequences = len(starts)
        if self.drop_remainder and self.N_sequences < self.batch_size:
            raise DataError(
                f"{where}: {self.N_sequences} sequences, fewer than one batch of "
                f"{self.batch_size} (drop_remainder=True leaves none)"
            )
        self.im_shape = data.frame_shape
        self.set_epoch(0)

    def set_epoch(self, epoch):
        """Orders the sequences as order `epoch` does (see the class docstring)."""
        self.epoch = int(epoch)
        if self.shuffle and self.epoch > 0:
            self._order = np.random.default_rng([self.seed, self.epoch]).permutation(self.N_sequences)
        else:
            self._order = np.arange(self.N_sequences)

    def epoch_starts(self):
        """Start frames in the order the batches use them now."""
        return self.possible_starts[self._order]

    def on_epoch_end(self):
        self.set_epoch(self.epoch + 1)

    def __len__(self):
        if self.drop_remainder:
            return self.N_sequences // self.batch_size
        return math.ceil(self.N_sequences / self.batch_size)

    def _read(self, starts):
        frames = self.data.frames
        if isinstance(frames, np.ndarray):
            return frames[starts[:, np.newaxis] + np.arange(self.nt)]
        batch = np.empty((len(starts), self.nt) + self.im_shape, dtype=np.uint8)
        for i, start in enumerate(starts):
            frames.read_direct(batch, np.s_[start : start + self.nt], np.s_[i])
        return batch

    def _preprocess(self, batch):
        return np.divide(batch, np.float32(255), dtype=np.float32)

    def __getitem__(self, index):
        count = len(self)
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError(f"batch {index} out of range for {count} batches")
        chosen = self._order[index * self.batch_size : (index + 1) * self.batch_size]
        batch_x = self._preprocess(self._read(self.possible_starts[chosen]))
        if self.output_mode == "error":
            return batch_x, np.zeros((len(batch_x), 1), np.float32)
        return batch_x, batch_x

    def create_all(self):
        """All sequences as one (N_sequences, nt, H, W, C) float32 array, in possible_starts order."""
        out = np.empty((self.N_sequences, self.nt) + self.im_shape, dtype=np.float32)
        step = max(1, 256 // self.nt)
        for lo in range(0, self.N_sequences, step):
            starts = self.possible_starts[lo : lo + step]
            out[lo : lo + len(starts)] = self._preprocess(self._read(starts))
        return out
