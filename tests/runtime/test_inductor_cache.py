"""Inductor's compilation cache for compiled torch processes (runtime/compile_cache.py): where a process gets it,
and the line saying how much of a first step's compiling it spared."""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from prednet_keras import runtime
from prednet_keras.runtime import compile_cache
from prednet_keras.runtime.environment import environment_for, relevant_environment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def compile_cache_default():
    import getpass
    import tempfile

    return os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}")


def test_a_parent_that_imported_keras_on_torch_still_gives_its_children_the_shared_folder(tmp_path):
    """`import keras` under KERAS_BACKEND=torch makes torch write its default folder into os.environ; a compiled
    child started from such a process (prednet-bench with KERAS_BACKEND=torch exported) gets the shared one."""
    pytest.importorskip("torch")
    program = textwrap.dedent("""
        import json, os
        import keras
        from prednet_keras import runtime
        from prednet_keras.runtime.environment import environment_for
        written = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        env = environment_for(runtime.RuntimeConfig(backend="torch", device="cpu", xla=True), dict(os.environ))
        print(json.dumps({"written": written, "child": env["TORCHINDUCTOR_CACHE_DIR"]}))
    """)
    environment = {key: value for key, value in os.environ.items() if key != "TORCHINDUCTOR_CACHE_DIR"}
    environment.update(KERAS_BACKEND="torch", KERAS_HOME=str(tmp_path / "home"), PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=environment,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["written"] == compile_cache_default()  # torch's doing, as seen in prednet-bench's parent
    assert found["child"] == str(tmp_path / "home" / "compiled" / "torchinductor")


def test_a_compiled_torch_process_gets_the_shared_folder_and_records_it(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras-home"))  # the package's cache folder, as the downloads'
    base = {}
    env = environment_for(runtime.RuntimeConfig(backend="torch", device="cpu", xla=True), base)
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "keras-home" / "compiled" / "torchinductor")
    assert relevant_environment(env)["TORCHINDUCTOR_CACHE_DIR"] == env["TORCHINDUCTOR_CACHE_DIR"]  # in the manifest
    # A folder the user names is kept; eager torch and the other backends get none (their records say nothing).
    own = environment_for(runtime.RuntimeConfig(backend="torch", device="cpu", xla=True),
                          {**base, "TORCHINDUCTOR_CACHE_DIR": "/somewhere/else"})
    assert own["TORCHINDUCTOR_CACHE_DIR"] == "/somewhere/else"
    # Inductor's own default is what torch itself writes into the environment (below), not a choice: replaced.
    default = environment_for(runtime.RuntimeConfig(backend="torch", device="cpu", xla=True),
                              {**base, "TORCHINDUCTOR_CACHE_DIR": compile_cache_default()})
    assert default["TORCHINDUCTOR_CACHE_DIR"] == env["TORCHINDUCTOR_CACHE_DIR"]
    for config in (runtime.RuntimeConfig(backend="torch", device="cpu"),
                   runtime.RuntimeConfig(backend="torch", device="cpu", xla=False),
                   runtime.RuntimeConfig(backend="jax", device="cpu", xla=True),
                   runtime.RuntimeConfig(backend="tensorflow", device="cpu", xla=True)):
        assert "TORCHINDUCTOR_CACHE_DIR" not in environment_for(config, base), config


def test_the_line_says_what_came_from_the_cache():
    assert compile_cache.inductor_cache_line(0, 0, "/c") is None
    assert compile_cache.inductor_cache_line(8, 0, "/c") == (
        "torch.compile: all 8 graphs loaded from the cache in /c (tracing is not cached).")
    assert compile_cache.inductor_cache_line(5, 3, None) == (
        "torch.compile: 5 of 8 graphs loaded from the cache in Inductor's default folder; the 3 compiled now are "
        "kept there for the next process.")


_COMPILE_ONCE = textwrap.dedent("""
    import json, sys
    import torch
    from prednet_keras.session import torch_compile
    step = torch.compile(lambda x: torch.tanh(x) * 2.0 + x.sum())
    step(torch.ones(4, 3))
    print(json.dumps({"use": torch_compile.inductor_cache_use(), "line": torch_compile.inductor_cache_line()}))
""")


# Slow: Inductor generates and compiles C++ for a small function, twice in fresh processes (about 20-60 s here).
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_a_later_process_loads_what_the_first_compiled(tmp_path):
    folder = tmp_path / "inductor"
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(folder), PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    results = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _COMPILE_ONCE], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    first, second = results
    assert first["use"]["hits"] == 0 and first["use"]["misses"] >= 1 and first["use"]["folder"] == str(folder)
    assert second["use"] == {"hits": first["use"]["misses"], "misses": 0, "folder": str(folder)}
    assert second["line"] == f"torch.compile: all {second['use']['hits']} graphs loaded from the cache in {folder} " \
                             "(tracing is not cached)."
