"""The KITTI training recipe as data: what defines a training run, checked before any framework starts.

TrainConfig holds every option of `prednet-train` (the runtime aside) with
kitti_train.py's defaults; the learning-rate schedule and the loss weights are
functions of it. Nothing here imports a framework, so the command line and the
study spec validate a run in the parent process, which never loads Keras.
"""

import dataclasses
import math
import os

import numpy as np

from prednet_keras.options.record import OptionsRecord
from prednet_keras.options.frame_size import check_frame_size

__all__ = [
    "AUGMENTATIONS",
    "KITTI_STACK_SIZES",
    "MODELS",
    "SAMPLES_PER_EPOCH",
    "TrainConfig",
    "layer_loss_weights_for",
    "learning_rate_at",
    "lr_drop_rule",
    "schedule_text",
    "time_loss_weights_for",
]

MODELS = ("prednet",)
KITTI_STACK_SIZES = (3, 48, 96, 192)
# kitti_train.py's samples_per_epoch: steps per epoch default to this / batch size.
SAMPLES_PER_EPOCH = 500
# Training-data augmentations (TrainConfig.augment), in the order they are applied.
AUGMENTATIONS = ("flip", "reverse")



@dataclasses.dataclass
class TrainConfig(OptionsRecord):
    """Everything that defines a training run (the runtime aside).

    Args:
        model: network family; only "prednet" for now.
        stack_sizes: channels per PredNet layer; None is the KITTI model
            (3, 48, 96, 192) with the first entry set to the data's channels.
        r_stack_sizes: channels of the recurrent units; None: = stack_sizes.
        filter_size: kernel size of every convolution (A, Ahat and R).
        nt: frames per training sequence.
        batch_size: sequences per step.
        epochs: number of epochs.
        steps_per_epoch: steps per epoch; None: 500 // batch_size (the recipe's
            500 sequences per epoch).
        lr: Adam learning rate before the drop.
        lr_drop_epoch: epochs trained at `lr`; the later ones use
            lr * lr_drop_factor (kitti_train.py: 75 of 150). None: epochs // 2.
        lr_drop_factor: the rate after the drop is lr * lr_drop_factor.
        layer_loss: "L_0", "L_all" or one weight per layer.
        val_sequences: fixed validation sequences (first N starts); 0 disables
            validation (the best model is then the lowest training loss).
        data: training source (any path load_frames reads); None: the
            embedded real video's train split.
        val_data: validation source; None: the embedded val split when data is
            None, else the last val_fraction of data's frames.
        val_fraction: share of frames held out when val_data is None and data is given.
        size: (H, W) to resize frames to; None keeps the data's size.
        seed: seed of the initial weights and of the order of sequences.
        init_weights: a file of initial weights to start from instead of the seed's.
        unroll: unroll PredNet's time loop in the compiled training step (the
            same operations per time step; XLA then optimises across steps:
            1.3x the frames/s with JAX on an H200, no change with TensorFlow
            on a CPU). Runs recorded before this option existed trained rolled.
        augment: label-preserving changes drawn for each training sequence
            (not validation): "flip" mirrors it left-right, "reverse" plays it
            backwards, each with probability 1/2 (see `augment_sequence`).
            Empty, the recipe's default: the original trained on the frames
            as they are.
        patience: stop once the validation loss has not improved for this
            many epochs (Keras' EarlyStopping); None trains every epoch, as
            the recipe. model.keras stays the best epoch's either way.
    """

    WHAT = "training options"

    model: str = "prednet"
    stack_sizes: tuple = None
    r_stack_sizes: tuple = None
    filter_size: int = 3
    nt: int = 10
    batch_size: int = 4
    epochs: int = 150
    steps_per_epoch: int = None
    lr: float = 1e-3
    lr_drop_epoch: int = None
    lr_drop_factor: float = 0.1
    layer_loss: object = "L_0"
    val_sequences: int = 100
    data: str = None
    val_data: str = None
    val_fraction: float = 0.1
    size: tuple = None
    seed: int = 0
    init_weights: str = None
    unroll: bool = True
    augment: tuple = ()
    patience: int = None

    @classmethod
    def from_dict(cls, values):
        """The record a to_dict() produced; one without `unroll` predates it (rolled loop)."""
        return super().from_dict({"unroll": False, **values})

    def resolved(self):
        """A copy with the derived defaults filled in (steps, drop epoch), validated."""
        config = dataclasses.replace(self)
        if config.steps_per_epoch is None:
            config.steps_per_epoch = max(1, SAMPLES_PER_EPOCH // config.batch_size)
        if config.lr_drop_epoch is None:
            config.lr_drop_epoch = config.epochs // 2
        for name in ("stack_sizes", "r_stack_sizes", "size"):
            value = getattr(config, name)
            if value is not None:
                setattr(config, name, tuple(int(v) for v in value))
        if not isinstance(config.layer_loss, str):
            config.layer_loss = tuple(float(v) for v in config.layer_loss)
        config.augment = tuple(str(v) for v in config.augment or ())
        for name in ("data", "val_data", "init_weights"):
            value = getattr(config, name)
            if value is not None:
                setattr(config, name, str(value))
        config.validate()
        return config

    def validate(self):
        """Raises ValueError naming the first bad setting (no data is read)."""
        if self.model not in MODELS:
            raise ValueError(f"--model must be one of {', '.join(MODELS)}, got {self.model!r}.")
        for name, low in (("nt", 2), ("batch_size", 1), ("epochs", 1), ("filter_size", 1)):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"{_flag(name)} must be an integer >= {low}, got {value!r}.")
        if self.steps_per_epoch is not None and self.steps_per_epoch < 1:
            raise ValueError(f"--steps-per-epoch must be >= 1, got {self.steps_per_epoch}.")
        if self.lr_drop_epoch is not None and self.lr_drop_epoch < 0:
            raise ValueError(f"--lr-drop-epoch must be >= 0, got {self.lr_drop_epoch}.")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"--lr must be a positive number, got {self.lr}.")
        if not (self.lr_drop_factor > 0 and math.isfinite(self.lr_drop_factor)):
            raise ValueError(f"--lr-drop-factor must be a positive number, got {self.lr_drop_factor}.")
        if self.val_sequences < 0:
            raise ValueError(f"--val-sequences must be >= 0, got {self.val_sequences}.")
        if not 0 < self.val_fraction < 1:
            raise ValueError(f"--val-fraction must be between 0 and 1, got {self.val_fraction}.")
        if self.patience is not None:
            if isinstance(self.patience, bool) or not isinstance(self.patience, (int, np.integer)) or self.patience < 1:
                raise ValueError(f"--patience must be an integer >= 1, got {self.patience!r}.")
            if not self.val_sequences:
                raise ValueError("--patience watches the validation loss, and --val-sequences 0 leaves none.")
        unknown = [name for name in self.augment if name not in AUGMENTATIONS]
        if unknown or len(set(self.augment)) != len(self.augment):
            raise ValueError(f"--augment takes distinct names among {', '.join(AUGMENTATIONS)}, "
                             f"got {','.join(self.augment)}.")
        if self.filter_size % 2 == 0:
            raise ValueError(f"--filter-size must be odd (the convolutions keep the frame size), got {self.filter_size}.")
        stacks = self.stack_sizes if self.stack_sizes is not None else KITTI_STACK_SIZES
        if len(stacks) < 1 or any(s < 1 for s in stacks):
            raise ValueError(f"--stack-sizes must be positive channel counts, got {','.join(map(str, stacks))}.")
        if self.r_stack_sizes is not None and len(self.r_stack_sizes) != len(stacks):
            raise ValueError(
                f"--r-stack-sizes has {len(self.r_stack_sizes)} values but --stack-sizes has {len(stacks)}."
            )
        if self.r_stack_sizes is not None and any(s < 1 for s in self.r_stack_sizes):
            raise ValueError("--r-stack-sizes must be positive channel counts.")
        layer_loss_weights_for(self.layer_loss, len(stacks))
        if self.size is not None:
            if len(self.size) != 2 or min(self.size) < 1:
                raise ValueError(f"--size must be HxW with positive numbers, got {self.size}.")
            check_frame_size(self.size[0], self.size[1], len(stacks))

    def check_paths(self):
        """Raises FileNotFoundError for a data or weights path that does not exist."""
        for name in ("data", "val_data", "init_weights"):
            value = getattr(self, name)
            if value is not None and not os.path.exists(value):
                raise FileNotFoundError(2, f"{_flag(name)}: no such file or folder", value)


    @property
    def nb_layers(self):
        """Number of PredNet layers."""
        return len(self.stack_sizes if self.stack_sizes is not None else KITTI_STACK_SIZES)

    def prednet_kwargs(self, channels):
        """PredNet constructor arguments for frames with `channels` channels."""
        stacks = list(self.stack_sizes if self.stack_sizes is not None else KITTI_STACK_SIZES)
        if self.stack_sizes is None:
            stacks[0] = channels
        elif stacks[0] != channels:
            raise ValueError(
                f"--stack-sizes starts with {stacks[0]} but the frames have {channels} channel(s); "
                f"the first stack size is the number of image channels."
            )
        r_stacks = list(self.r_stack_sizes) if self.r_stack_sizes is not None else list(stacks)
        layers = len(stacks)
        size = self.filter_size
        return dict(
            stack_sizes=tuple(stacks),
            R_stack_sizes=tuple(r_stacks),
            A_filt_sizes=(size,) * (layers - 1),
            Ahat_filt_sizes=(size,) * layers,
            R_filt_sizes=(size,) * layers,
            unroll=bool(self.unroll),
        )


