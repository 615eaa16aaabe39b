"""JAX's persistent compilation cache, shared by the training processes of one study: where it lives and the
environment that points a JAX training process at it. No framework at import.

Why: the runs of one study configuration compile the same programs (same model, shapes, flags and device).
On an H200, 8 processes of the paper's protocol compiling at once spent a median 18.7 s of their 71 s in the
first update. With JAX_COMPILATION_CACHE_DIR set, JAX writes each compiled executable into that folder and a
later process loads it instead of compiling again.

What sharing changes, and what it does not:
- JAX's cache key covers the program, the compile options, XLA_FLAGS (so the deterministic and the
  non-deterministic arm never share an entry), the device kind and the jax/jaxlib versions. A loaded executable
  runs the same instructions as the one compiled by the process that wrote it.
- On a GPU, XLA picks convolution algorithms by timing them while it compiles; an executable from the cache
  carries the picks of the process that wrote it. Runs sharing a cache therefore share those picks, where
  processes compiling alone might pick differently from one another. The runs record the cache (the
  JAX_COMPILATION_CACHE_DIR in each manifest's environment), and `prednet-study run --no-compile-cache` compiles
  in every process.
- Setting a size limit is what makes the cache safe for processes starting at once: with one, JAX reads and
  writes entries under a file lock (filelock); without one, an entry is written in place and a process starting
  meanwhile could read half of it.
- A damaged entry (a process killed while writing it) costs time, not results: JAX warns in the run's log
  ("Error reading persistent compilation cache entry"), compiles, and goes on. It keeps the damaged entry, so
  later runs compile too until the folder is deleted; the folder holds nothing else and may be deleted at any
  time between studies.
"""

import os
from pathlib import Path

# The cache folder inside a study folder.
FOLDER = ".jax-compilation-cache"
# The limit JAX evicts the least recently used entries above; a study's programs take tens of MB.
MAX_BYTES = 2 * 1024**3

# The variables the training process gets, also recorded with each run (environment.RECORDED_ENVIRONMENT).
DIR_ENV = "JAX_COMPILATION_CACHE_DIR"
MAX_SIZE_ENV = "JAX_COMPILATION_CACHE_MAX_SIZE"


def folder(study_dir):
    """The cache folder of the study in `study_dir`."""
    return Path(study_dir) / FOLDER


def applies(runtime_config):
    """Whether a training process of `runtime_config` can use the cache: JAX only (the other backends have
    no such cache; Backend.compilation_cache)."""
    from prednet_keras import backends

    return backends.named(runtime_config.backend).compilation_cache


def environment(study_dir, runtime_config):
    """The variables that give a training process of `runtime_config` the study's cache: {} unless it
    applies (the other runs' manifests then say nothing of one)."""
    if not applies(runtime_config):
        return {}
    return {DIR_ENV: os.fspath(folder(study_dir).resolve()), MAX_SIZE_ENV: str(MAX_BYTES)}


# A training process that finds this variable waits, once its framework has started, until the file it names
# exists: the study's executor starts the waiting runs of a configuration while the configuration's first run
# compiles, and creates the file once that run's program is in the cache. The start (importing the framework,
# making the device's context: 6-9 s per process on the H200) then overlaps the compilation instead of
# following it.
GATE_ENV = "PREDNET_START_GATE"


def gate_environment(gate_path):
    """The variable that holds a training process at `gate_path` (see GATE_ENV)."""
    return {GATE_ENV: os.fspath(gate_path)}


def wait_at_gate(say=None, poll_seconds=0.1):
    """In a training process: waits until the file named by GATE_ENV exists; returns at once without one.

    Args:
        say: called once with a line for the log when the process has to wait.
        poll_seconds: how often the file is looked for.

    Returns:
        The seconds waited.
    """
    import time

    gate = os.environ.get(GATE_ENV)
    if not gate or os.path.exists(gate):
        return 0.0
    if say is not None:
        say("Waiting for this configuration's first run to put its compiled program in the study's cache ...")
    started = time.perf_counter()
    while not os.path.exists(gate):
        time.sleep(poll_seconds)
    return time.perf_counter() - started
