"""On eager torch, PredNet concatenates its gates' kernels and biases once per sequence instead of at every
time step (PredNetCell.weights_once) and gives its convolutions and pooling channels_first views
instead of letting Keras copy their inputs (layers/feature_maps.py), and takes the gates'
activation once over their fused output and the errors' activation once over both halves, lays every
kernel out once per sequence as torch's convolution reads it, upsamples the rows by a repeat, and hands its
convolutions channels_first views that it carries from step to step, and computes the same bits: outputs and
every weight's gradient, in float32 and in mixed_bfloat16, in every output mode, extrapolating, with its
states returned and with channels_first data. Elsewhere it changes nothing."""

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
    kernels = [kernel for kernel, _ in shared["gates"] + shared["a"] + shared["ahat"]] if once else []
    channels_last = bool(kernels) and all(kernel.permute(3, 2, 0, 1).is_contiguous(memory_format=torch.channels_last)
                                          for kernel in kernels)
    return {"out": bits(out), "grads": grads, "channels_last kernel": channels_last,
            **{name: count.ops[f"aten.{name}"] for name in ("cat", "clone", "clamp", "relu", "permute")}}

def outputs_and_gradients(once, output_mode, policy="float32", **options):
    # Every output and every weight's gradient (of a random sum of all outputs), as bits.
    device_constants.eager_torch = lambda: once
    keras.config.set_dtype_policy(policy)
    layer = lotter.PredNet(stack_sizes=(3, 4, 8), R_stack_sizes=(3, 4, 8), A_filt_sizes=(3, 3),
                           Ahat_filt_sizes=(3, 3, 3), R_filt_sizes=(3, 3, 3), output_mode=output_mode, **options)
    rng = np.random.default_rng(2)
    frames = torch.tensor(rng.random((2, 4, 8, 8, 3), dtype=np.float32))
    if options.get("data_format") == "channels_first":
        frames = frames.permute(0, 1, 4, 2, 3).contiguous()
    layer.build(tuple(frames.shape))
    layer.set_weights([rng.normal(0, 0.3, size=w.shape).astype(np.float32) for w in layer.weights])
    found = layer(frames)
    found = list(found) if isinstance(found, (list, tuple)) else [found]
    sum(((o * torch.tensor(rng.normal(size=tuple(o.shape)), dtype=o.dtype)).sum() for o in found)).backward()
    return ([[list(o.shape), bits(o)] for o in found],
            [bits(w.value.grad) if w.value.grad is not None else None for w in layer.trainable_weights])

VARIANTS = {
    "prediction, extrapolating": ("prediction", dict(extrap_start_time=2, return_sequences=True)),
    "all, extrapolating from the first step, rolled": ("all", dict(extrap_start_time=1, return_sequences=True)),
    "error, states returned": ("error", dict(return_state=True, return_sequences=True)),
    "prediction, last step and states": ("prediction", dict(return_state=True)),
    "E1, channels_first data": ("E1", dict(return_sequences=True, data_format="channels_first")),
    "R2, backwards, extrapolating, states": ("R2", dict(return_sequences=True, go_backwards=True,
                                                        extrap_start_time=1, return_state=True)),
    "A1": ("A1", dict(return_sequences=True)),
    "Ahat0, mixed_bfloat16, extrapolating": ("Ahat0", dict(return_sequences=True, extrap_start_time=2,
                                                           policy="mixed_bfloat16")),
}

result = {"variants": {name: outputs_and_gradients(True, mode, **dict(options)) ==
                       outputs_and_gradients(False, mode, **dict(options))
                       for name, (mode, options) in VARIANTS.items()}}
for policy in ("float32", "mixed_bfloat16"):
    once, every = run(policy, True), run(policy, False)
    result[policy] = {"same outputs": once["out"] == every["out"], "same gradients": once["grads"] == every["grads"],
                      "gradients": len(once["grads"]), "cat once": once["cat"], "cat every step": every["cat"],
                      "clone once": once["clone"], "clone every step": every["clone"],
                      "clamp once": once["clamp"], "clamp every step": every["clamp"],
                      "relu once": once["relu"], "relu every step": every["relu"], "permute once": once["permute"],
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
    # The transposes (each a permute) of 5 steps: in each, Keras' permute of each of the 8 convolutions'
    # kernels, and ours: each gate convolution's input r and its output (3 x 2), each upsampling's result (2),
    # each prediction convolution's input r (3), and the "all" output's image (1), where every convolution and
    # pooling had its input and output transposed (8 x 2 + 2 x 2, and the output's 1). Once a sequence: each of
    # the 17 kernels laid out (4 x 3 gates, 2 A, 3 Ahat: a transpose each, and one of each of the 8 results),
    # the frames and the 3 errors' states into the steps and those states out of them (1 + 3 + 3), and the time
    # loop's 2 of its own.
    assert found["permute once"] == 5 * (8 + 3 * 2 + 2 + 3 + 1) + (17 + 8) + (1 + 3 + 3) + 2


def test_the_same_bits_in_every_output_mode_extrapolating_and_with_states(torch_result):
    assert torch_result["variants"] == {name: True for name in torch_result["variants"]}


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
