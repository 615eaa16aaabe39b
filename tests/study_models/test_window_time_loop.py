"""On eager torch the Chainer PredNet's window steps through time itself (ChainerWindowModel._time_loop)
instead of through keras.layers.RNN, whose torch loop runs the cell once more and passes every step's
states through Keras' tree functions; it shares the gates' concatenated kernels among the window's steps,
takes a step that is real in the whole batch as the cell gives it (no `where`), and its cell runs the eager
forms of layers/feature_maps.py. It computes the same bits as Keras' RNN running the cell in the plain forms
that TensorFlow and JAX get, rolled and unrolled: the predictions, the final states and every weight's
gradient, for a first window padded in front and for a window of real steps. An update then runs the cell
once per frame step (Keras' RNN, built but not called, would otherwise leave the model with unbuilt state,
which Keras traces symbolically at every call)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TORCH_SCRIPT = r"""
import json, sys
import numpy as np, keras, torch
from keras import ops
from prednet_keras.layers import device_constants
from prednet_keras.models.chainer_protocol import ChainerPredNetTrainer
from prednet_keras.bench.probes.torch_ops_per_step import operation_counter

def bits(t):
    return t.detach().numpy().view(np.uint32).ravel().tolist()

trainer = ChainerPredNetTrainer((8, 8, 3), dict(stack_sizes=(3, 4)), bprop=4)
trainer.build_window()
window, cell = trainer.window_model, trainer.layer.cell
rng = np.random.default_rng(5)
cell.set_weights([rng.normal(0, 0.3, size=w.shape).astype(np.float32) for w in cell.weights])
frames = torch.tensor(rng.random((1, 4, 8, 8, 3), dtype=np.float32))
states = [torch.tensor(rng.normal(size=tuple(v.shape)).astype(np.float32)) for v in window.carried]
eager_torch = device_constants.eager_torch

def run(loop, mask):
    for w in cell.trainable_weights:
        w.value.grad = None
    with operation_counter() as count:
        predictions, final = loop(mask)
    upstream = torch.tensor(rng.normal(size=tuple(predictions.shape)).astype(np.float32))
    ((predictions * upstream).sum() + sum(s.sum() for s in final)).backward()
    return {"predictions": bits(predictions), "states": [bits(s) for s in final],
            "gradients": [bits(w.value.grad) for w in cell.trainable_weights],
            "operations": sum(count.ops.values()), "where": count.ops["aten.where"]}

def time_loop(mask):
    return window._time_loop(frames, states, mask, False)

def keras_rnn(unroll):
    rnn = keras.layers.RNN(cell, return_sequences=True, return_state=True, unroll=unroll)
    def loop(mask):
        device_constants.eager_torch = lambda: False  # the plain forms, as TensorFlow and JAX run them
        try:
            result = rnn(frames, initial_state=states, mask=mask)
        finally:
            device_constants.eager_torch = eager_torch
        return result[0], result[1:]
    return loop

masks = {"padded": torch.tensor([[False, True, True, True]]),  # a first window of 3 steps, padded in front
         "real": torch.tensor([[True, True, True, True]])}
state = rng.bit_generator.state
results = {}
for window_kind, mask in masks.items():
    for name, loop in (("time_loop", time_loop), ("rolled", keras_rnn(False)), ("unrolled", keras_rnn(True))):
        rng.bit_generator.state = state  # the same upstream gradient for each
        results[window_kind, name] = run(loop, mask)
first_masked = results["padded", "time_loop"]["predictions"][: 8 * 8 * 3]

def same(window_kind, other):
    return all(results[window_kind, "time_loop"][key] == results[window_kind, other][key]
               for key in ("predictions", "states", "gradients"))

# A later update as it trains eagerly (the first also builds the optimizer and metrics through a symbolic
# call): one cell step per frame step. Keras' rolled torch RNN makes one more, and Keras traces a model with
# an unbuilt layer symbolically at every call, every step again.
trainer.update(np.zeros((5, 8, 8, 3), np.float32), starts_sequence=True)
steps, call = [], cell.call
cell.call = lambda *args, **kwargs: steps.append(1) or call(*args, **kwargs)
trainer.update(np.zeros((5, 8, 8, 3), np.float32), starts_sequence=False)
json.dump({**{f"{kind} same as {other}": same(kind, other) for kind in masks for other in ("rolled", "unrolled")},
           "masked first prediction is zero": first_masked == [0] * len(first_masked),
           "cell steps per update of 4 steps": len(steps),
           "where, padded / real": [results[kind, "time_loop"]["where"] for kind in masks],
           "forward operations, time loop / rolled": [results["real", name]["operations"]
                                                       for name in ("time_loop", "rolled")],
           "gradients": len(results["padded", "time_loop"]["gradients"]),
           "nonzero gradients": sum(any(g) for g in results["padded", "time_loop"]["gradients"])}, sys.stdout)
"""


@pytest.fixture(scope="module")
def torch_result():
    pytest.importorskip("torch")
    env = {**os.environ, "KERAS_BACKEND": "torch", "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-c", TORCH_SCRIPT], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_windows_own_time_loop_computes_the_bits_of_keras_rnn(torch_result):
    for kind in ("padded", "real"):
        assert torch_result[f"{kind} same as rolled"] and torch_result[f"{kind} same as unrolled"], kind
    assert torch_result["masked first prediction is zero"]
    assert torch_result["cell steps per update of 4 steps"] == 4
    # Every weight of the cell gets a gradient, none all zeros: the comparison covers them all.
    assert torch_result["gradients"] == torch_result["nonzero gradients"] > 0


def test_real_steps_take_no_where_and_the_window_dispatches_fewer_operations(torch_result):
    # The padded step keeps its 2 states x 3 kinds (h, c, p) and its output with `where`; real steps do not.
    assert torch_result["where, padded / real"] == [2 * 3 + 1, 0]
    fewer, plain = torch_result["forward operations, time loop / rolled"]
    assert fewer < 0.8 * plain, (fewer, plain)
