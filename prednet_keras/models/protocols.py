"""The study's training protocols, on any Keras backend: what they share.

Each model kind's protocol is its own module: the Chainer PredNet's in `chainer_protocol`
(`train_chainer_prednet`, as the authors' `main.py` trains it), the MNIST autoencoder's in
`autoencoder_protocol` (`train_autoencoder`). Here: the protocols' options (`ChainerProtocol`,
`AutoencoderProtocol`), their result (`ProtocolResult`, `protocol_metric`), the record of every
update (`UpdateLog`, fed by `UpdateRecorder` where Keras' fit runs the updates), Adam as Chainer's
(`chainer_adam`) and the starting weights (`load_initial_weights_into`).

A protocol continues a checkpointed run through one object, its `checkpoint` argument (the training
session's `session.protocol_training.UpdateCheckpoint`): `checkpoint.records` are the updates already
made (empty for a new run), and `checkpoint.attach(model)`, called once the compiled model that holds the
optimizer exists and its initial weights are set, loads the checkpoint's state into it (weights, optimizer
variables, carried state) and keeps it to checkpoint later (`build`, a function that builds a model not yet
built, is called first when there is a checkpoint to load). The protocol then makes only the updates after
those records, in the same order, so the run ends as an uninterrupted one would.

Presets (`PRESETS`, `protocol_preset`): "paper" is the study's set-up,
"quick" a tiny one for tests and smoke runs.
"""

import dataclasses
import math
import time

import keras
import numpy as np

__all__ = [
    "AutoencoderProtocol",
    "BackendCannotTrainThis",
    "ChainerProtocol",
    "PRESETS",
    "ProtocolResult",
    "UpdateLog",
    "UpdateRecorder",
    "chainer_adam",
    "resolve_protocol",
    "protocol_metric",
    "protocol_preset",
]


class BackendCannotTrainThis(ValueError):
    """The backend in use fails on this protocol for a reason of its own (told in one line: the user's choice of
    backend, device or compilation, not a bug of this package)."""


# -- presets ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ChainerProtocol:
    """How the Chainer PredNet is trained (main.py's options).

    Args:
        name: preset name, recorded with the result.
        period: frames stepped through (main.py's --period); updates follow from it.
        bprop: frames per truncated-BPTT window (main.py's --bprop).
        metric_updates: the metric is the mean of this many last logged values.
        lr, beta_1, beta_2, epsilon: Adam, as Chainer's defaults.
    """

    name: str = "paper"
    period: int = 5000
    bprop: int = 20
    metric_updates: int = 50
    lr: float = 1e-3
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-8

    def __post_init__(self):
        for field in ("period", "bprop", "metric_updates"):
            value = getattr(self, field)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{field} must be a positive integer, got {value!r}.")


@dataclasses.dataclass(frozen=True)
class AutoencoderProtocol:
    """How an MNIST autoencoder is trained: one image per update.

    Args:
        name: preset name, recorded with the result.
        images: training images, i.e. updates (passes over the training set
            are chained, each in its own seeded order).
        metric_images: the metric is the mean loss of this many last images.
        eval_images: training and test images the final reconstruction MSE is
            measured on (the first N of each split); None: all.
        lr, beta_1, beta_2, epsilon: Adam, as Chainer's defaults.
    """

    name: str = "paper"
    images: int = 60000
    metric_images: int = 1000
    eval_images: int = None
    lr: float = 1e-3
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-8

    def __post_init__(self):
        for field in ("images", "metric_images"):
            value = getattr(self, field)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{field} must be a positive integer, got {value!r}.")


PRESETS = {
    "prednet-chainer": {
        # The study: 5000 frames (250 updates on long sequences), compared on the
        # last 1000 frames = the last 50 logged values.
        "paper": ChainerProtocol("paper", period=5000, bprop=20, metric_updates=50),
        # Three updates on sequences of at least 60 frames.
        "quick": ChainerProtocol("quick", period=60, bprop=20, metric_updates=2),
    },
    "autoencoder": {
        # The paper gives no image count; one pass over the 60,000 training images.
        "paper": AutoencoderProtocol("paper", images=60000, metric_images=1000),
        "quick": AutoencoderProtocol("quick", images=600, metric_images=100, eval_images=1000),
    },
}


def protocol_preset(model, name):
    """The preset `name` ("paper" or "quick") of `model` ("prednet-chainer" or "autoencoder")."""
    if model not in PRESETS:
        raise ValueError(f"No protocols for model {model!r}; models with protocols: {', '.join(PRESETS)}.")
    if name not in PRESETS[model]:
        raise ValueError(f"Unknown protocol {name!r} for {model}; expected one of {', '.join(PRESETS[model])}.")
    return PRESETS[model][name]


def resolve_protocol(model, protocol, **overrides):
    """`protocol` (a preset name or a protocol object) with the given fields replaced (None: kept)."""
    if isinstance(protocol, str):
        protocol = protocol_preset(model, protocol)
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(protocol, **overrides) if overrides else protocol


