"""Model files that cannot be loaded: the message names the file and keeps the cause whole."""

import zipfile

import pytest

from prednet_keras import pretrained
from prednet_keras.saving import ModelFileError, load_model


def test_unknown_class_names_the_cause_without_the_config_dump(tmp_path):
    # A .keras file naming a layer class nobody registered (a file from a newer version, or edited).
    broken = tmp_path / "unknown-layer.keras"
    with zipfile.ZipFile(pretrained.path() / "model.keras") as source, zipfile.ZipFile(broken, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "config.json":
                data = data.replace(b'PredNet"', b'PredNetFromTheFuture"')
            target.writestr(item, data)
    with pytest.raises(ModelFileError) as caught:
        load_model(broken)
    message = str(caught.value)
    assert message.startswith(f"{broken} could not be loaded: ")
    assert "Cause: Could not locate class 'PredNetFromTheFuture'" in message
    assert message.endswith("so that the decorator is run before trying to load them.")
    assert "stack_sizes" not in message and "{" not in message  # no object config dumped
