"""A user's own Keras model, named `package.module:function` or `path/to/file.py:function`.

The contract: the function takes no arguments and returns a `UserModel`:

    from prednet_keras.model_kinds import UserModel

    def small_cnn():
        (x_train, y_train), (x_test, y_test) = load_some_data()      # numpy arrays
        model = keras.Sequential([...])                                # built (it has an input shape)
        return UserModel(model, (x_train, y_train), loss="sparse_categorical_crossentropy",
                         val_data=(x_test, y_test), metrics=["accuracy"], batch_size=32, epochs=1)

It must return the same model (architecture) and the same data every time it is called: the study calls
it once to make each seed's initial weights and once in every training run. Randomness is the package's
business, not the function's: the initial weights are drawn from the run's seed with numpy (the same
numbers on every backend and device, `starting_point`; Keras' usual initializers are supported) and the
order of the training examples is `starting_point.data_order(n, seed, epoch)`, so every configuration of a
study starts from the same weights and sees the same batches. The runtime options (backend, device,
threads, determinism, ...) apply as for the built-in models: the function runs in the training process,
after the runtime is set up.

Training: `model.compile(optimizer, loss, metrics)` (optimizer default: Adam, learning rate 1e-3), then
`epochs` passes in the seeded order, `batch_size` examples per update (the last batch of a pass may be
smaller). history.csv has one row per update (update, epoch, loss of that batch, seconds); the metric the
study compares is the mean loss of the last `metric_updates` updates; `val_data`, when given, is evaluated
once at the end (result.val in the manifest). The run records what it ran: the reference, the function's
file and that file's sha256 (manifest `model` and `protocol`).

[train] of a study spec (and prednet-train's --epochs / --batch-size, when given) may override epochs,
batch_size and metric_updates.

Checkpoints and --resume: as the study's models (`session.protocol_training`), every few minutes and when
stopped; `prednet-train --resume` continues the run bit-identically to an uninterrupted one (history.csv but
its seconds, the final weights). The checkpoint holds the weights and the optimizer's variables
(`save_weights`) and, in state.json, the state of every Keras random generator the model's layers own
(`keras.random.SeedGenerator`: Dropout's, the noise and random augmentation layers'), which `save_weights`
leaves out; the batches are a function of the seed and the epoch. Hence one more rule of the contract:
the model draws its random numbers while training only through its layers' own generators, as Keras'
layers do. Random numbers drawn elsewhere (keras.random without a SeedGenerator held by a layer, the
backend's or NumPy's generators in a custom layer or train_step) are in no checkpoint, and a run continued
from one would not be the uninterrupted run: nothing can tell such a model apart, so it is stated here.
On torch, Keras' Dropout made without a seed draws from torch's global generator, which Keras' fit also
draws from as each epoch starts and ends, so a model with random layers keeps no checkpoints there (the run
says so as it starts; `backends.Backend.random_layers_draw_globally`): train it with jax or tensorflow to
have them.

Not (yet) for user models: --precision other than float32, prednet-bench, and
prednet-eval (it refuses such a run in one line: the val metrics in the manifest are the evaluation). Build the model with the functional API
and named layers: a keras.Sequential built inside the function gets other weight paths than the same model
loaded from model.keras, and the saved weights are checked against the run's record by path. Only the
function's own file is hashed, not the files it imports.
"""

import dataclasses
import hashlib
import importlib
import importlib.util
import math
import os
import sys
import time
from pathlib import Path

from prednet_keras.files import diskwrite
from prednet_keras.options import value_rules as rules
from prednet_keras.options.record import OptionsRecord
from prednet_keras.model_kinds import base
from prednet_keras.session.protocol import UpdateProtocol

__all__ = ["UserConfig", "UserModel", "UserModelError", "UserModelKind", "UserProtocol", "load_reference",
           "resolve_reference"]