def _flag(name):
    return "--" + name.replace("_", "-")


def learning_rate_at(epoch, config):
    """The recipe's step schedule: lr before `lr_drop_epoch` (0-based), then lr * factor.

    Args:
        epoch: 0-based epoch.
        config: a resolved TrainConfig.
    """
    return config.lr if epoch < config.lr_drop_epoch else config.lr * config.lr_drop_factor


def schedule_text(config):
    """The learning rate of every epoch in words, e.g. "0.001 for epochs 1-2, 0.0001 for epochs 3-4"."""
    drop = min(max(config.lr_drop_epoch, 0), config.epochs)
    parts = []
    if drop > 0:
        parts.append(f"{config.lr:g} for {_epoch_range(1, drop)}")
    if drop < config.epochs:
        parts.append(f"{config.lr * config.lr_drop_factor:g} for {_epoch_range(drop + 1, config.epochs)}")
    return ", ".join(parts)


def _epoch_range(first, last):
    return f"epoch {first}" if first == last else f"epochs {first}-{last}"


def lr_drop_rule(lr_drop_epoch, epochs):
    """Why the learning rate drops where it does, for the manifest and the run's first lines.

    Args:
        lr_drop_epoch: --lr-drop-epoch as given (None: the default rule).
        epochs: --epochs of the new run.
    """
    if lr_drop_epoch is None:
        return (f"dropped after epochs // 2 = {epochs // 2} of {epochs}, kitti_train.py's rule (75 of 150); "
                "--lr-drop-epoch sets another epoch")
    return f"dropped after epoch {lr_drop_epoch}, as --lr-drop-epoch {lr_drop_epoch} asked"


