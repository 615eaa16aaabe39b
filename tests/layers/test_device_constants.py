"""Python numbers given to PredNet's ops are made into device tensors once on eager torch
(layers/device_constants.py), and the ops compute exactly what they did with the numbers."""

import importlib.util
import json
import os
import subprocess
import sys

import keras
import pytest

from prednet_keras.layers import device_constants

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Run on KERAS_BACKEND=torch in a fresh process: the forms of before and after, bit for bit, forward and
# backward (an upstream gradient with negative entries, so that a zero's sign would show), and the Python
# numbers a training step turns into tensors, with where they were made.
TORCH_SCRIPT = r"""
import json, sys, traceback
import numpy as np, keras, torch
from keras import ops
import prednet_keras
from prednet_keras.layers.device_constants import cached, made_at_every_call, scalar
from prednet_keras.layers.lotter_args import keras2_hard_sigmoid

def bits(t):
    return t.detach().float().numpy().view(np.uint32).tolist()

def forward_backward(fn, x, upstream):
    x = x.clone().requires_grad_(True)
    y = fn(x)
    y.backward(upstream)
    return bits(y), bits(x.grad)

result = {}
rng = np.random.default_rng(0)
for dtype in (torch.float32, torch.bfloat16):
    # Values on both sides of the clip's bounds and on them (0.2 * 2.5 + 0.5 == 1, 0.2 * -2.5 + 0.5 == 0).
    x = torch.tensor(np.concatenate([rng.normal(0, 4, 200), [2.5, -2.5, 0.0]]), dtype=dtype)
    upstream = torch.tensor(rng.normal(0, 1, x.shape[0]), dtype=dtype)
    before = forward_backward(lambda v: ops.clip(0.2 * v + 0.5, 0.0, 1.0), x, upstream)
    after = forward_backward(keras2_hard_sigmoid, x, upstream)
    result[f"hard_sigmoid {dtype}"] = before == after
    # Ties with the bound included (the gradient of minimum splits them).
    a = torch.tensor(np.concatenate([rng.random(50) * 2, [1.0, 1.0]]), dtype=dtype)
    upstream = torch.tensor(rng.normal(0, 1, a.shape[0]), dtype=dtype)
    name = keras.backend.standardize_dtype(dtype)
    before = forward_backward(lambda v: ops.minimum(v, 1.0), a, upstream)
    after = forward_backward(lambda v: ops.minimum(v, scalar(1.0, v, name)), a, upstream)
    result[f"minimum {dtype}"] = before == after
result["made once"] = scalar(0.5, x) is scalar(0.5, x)
# Switched off for a timing (bench.probes.torch_constants_ab): the numbers go to the ops as on other backends.
def vector():
    made.append(1)
    return ops.zeros((2,))

made = []
with made_at_every_call():
    result["at every call"] = [type(scalar(0.25, x)) for _ in range(2)] == [float, float]
    for _ in range(2):
        cached("probe key", x, vector)
result["at every call"] = result["at every call"] and made == [1, 1]
cached("probe key", x, vector), cached("probe key", x, vector)
result["made once again"] = scalar(0.25, x) is scalar(0.25, x) and torch.is_tensor(scalar(0.25, x)) and made == [1, 1, 1]

model = prednet_keras.build_training_model(nt=3, frame_shape=(8, 8, 3), stack_sizes=(3, 4), R_stack_sizes=(3, 4),
                                           A_filt_sizes=(3,), Ahat_filt_sizes=(3, 3), R_filt_sizes=(3, 3))
model.compile(optimizer="adam", loss="mean_absolute_error", metrics=[prednet_keras.models.LastBatchLoss()])
frames = np.random.default_rng(1).random((2, 3, 8, 8, 3), dtype=np.float32)
zeros = np.zeros((2, 1), np.float32)
model.train_on_batch(frames, zeros)  # the first step makes the constants
made = []
real = torch.as_tensor
def as_tensor(data, *args, **kwargs):
    if isinstance(data, (bool, int, float)):
        made.append([f"{f.filename}:{f.lineno}" for f in traceback.extract_stack()[:-1]])
    return real(data, *args, **kwargs)
torch.as_tensor = as_tensor
model.train_on_batch(frames, zeros)
torch.as_tensor = real
result["made in a step"] = len(made)
result["made by prednet_keras"] = [stack for stack in made if any("prednet_keras" in f for f in stack)]
json.dump(result, open(sys.argv[1], "w"))
"""


# Slow: starts torch in a fresh process.
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_on_torch_the_ops_compute_the_same_bits_and_no_number_is_copied_per_step(tmp_path):
    out = tmp_path / "result.json"
    env = dict(os.environ, KERAS_BACKEND="torch", PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    completed = subprocess.run([sys.executable, "-c", TORCH_SCRIPT, str(out)], env=env, cwd=ROOT,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(out.read_text())
    for key in ("hard_sigmoid torch.float32", "hard_sigmoid torch.bfloat16", "minimum torch.float32",
                "minimum torch.bfloat16", "made once", "at every call", "made once again"):
        assert result[key] is True, key
    # Keras' own (Adam's beta_1 and beta_2, its step count, the loss tracker) are left; none of ours.
    assert result["made by prednet_keras"] == []
    assert result["made in a step"] <= 8


@pytest.mark.skipif(keras.backend.backend() == "torch", reason="the other backends' behaviour")
def test_elsewhere_the_numbers_go_to_the_ops_as_they_are():
    x = keras.ops.ones((2,))
    assert device_constants.scalar(0.5, x) == 0.5
    made = []
    for _ in range(2):
        device_constants.cached("key", x, lambda: made.append(1))
    assert made == [1, 1]  # made at every call: a traced program keeps its constants itself
