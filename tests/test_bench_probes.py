"""The probes of prednet_keras.bench.probes, each run as users run it (`python -m`, a fresh process on the CPU)
at the smallest settings, and what it writes read back; and their --help, which imports no framework. The two
on JAX compile a window model (10-30 s): slow, in the full suite only."""

import importlib.util
import json
import math
import os
import re
import subprocess
import sys

import pytest

PROBES = ("seed_batching", "chainer_unroll", "torch_constants_ab", "torch_scalar_operands", "torch_compile_times",
          "torch_step_waits")
FRAMEWORKS = ("keras", "tensorflow", "jax", "torch")


def run_probe(name, *args, backend, cwd):
    env = {**os.environ, "KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-m", f"prednet_keras.bench.probes.{name}", *map(str, args)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def positive(value):
    return isinstance(value, float) and math.isfinite(value) and value > 0


def test_every_probes_help_imports_no_framework(tmp_path):
    program = (
        "import runpy, sys\n"
        f"for name in {PROBES!r}:\n"
        "    sys.argv = [name, '--help']\n"
        "    try:\n"
        "        runpy.run_module('prednet_keras.bench.probes.' + name, run_name='__main__')\n"
        "    except SystemExit as stop:\n"
        "        assert stop.code == 0, (name, stop.code)\n"
        f"print('FRAMEWORKS', [m for m in {FRAMEWORKS!r} if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("usage: python -m prednet_keras.bench.probes.") == len(PROBES), done.stdout
    assert "FRAMEWORKS []" in done.stdout, done.stdout[-500:]


@pytest.mark.slow  # 8-15 s on 2 shared cores: JAX compiles the window
def test_chainer_unroll_times_each_update_and_keeps_every_loss(tmp_path):
    """The study's window update unrolled, 2 timed updates of a 2-frame window on 8x8 frames: the timings and
    one [mse, window loss] per update (the first, compiling, included), and no second run over the file."""
    args = ["--unroll", "--updates", 2, "--size", "8x8", "--stack-sizes", "3,4", "--bprop", 2, "--seed", 3,
            "--json", "unrolled.json"]
    done = run_probe("chainer_unroll", *args, backend="jax", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "unrolled.json").read_text())
    assert result["config"] == {"unroll": True, "updates": 2, "size": [8, 8], "stack_sizes": "3,4", "bprop": 2,
                                "seed": 3}
    assert positive(result["first_update_seconds"])
    assert len(result["update_seconds"]) == 3 and all(map(positive, result["update_seconds"]))
    assert result["update_seconds"][0] == result["first_update_seconds"]
    timed_ms = [seconds * 1000 for seconds in result["update_seconds"][1:]]
    ms = result["update_ms"]
    assert all(map(positive, ms.values()))
    assert math.isclose(ms["min"], min(timed_ms)) and math.isclose(ms["max"], max(timed_ms))
    assert ms["min"] <= ms["median"] <= ms["max"]
    assert len(result["losses"]) == 3 and all(len(pair) == 2 and all(map(positive, pair))
                                                for pair in result["losses"])
    environment = result["environment"]
    assert environment["backend"] == "jax" and environment["jax"] and environment["device"]
    assert "unroll True: first update" in done.stdout and str(result["losses"][-1]) in done.stdout
    again = run_probe("chainer_unroll", *args, backend="jax", cwd=tmp_path)
    assert again.returncode != 0 and "already exists; not overwritten" in again.stderr
    assert json.loads((tmp_path / "unrolled.json").read_text()) == result


def test_torch_constants_ab_times_both_forms_in_every_round(tmp_path):
    """Whole training steps of a 2-layer PredNet, 2 rounds of 2 steps per form: one line per form with its
    median, minimum and every round's figure."""
    done = run_probe("torch_constants_ab", "3,4", 2, 1, 2, 2, backend="jax", cwd=tmp_path)  # torch whatever it says
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 2, done.stdout
    for line, label in zip(lines, ("made once (after)", "made at every call (before)")):
        match = re.fullmatch(re.escape(label) + r" +ms/step median ([\d.]+)  min ([\d.]+)  every round \[(.*)\]",
                             line)
        assert match, line
        median, least = float(match[1]), float(match[2])
        rounds = [float(value) for value in match[3].split(",")]
        assert len(rounds) == 2 and all(map(positive, rounds))
        assert 0 < least <= median and math.isfinite(median)


def test_torch_scalar_operands_times_each_form_old_and_new(tmp_path):
    done = run_probe("torch_scalar_operands", "--rounds", 2, "--calls", 3, "--json", "operands.json",
                     backend="torch", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "operands.json").read_text())
    assert result["command"] == ["python", "-m", "prednet_keras.bench.probes.torch_scalar_operands",
                                 "--rounds", "2", "--calls", "3"]
    assert set(result["versions"]) == {"keras", "torch"}
    forms = ["hard sigmoid", "constant vector (10 values)", "minimum with pixel_max", "dtype check"]
    assert list(result["per_call"]) == forms
    for form in forms:
        assert set(result["per_call"][form]) == {"old", "new"}
        for times in result["per_call"][form].values():
            assert all(map(positive, times.values())), (form, times)
            assert times["min_us"] <= times["median_us"] <= times["max_us"]
        assert form in done.stdout


