"""The data that ships inside prednet-keras: nothing to download.

    load_mnist()                   the complete MNIST, as keras.datasets.mnist.load_data()
    embedded_video(split)          real video, 128x160 RGB: "train", "val" or "test" (a FrameDataset)
    embedded_video_path(split)     the same as a dataset file path (for --data, SequenceGenerator)

data/README.md in the source repository gives each file's provenance, licence and
the command that made it. None of these imports a deep-learning framework.
"""

from prednet_keras.data.dataset import open_dataset
from prednet_keras.data.embedded import SPLITS, embedded_dataset
from prednet_keras.data.mnist import load_mnist

__all__ = ["SPLITS", "embedded_video", "embedded_video_path", "load_mnist"]


def embedded_video_path(split="train"):
    """Path of the embedded real-video dataset file of `split`.

    Args:
        split: "train" (200 frames, 5 scenes of street footage), "val" (50
            frames, a 6th scene) or "test" (120 frames of another clip, held out).
    """
    return embedded_dataset(split)


def embedded_video(split="train"):
    """The embedded real video of `split` as a FrameDataset, read into memory.

    Its `frames` are uint8 (N, 128, 160, 3), `sources` say which scene each frame
    comes from (sequences never cross one); pass it to SequenceGenerator.
    """
    return open_dataset(embedded_dataset(split))
