"""The model registry: every network the package trains is one kind, registered here by name.

    kind = model_kinds.get("prednet-chainer")      # or "prednet", "autoencoder",
    kind = model_kinds.get("mypkg.models:small_cnn") # or "path/to/file.py:small_cnn" (a user's model)

A kind (`base.ModelKind`) says how its model is built, its data, its loss or protocol, its defaults, its
training options and their rules (for prednet-train and a study spec's [train]), the study's arm factors,
prednet-bench's sizes and the model its study seeds start from. Adding a model is one new module with a
ModelKind subclass and one `register` line below. Importing this package imports no framework: the parts
that build or train a model import theirs when they run.

A user's own Keras model is named `module:function` or `file.py:function`; the function returns a
`UserModel` (model, data, loss; `model_kinds/user.py` has the contract), and the model then trains through
prednet-train and the study as the built-in ones do.
"""

from prednet_keras.model_kinds import autoencoder, chainer, lotter, user
from prednet_keras.model_kinds.base import (
    BenchDefaults,
    ModelKind,
    find,
    get,
    is_reference,
    kinds,
    names,
    protocol_of,
    register,
    register_reference_kind,
)
from prednet_keras.model_kinds.user import UserModel

__all__ = ["BenchDefaults", "ModelKind", "UserModel", "find", "get", "is_reference", "kinds", "names", "protocol_of",
           "register", "register_reference_kind"]

register(lotter.KIND)
register(chainer.KIND)
register(autoencoder.KIND)
register_reference_kind(user.UserModelKind)