@dataclasses.dataclass
class UserModel:
    """What a user's model function returns.

    Attributes:
        model: a built keras.Model (compiled or not: it is compiled again with the fields below).
        train_data: (x, y) numpy arrays (or anything Model.fit takes as x and y, indexable by an index array).
        loss: what Model.compile takes as its loss: a Keras loss name, a keras.losses.Loss or a loss function.
        val_data: (x, y) evaluated once after training, or None.
        optimizer: a keras optimizer (a new one per call) or its name; None: Adam(learning_rate=1e-3).
        metrics: Model.compile's metrics (evaluated on val_data).
        batch_size: examples per update.
        epochs: passes over train_data.
        metric_updates: the study's metric is the mean loss of this many last updates.
    """

    model: object
    train_data: tuple
    loss: object
    val_data: tuple = None
    optimizer: object = None
    metrics: tuple = ()
    batch_size: int = 32
    epochs: int = 1
    metric_updates: int = 50


@dataclasses.dataclass(frozen=True)
class UserProtocol:
    """How a user model is trained (its UserModel's values, with the run's overrides)."""

    name: str = "user"
    epochs: int = 1
    batch_size: int = 32
    metric_updates: int = 50


@dataclasses.dataclass
class UserConfig(OptionsRecord):
    """The training options of a user-model run (the manifest's `options`).

    Args:
        model: the reference, `module:function` or an absolute `file.py:function`.
        seed: seed of the initial weights and of the order of the training examples.
        init_weights: a starting_point .h5 to start from instead of the seed's weights.
        epochs, batch_size, metric_updates: overrides of the UserModel's values (None: the function's).
    """

    WHAT = "training options"

    model: str = None
    seed: int = 0
    init_weights: str = None
    epochs: int = None
    batch_size: int = None
    metric_updates: int = None

    def resolved(self):
        config = dataclasses.replace(self)
        config.validate()
        return config

    def validate(self):
        if not base.is_reference(self.model):
            raise ValueError(f"a user model is named MODULE:FUNCTION or FILE.py:FUNCTION, got {self.model!r}.")
        for name in ("epochs", "batch_size", "metric_updates"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"--{name.replace('_', '-')} must be a whole number >= 1, got {value!r}.")

    def check_paths(self):
        where = self.model.rpartition(":")[0]
        if where.endswith(".py") and not os.path.isfile(where):
            raise FileNotFoundError(2, "--model: no such file", where)
        if self.init_weights is not None and not os.path.exists(self.init_weights):
            raise FileNotFoundError(2, "--init-weights: no such file or folder", self.init_weights)


def resolve_reference(text, base_dir=None):
    """`text` with a file path made absolute (relative to `base_dir`, default the working directory)."""
    where, _, function = text.rpartition(":")
    if not where.endswith(".py"):
        return text
    path = Path(where)
    if not path.is_absolute():
        path = Path(base_dir or os.getcwd()) / path
    return f"{path.resolve()}:{function}"


class UserModelError(ValueError):
    """A user's model reference that cannot be used: told in one line (PREDNET_DEBUG=1 shows the cause's
    traceback), since the fault is in the user's file, not in this package."""


def _user_code_failed(reference, what, error):
    return UserModelError(f"{reference}: {what} raised {type(error).__name__}: {error} "
                          "(PREDNET_DEBUG=1 shows the traceback)")


def load_reference(reference):
    """(the function, the file it is defined in) of a reference; UserModelError says why not."""
    where, _, name = reference.rpartition(":")
    if where.endswith(".py"):
        path = Path(where).resolve()
        if not path.is_file():
            raise FileNotFoundError(2, "no such model file", str(path))
        module_name = "prednet_keras_user_model_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        # The file's own folder first, so that it can import its neighbours.
        sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            raise _user_code_failed(reference, f"importing {path}", error) from error
        finally:
            sys.path.remove(str(path.parent))
    else:
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.append(os.getcwd())
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as error:
            if error.name and where.split(".")[0] == error.name.split(".")[0]:
                raise UserModelError(f"--model {reference}: no module named {where!r} (on the working "
                                     "directory or PYTHONPATH).") from None
            raise _user_code_failed(reference, f"importing {where}", error) from error
        except Exception as error:
            raise _user_code_failed(reference, f"importing {where}", error) from error
        path = Path(module.__file__).resolve() if getattr(module, "__file__", None) else None
    try:
        function = getattr(module, name)
    except AttributeError:
        raise UserModelError(f"{where} defines no {name!r} (from --model {reference}).") from None
    if not callable(function):
        raise UserModelError(f"{reference}: {name} is not a function.")
    return function, path


