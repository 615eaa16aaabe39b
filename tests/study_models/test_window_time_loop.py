"""On eager torch the Chainer PredNet's window steps through time itself (ChainerWindowModel._time_loop)
instead of through keras.layers.RNN, whose torch loop runs the cell once more and passes every step's
states through Keras' tree functions; it computes the same bits as that RNN, rolled and unrolled: the
predictions, the final states and every weight's gradient, with the padding of a first window masked. An
update then runs the cell once per frame step (Keras' RNN, built but not called, would otherwise leave the model
with unbuilt state, which Keras traces symbolically at every call)."""

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
from prednet_keras.models.chainer_protocol import ChainerPredNetTrainer

def bits(t):
    return t.detach().numpy().view(np.uint32).ravel().tolist()

trainer = ChainerPredNetTrainer((8, 8, 3), dict(stack_sizes=(3, 4)), bprop=4)
trainer.build_window()
window, cell = trainer.window_model, trainer.layer.cell
rng = np.random.default_rng(5)
cell.set_weights([rng.normal(0, 0.3, size=w.shape).astype(np.float32) for w in cell.weights])
frames = torch.tensor(rng.random((1, 4, 8, 8, 3), dtype=np.float32))
states = [torch.tensor(rng.normal(size=tuple(v.shape)).astype(np.float32)) for v in window.carried]
mask = torch.tensor([[False, True, True, True]])  # a first window of 3 steps, padded in front

def run(loop):
    for w in cell.trainable_weights:
        w.value.grad = None
    predictions, final = loop()
    upstream = torch.tensor(rng.normal(size=tuple(predictions.shape)).astype(np.float32))
    ((predictions * upstream).sum() + sum(s.sum() for s in final)).backward()
    return {"predictions": bits(predictions), "states": [bits(s) for s in final],
            "gradients": [bits(w.value.grad) for w in cell.trainable_weights]}

def keras_rnn(unroll):
    rnn = keras.layers.RNN(cell, return_sequences=True, return_state=True, unroll=unroll)
    def loop():
        result = rnn(frames, initial_state=states, mask=mask)
        return result[0], result[1:]
    return loop

state = rng.bit_generator.state
results = {}
for name, loop in (("time_loop", lambda: window._time_loop(frames, states, mask, False)),
                   ("rolled", keras_rnn(False)), ("unrolled", keras_rnn(True))):
    rng.bit_generator.state = state  # the same upstream gradient for each
    results[name] = run(loop)
first_masked = results["time_loop"]["predictions"][: 8 * 8 * 3]

# A later update as it trains eagerly (the first also builds the optimizer and metrics through a symbolic
# call): one cell step per frame step. Keras' rolled torch RNN makes one more, and Keras traces a model with
# an unbuilt layer symbolically at every call, every step again.
trainer.update(np.zeros((5, 8, 8, 3), np.float32), starts_sequence=True)
steps, call = [], cell.call
cell.call = lambda *args, **kwargs: steps.append(1) or call(*args, **kwargs)
trainer.update(np.zeros((5, 8, 8, 3), np.float32), starts_sequence=False)
json.dump({"same as rolled": results["time_loop"] == results["rolled"],
           "same as unrolled": results["time_loop"] == results["unrolled"],
           "masked first prediction is zero": first_masked == [0] * len(first_masked),
           "cell steps per update of 4 steps": len(steps),
           "gradients": len(results["time_loop"]["gradients"]),
           "nonzero gradients": sum(any(g) for g in results["time_loop"]["gradients"])}, sys.stdout)
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
    assert torch_result["same as rolled"] and torch_result["same as unrolled"]
    assert torch_result["masked first prediction is zero"]
    assert torch_result["cell steps per update of 4 steps"] == 4
    # Every weight of the cell gets a gradient, none all zeros: the comparison covers them all.
    assert torch_result["gradients"] == torch_result["nonzero gradients"] > 0
