"""lotter.dtype_name caches Keras' dtype names, but writes nothing while torch.compile traces: TorchDynamo
breaks the compiled step's graph at the next call-signature binding after a module's dict changes (the whole
effect: tests/test_torch_compile.py)."""

from prednet_keras.layers import device_constants, lotter


def test_a_dtype_first_met_while_torch_compile_traces_is_not_cached(monkeypatch):
    monkeypatch.setattr(lotter, "_DTYPE_NAMES", {})
    monkeypatch.setattr(device_constants, "torch_compile_tracing", lambda: True)
    assert lotter.dtype_name("bfloat16") == "bfloat16"
    assert lotter._DTYPE_NAMES == {}
    monkeypatch.setattr(device_constants, "torch_compile_tracing", lambda: False)
    assert lotter.dtype_name("bfloat16") == "bfloat16"
    assert lotter._DTYPE_NAMES == {"bfloat16": "bfloat16"}


def test_nothing_traces_outside_torch_compile():
    assert device_constants.torch_compile_tracing() is False