def file_sha256(path):
    if path is None:
        return None
    return diskwrite.file_sha256(path)


def _arrays_checksum(pair):
    import numpy as np

    digest = hashlib.sha256()
    for array in pair:
        array = np.ascontiguousarray(np.asarray(array))
        digest.update(str((array.dtype.str, array.shape)).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


class UserModelKind(base.ModelKind):
    """The kind of one reference (made by base.get for a name with a ':')."""

    # Checkpointed and resumable as the study's models are (protocol_training): the checkpoint holds the
    # weights and the optimizer's variables (save_weights) and, in state.json, the state of the model's Keras
    # random generators (Dropout's, noise and augmentation layers'), which save_weights leaves out; the data
    # order is a function of the seed and the epoch. Not on torch for a model with random layers (the module's
    # docstring says why): its runs keep no checkpoints there.
    session_protocol = UpdateProtocol()
    precision_modes = False
    options = ("seed", "init_weights", "epochs", "batch_size")
    history_columns = ("update", "epoch", "loss", "seconds")
    evaluation = None

    def __init__(self, reference):
        self.name = reference
        self.help = f"the user's model {reference}"
        self._loaded = None

    @property
    def function_name(self):
        return self.name.rpartition(":")[2]

    def canonical(self, base=None):
        return resolve_reference(self.name, base)

    def output_name(self):
        return self.function_name

    def config_class(self):
        return UserConfig

    def train_rules(self):
        return {
            "epochs": rules.Whole(1, 100_000, "passes over the training data"),
            "batch_size": rules.Whole(1, 1_000_000, "examples per update"),
            "metric_updates": rules.Whole(1, 10_000_000, "updates the study's metric averages"),
        }

    def config_from_options(self, options, explicit):
        given = {name: options[name] for name in ("epochs", "batch_size") if name in explicit}
        return UserConfig(model=self.name, seed=options["seed"], init_weights=options["init_weights"], **given)

    # -- the function and what it returns ---------------------------------------------------------------

    def load(self):
        """(the UserModel, {"reference", "function", "file", "file_sha256"}), once per process."""
        if self._loaded is None:
            function, path = load_reference(self.name)
            record = {"reference": self.name, "function": self.function_name,
                      "file": None if path is None else str(path), "file_sha256": file_sha256(path)}
            try:
                made = function()
            except Exception as error:
                raise _user_code_failed(self.name, "calling it", error) from error
            if not isinstance(made, UserModel):
                raise UserModelError(f"{self.name} returned {type(made).__name__}, not a "
                                     "prednet_keras.model_kinds.UserModel(model, train_data, loss, ...).")
            if not hasattr(made.model, "fit") or not getattr(made.model, "built", False):
                raise UserModelError(f"{self.name}: UserModel.model must be a built keras.Model (give it an input "
                                     "shape).")
            if len(made.train_data) != 2 or len(made.train_data[0]) != len(made.train_data[1]):
                raise UserModelError(f"{self.name}: UserModel.train_data must be (x, y) with as many x as y.")
            self._loaded = (made, record)
        return self._loaded

    def load_data(self, config):
        print(f"Loading the model and data of {self.name} ...", flush=True)
        made, record = self.load()
        data = {"train": {"source": self.name, "examples": int(len(made.train_data[0])),
                          "checksum": _arrays_checksum(made.train_data)}}
        if made.val_data is not None:
            data["val"] = {"source": self.name, "examples": int(len(made.val_data[0])),
                           "checksum": _arrays_checksum(made.val_data)}
        return made, data

    def load_data_quietly(self, config):
        return self.load()[0]

    def build(self, config, data):
        return data.model

    def training_protocol(self, config, data=None):
        made = data if data is not None else self.load()[0]
        return UserProtocol(
            epochs=int(config.epochs or made.epochs),
            batch_size=int(config.batch_size or made.batch_size),
            metric_updates=int(config.metric_updates or made.metric_updates),
        )

    def _orders(self, count, preset, seed):
        from prednet_keras.models import starting_point

        return [starting_point.data_order(count, seed, epoch=k if k else None) for k in range(preset.epochs)]

    def plan(self, config, data, preset):
        import numpy as np

        from prednet_keras.models import starting_point

        count = len(data.train_data[0])
        orders = self._orders(count, preset, config.seed)
        updates = preset.epochs * math.ceil(count / preset.batch_size)
        return updates, starting_point.order_checksum(np.concatenate(orders))

    def label(self, config):
        return self.function_name

    def protocol_record(self, config, preset):
        return {"model": config.model, "preset": dataclasses.asdict(preset),
                "file_sha256": self.load()[1]["file_sha256"]}

    def train(self, config, data, preset, *, initial_weights, on_update, jit_compile, on_start, checkpoint=None):
        import keras

        from prednet_keras.models import protocols, torch_training_step

        model = data.model
        initial = protocols.load_initial_weights_into(model, initial_weights, config.seed)
        optimizer = data.optimizer if data.optimizer is not None else keras.optimizers.Adam(learning_rate=1e-3)
        torch_training_step.compile_for_training(model, optimizer=optimizer, loss=data.loss,
                                                 metrics=[_batch_loss_metric(data.loss)], jit_compile=jit_compile)
        done = ()
        if checkpoint is not None:
            checkpoint.attach(model)
            done = checkpoint.records
        if on_start is not None:
            on_start(model)
        x, y = data.train_data
        log = protocols.UpdateLog(on_update, records=done)
        recorder = protocols.UpdateRecorder(log, "batch_loss")
        per_epoch = math.ceil(len(x) / preset.batch_size)
        started = time.perf_counter()
        for epoch, order in enumerate(self._orders(len(x), preset, config.seed), start=1):
            # A continued run makes the updates after those its checkpoint holds: the same batches, in order.
            skipped = min(max(len(done) - (epoch - 1) * per_epoch, 0), per_epoch) * preset.batch_size
            if skipped >= len(order):
                continue
            order = order[skipped:]
            recorder.fields = lambda index, epoch=epoch: {"epoch": epoch}
            model.fit(x[order], y[order], batch_size=preset.batch_size, epochs=1, shuffle=False, verbose=0,
                      callbacks=[recorder])
        seconds = time.perf_counter() - started
        records = log.records
        # Compiled again as the user asked (the model file then holds the user's metrics, not ours).
        model.compile(optimizer=model.optimizer, loss=data.loss, metrics=list(data.metrics or ()),
                      jit_compile=jit_compile)
        val = None
        if data.val_data is not None:
            values = model.evaluate(*data.val_data, batch_size=preset.batch_size, verbose=0, return_dict=True)
            val = {name: float(value) for name, value in values.items()}
        summary = {
            "protocol": dataclasses.asdict(preset),
            "model": config.model,
            "parameters": int(model.count_params()),
            "updates": len(records),
            "initial_weights": initial,
            "train_seconds": round(seconds, 3),
            "val": val,
            "backend": keras.backend.backend(),
        }
        metric = protocols.protocol_metric([r["loss"] for r in records], preset.metric_updates, "updates")
        return protocols.ProtocolResult(model, records, metric, summary)

    def evaluation_note(self, manifest):
        val = manifest.result.get("val") if manifest.result else None
        if not val:
            return ("it recorded no validation metrics (its UserModel has no val_data); its training loss is in "
                    "history.csv and manifest.json (result, metric)")
        values = ", ".join(f"{name} {value:.6g}" if isinstance(value, (int, float)) else f"{name} {value}"
                           for name, value in val.items())
        return f"its validation metrics ({values}) are in manifest.json (result.val)"

    def model_record(self, config, result):
        record = dict(self.load()[1])
        return {"name": config.model, "parameters": int(result.summary.get("parameters", 0)),
                "class": type(result.model).__name__, **record}

    def build_for_starting_point(self, options):
        return self.load()[0].model


def _batch_loss_metric(loss):
    """A metric holding the loss of the last batch alone (Keras' "loss" log is a running mean)."""
    import keras

    from prednet_keras.models.lotter import LastBatchMetric

    return LastBatchMetric(loss=keras.losses.get(loss) if isinstance(loss, str) else loss)