def chainer_adam(lr=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-8):
    """Adam as Chainer's `optimizers.Adam()`: Keras' update rule is the same, its default eps is not."""
    return keras.optimizers.Adam(learning_rate=lr, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon)


@dataclasses.dataclass
class ProtocolResult:
    """What a protocol run gives back.

    Attributes:
        model: the trained model to save (`model.keras`): for the Chainer
            PredNet a prediction model (frames -> next-frame predictions).
        records: one dict per update, in order (what `on_update` received).
        metric: {"name", "value", "count", "description"}: the number the
            study compares.
        summary: counts, timings and final evaluations, JSON-ready.
    """

    model: object
    records: list
    metric: dict
    summary: dict

    @property
    def logged(self):
        """The logged loss of every update, in order."""
        return [r["loss"] for r in self.records]


class UpdateLog:
    """The record of every update of a protocol run, in order: numbered from 1, timed, checked.

    Each record is {"update": n, **fields, "seconds": s}; `seconds` is the time from `start` to
    `add` (the update alone, not reading its data). A loss that is not finite stops the run with
    FloatingPointError: it is never recorded as a number.

    Args:
        on_update: called with each record once it is made (history.csv, the trajectory and the
            progress lines of the training session: `session.protocol_training`), or None.
        checked: the fields that must be finite.
        records: the records of the updates a continued run already made (its checkpoint's); the next
            update is numbered after them.
    """

    def __init__(self, on_update=None, checked=("loss",), records=()):
        self.records = list(records)
        self.on_update = on_update
        self.checked = tuple(checked)
        self._tick = None

    def start(self):
        """Marks the start of the next update (its `seconds` count from here)."""
        self._tick = time.perf_counter()

    def add(self, fields, where=""):
        """Records the update that ran since `start` and passes the record on.

        Args:
            fields: the update's values in the order history.csv lists them (the loss among them).
            where: words placing the update, for the error message ("(frame 12)").

        Returns:
            The record.
        """
        number = len(self.records) + 1
        for name in self.checked:
            value = fields[name]
            if not math.isfinite(value):
                raise FloatingPointError(f"The loss became {value} at update {number}{where}.")
        seconds = time.perf_counter() - self._tick if self._tick is not None else math.nan
        record = {"update": number, **fields, "seconds": round(seconds, 6)}
        self.records.append(record)
        if self.on_update is not None:
            self.on_update(record)
        return record


class UpdateRecorder(keras.callbacks.Callback):
    """Feeds an UpdateLog from Keras' fit: one record per training batch.

    Args:
        log: the UpdateLog.
        metric: the log key holding the batch's own loss (a `LastBatchMetric`: Keras' "loss" is a
            running mean).
        fields: a function of the update's index (from 0) giving the fields recorded before its loss
            (e.g. which image it trained on); None: none.
    """

    def __init__(self, log, metric, fields=None):
        super().__init__()
        self.log = log
        self.metric = metric
        self.fields = fields

    def on_train_batch_begin(self, batch, logs=None):
        self.log.start()

    def on_train_batch_end(self, batch, logs=None):
        index = len(self.log.records)
        before = self.fields(index) if self.fields is not None else {}
        self.log.add({**before, "loss": float((logs or {})[self.metric])})


def protocol_metric(values, last, unit):
    """{"name", "value", "count", "description"}: the mean of the last `last` logged values.

    Fewer values than `last` (a short run) give the mean of those there are;
    `count` says how many.
    """
    values = [float(v) for v in values]
    tail = values[-last:] if values else []
    return {
        "name": f"mean_last_{last}_{unit}",
        "value": float(np.mean(tail)) if tail else math.nan,
        "count": len(tail),
        "description": f"mean of the logged loss over the last {last} {unit.replace('_', ' ')}",
    }


def load_initial_weights_into(target, path, seed):
    """Sets the starting weights of a layer or model; returns a description for the run record.

    Args:
        target: a built layer or model.
        path: a `starting_point` HDF5 file, a Chainer `.npz` model (Chainer
            PredNet only), or None to draw the weights from `seed` with numpy
            (the same numbers on every backend and device).
        seed: the seed used when path is None.
    """
    from prednet_keras.models import starting_point

    if path is None:
        values = starting_point.initial_weights(target, seed)
        for variable in target.weights:
            variable.assign(values[variable.path])
        info = {"from": "seed", "seed": int(seed)}
    elif str(path).endswith((".npz", ".model")):
        from prednet_keras.formats.chainer import load_chainer_weights
        from prednet_keras.layers.chainer import ChainerPredNet

        if not isinstance(target, ChainerPredNet):
            raise ValueError(f"{path}: a Chainer model file can only start a Chainer PredNet.")
        load_chainer_weights(target, path)
        info = {"from": str(path), "format": "chainer npz"}
    else:
        loaded = starting_point.load_initial_weights(target, path)
        info = {"from": str(path), "seed": loaded["seed"]}
    info["checksum"] = starting_point.weights_checksum(target)
    return info
