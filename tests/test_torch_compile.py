"""PredNet training compiled with torch.compile (Keras' jit_compile=True on the torch backend)."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Slow: compiles a PredNet step with torch.compile in a fresh torch process (about 30 s on 2 cores).
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_compiled_training_matches_eager_and_never_recompiles(tmp_path):
    result_path = tmp_path / "result.json"
    env = dict(os.environ, KERAS_BACKEND="torch", PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    completed = subprocess.run(
        [sys.executable, "-m", "tests.torch_compile_worker", str(result_path), "4"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(result_path.read_text())
    eager, compiled, graphs = result["eager"], result["compiled"], result["graphs"]
    # It trains, and computes what the eager model computes from the same weights.
    assert compiled[-1] < compiled[0]
    assert compiled == pytest.approx(eager, rel=1e-5)
    # The first step compiles two graphs: the forward pass with the loss, and the weight
    # update; loss.backward() runs between them (AOT autograd compiles the backward of the
    # first graph). Nothing after it.
    assert graphs[0] == 2
    assert graphs == [graphs[0]] * len(graphs), f"recompiled after the first step: {graphs}"
    # Traced once: no graph break, so TorchDynamo never started a frame's analysis over. Keras'
    # own compiled step breaks at loss.backward() and starts over (twice: its function, then
    # train_step as a frame of its own), and computes the same losses.
    assert (result["graph_breaks"], result["restarted_analyses"]) == (0, 0)
    assert result["keras_step_graph_breaks"] >= 1 and result["keras_step_restarted_analyses"] >= 1
    assert compiled == pytest.approx(result["keras_step"], rel=1e-6)
    # The study's autoencoder, compiled by its protocol: the same two parts, compiled in its first step, nothing
    # after it (Keras' own step broke the graph 3 times there and compiled again at its second step).
    assert result["autoencoder_graphs"] == [2] * 4 and result["autoencoder_graph_breaks"] == 0
    # What a forward pass assigns (here seed generators' states) the two parts assign after the backward pass:
    # the same values as Keras' step, which assigns them in place, and the next step sees them.
    seeds = result["assigned_two_parts_seeds"]
    assert len({str(seed) for seed in seeds}) == len(seeds), f"a seed generator stood still: {seeds}"
    assert seeds == result["assigned_keras_step_seeds"]
    assert result["assigned_two_parts_losses"] == pytest.approx(result["assigned_keras_step_losses"], rel=1e-6)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_cudagraph_skips_are_counted_only_where_cuda_graphs_were_asked_for(monkeypatch):
    from torch._inductor import config
    from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

    from prednet_keras.session import torch_compile

    monkeypatch.setattr(config.triton, "cudagraphs", False)
    assert torch_compile.cudagraph_skips() is None
    monkeypatch.setattr(config.triton, "cudagraphs", True)  # what TORCHINDUCTOR_CUDAGRAPHS=1 sets
    before = torch_compile.cudagraph_skips()
    # Inductor's own report of a graph it ran without CUDA graphs (on a GPU: a CPU tensor, a mutated input, ...).
    log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to a test")
    assert torch_compile.cudagraph_skips() == before + 1