def layer_loss_weights_for(spec, nb_layers):
    """Per-layer loss weights: "L_0" (only the pixel layer), "L_all" (1, then 0.1
    for every higher layer), or an explicit sequence of nb_layers numbers."""
    if isinstance(spec, str):
        if spec == "L_0":
            return [1.0] + [0.0] * (nb_layers - 1)
        if spec == "L_all":
            return [1.0] + [0.1] * (nb_layers - 1)
        raise ValueError(f"layer_loss_weights must be 'L_0', 'L_all' or a list of numbers, got {spec!r}.")
    weights = [float(w) for w in spec]
    if len(weights) != nb_layers:
        raise ValueError(
            f"layer_loss_weights has {len(weights)} values but the model has {nb_layers} layers."
        )
    return weights


def time_loss_weights_for(nt, spec=None):
    """Per-step loss weights: by default 0 for the first step (nothing to predict
    from yet) and 1/(nt-1) for every other step, as in kitti_train.py."""
    if spec is not None:
        weights = [float(w) for w in spec]
        if len(weights) != nt:
            raise ValueError(f"time_loss_weights has {len(weights)} values but nt is {nt}.")
        return weights
    if nt < 2:
        raise ValueError(f"nt must be at least 2 (the first step is not scored), got {nt}.")
    return [0.0] + [1.0 / (nt - 1)] * (nt - 1)