def test_torch_scalar_operands_refuses_another_backend(tmp_path):
    done = run_probe("torch_scalar_operands", "--rounds", 1, "--calls", 1, backend="jax", cwd=tmp_path)
    assert done.returncode == 2 and "set KERAS_BACKEND=torch" in done.stderr, done.stderr[-3000:]


@pytest.mark.slow
def test_seed_batching_keeps_each_seeds_numbers_one_program_and_stateless(tmp_path):
    """`python -m prednet_keras.bench.probes.seed_batching` on a tiny window model (2 seeds, 3 updates): Keras'
    stateless step, one seed at a time and the seeds side by side in one program, gives every loss and weight
    of each seed's own run bit for bit (docs/benchmarks.md, "Seeds in one program instead of one process
    each?"); vmap's figures are reported beside them."""
    done = run_probe("seed_batching", "--seeds", 2, "--size", "8x8", "--stack-sizes", "3,4", "--bprop", 2,
                     "--updates", 3, backend="jax", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout[done.stdout.index("{"):])
    assert (result["seeds"], result["compared"], result["updates"], result["device"]) == (2, 2, 3, "cpu")
    for way in ("stateless", "one program"):
        assert result[way]["identical"], (way, result[way])
        assert result[way]["max_weight_difference"] == 0.0 and result[way]["max_relative_loss_difference"] == 0.0
    assert result["vmap"]["seeds"] == 2 and result["vmap"]["max_weight_difference"] >= 0.0
    # The protocol's own step timed beside the stateless one, over the same updates.
    keras_step = result["keras_step"]
    assert keras_step["seeds"] == 2 and positive(keras_step["seconds_per_seed_update"])
    assert keras_step["first_update_seconds"] > keras_step["seconds_per_seed_update"]


# Slow: TorchDynamo traces a compiled PredNet step twice over (about 40 s on 2 cores), no code generated.
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_torch_compile_times_times_the_step_traced_once(tmp_path):
    done = run_probe("torch_compile_times", "--json", tmp_path / "times.json", "--no-inductor", backend="torch",
                     cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    times = json.loads((tmp_path / "times.json").read_text())
    assert times["inductor"] is False and times["graph_breaks"] == 0
    assert positive(times["first_call_seconds"]) and times["second_call_seconds"] < times["first_call_seconds"]
    # TorchDynamo traced (two frames: the forward pass with the loss, the update) and never started over.
    assert times["phases"]["_compile.compile_inner"]["calls"] == 2 and positive(times["phases"]["bytecode_tracing"]["seconds"])
    assert "compile_attempt_1" not in times["phases"]
    assert "first call" in done.stdout


def test_torch_step_waits_times_every_loop_in_every_round(tmp_path):
    # On the CPU (a smoke test of the loops): a step is done when it returns, so no loop reads async-safe
    # and no synchronizing call is counted (that needs a GPU).
    args = ["--device", "cpu", "--batch-sizes", "2", "--size", "8x8", "--stack-sizes", "3,4", "--nt", 3,
            "--steps", 2, "--rounds", 2, "--json", "waits.json"]
    done = run_probe("torch_step_waits", *args, backend="torch", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "waits.json").read_text())
    assert result["command"] == ["python", "-m", "prednet_keras.bench.probes.torch_step_waits", *map(str, args)]
    assert set(result["versions"]) == {"keras", "torch"} and result["gpu"] is None
    (batch,) = result["batches"]
    variants = ["as-is", "async-callbacks", "device-batches", "both"]
    assert batch["async_safe"] == dict.fromkeys(variants, False)
    assert list(batch["median_step_ms"]) == variants
    assert all(len(times) == 2 and all(map(positive, times)) for times in batch["median_step_ms"].values())
    assert all(map(positive, batch["frames_per_s"].values()))
    assert not any(key.startswith("sync_sites") for key in batch)
