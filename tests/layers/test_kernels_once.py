"""On eager torch, PredNet concatenates its gates' kernels and biases once per sequence instead of at every
time step (PredNetCell.weights_once) and gives its convolutions and pooling channels_first views
instead of letting Keras copy their inputs (layers/feature_maps.py), and takes the gates'
activation once over their fused output and the errors' activation once over both halves, lays every
kernel out once per sequence as torch's convolution reads it, and upsamples the rows by a repeat, and computes the same bits: outputs and every weight's gradient, in
float32 and in mixed_bfloat16. Elsewhere it changes nothing."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TORCH_SCRIPT = r"""
import json, sys
import numpy as np, keras, torch
from prednet_keras.layers import device_constants, lotter
from prednet_keras.bench.probes.torch_ops_per_step import operation_counter

def bits(t):
    return t.detach().float().numpy().view(np.uint32).tolist()

def run(policy, once):
    device_constants.eager_torch = lambda: once
    keras.config.set_dtype_policy(policy)
    layer = lotter.PredNet(stack_sizes=(3, 4, 8), R_stack_sizes=(3, 4, 8), A_filt_sizes=(3, 3),
                           Ahat_filt_sizes=(3, 3, 3), R_filt_sizes=(3, 3, 3), output_mode="all",
                           return_sequences=True, unroll=True)
    rng = np.random.default_rng(1)
    frames = torch.tensor(rng.random((2, 5, 8, 8, 3), dtype=np.float32))
    layer.build(tuple(frames.shape))
    layer.set_weights([rng.normal(0, 0.3, size=w.shape).astype(np.float32) for w in layer.weights])
    with operation_counter() as count:
        out = layer(frames)
    upstream = torch.tensor(rng.normal(size=tuple(out.shape)), dtype=out.dtype)
    (out * upstream).sum().backward()
    grads = [bits(w.value.grad) for w in layer.trainable_weights]
    # The kernels as Keras' torch convolution permutes them: channels_last kernels on eager torch.
    shared = layer.cell.weights_once() if once else None
    kernels = [gates[0] for gates in shared["gates"]] + shared["a"] + shared["ahat"] if once else []
    channels_last = bool(kernels) and all(kernel.permute(3, 2, 0, 1).is_contiguous(memory_format=torch.channels_last)
                                          for kernel in kernels)
    return {"out": bits(out), "grads": grads, "channels_last kernel": channels_last,
            **{name: count.ops[f"aten.{name}"] for name in ("cat", "clone", "clamp", "relu")}}

result = {}
for policy in ("float32", "mixed_bfloat16"):
    once, every = run(policy, True), run(policy, False)
    result[policy] = {"same outputs": once["out"] == every["out"], "same gradients": once["grads"] == every["grads"],
                      "gradients": len(once["grads"]), "cat once": once["cat"], "cat every step": every["cat"],
                      "clone once": once["clone"], "clone every step": every["clone"],
                      "clamp once": once["clamp"], "clamp every step": every["clamp"],
                      "relu once": once["relu"], "relu every step": every["relu"],
                      "channels_last kernel": once["channels_last kernel"]}
json.dump(result, sys.stdout)
"""


@pytest.fixture(scope="module")
def torch_result():
    pytest.importorskip("torch")
    env = {**os.environ, "KERAS_BACKEND": "torch", "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-c", TORCH_SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_the_same_bits_with_the_kernels_concatenated_once(torch_result, policy):
    found = torch_result[policy]
    assert found["same outputs"] and found["same gradients"] and found["gradients"] == 34
    # 3 layers, 5 steps: every step's gate kernel and bias (2 x 3 x 5 = 30) against 2 x 3 once, and once the
    # copy of each A and Ahat kernel laid out (2 + 3). The other concatenations (each step's LSTM input and
    # errors, the "all" output) are there in both.
    assert found["cat every step"] - found["cat once"] == 2 * 3 * 5 - 2 * 3 - (2 + 3)
    # Keras' copies, forward only (their backward copies nothing): 2 of each convolution's input and 1 of its
    # kernel, 8 convolutions a step (3 gates, 3 predictions, 2 targets), and 1 of each of the 2 poolings' inputs.
    # Once: none of those; the one clone of each of the 2 upsamplings a step is its rows' repeat (a copy the
    # plain form's second stack makes too).
    assert found["clone every step"] == 5 * (3 * 8 + 2) and found["clone once"] == 5 * 2
    # Keras 2's hard sigmoid, one clamp per gate (3 gates, 3 layers, 5 steps), once over the fused output; the
    # errors' rectified halves, one relu per half (3 layers), once over both.
    assert (found["clamp every step"], found["clamp once"]) == (3 * 3 * 5, 3 * 5)
    assert found["relu every step"] - found["relu once"] == 3 * 5
    # Every kernel laid out as cuDNN and oneDNN read a kernel for a channels_last input
    # (feature_maps.concatenated_kernel).
    assert found["channels_last kernel"]


def test_other_backends_build_the_same_program():
    """Under this process's backend (TensorFlow here, JAX on the GPU machine) the steps share nothing."""
    import keras

    from prednet_keras.layers.lotter import PredNetCell

    if keras.backend.backend() == "torch":
        pytest.skip("this process runs torch")
    cell = PredNetCell(stack_sizes=(3, 4), R_stack_sizes=(3, 4), A_filt_sizes=(3,), Ahat_filt_sizes=(3, 3),
                       R_filt_sizes=(3, 3))
    cell.build((None, 8, 8, 3))
    assert cell.weights_once() is None
