"""The compilation caches that spare a later process the compiling: JAX's persistent cache, shared by the training
processes of one study, and PyTorch Inductor's, shared by every compiled torch process of the user (below). Where
they live and the environment that points a process at them. No framework at import.

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


# ------------------------------------------------------------------------------------------ PyTorch Inductor
# torch.compile's first step traces Keras' Python (TorchDynamo: not cached by torch) and then generates and
# compiles code for each graph (Inductor; its FX graph and AOT autograd caches keep that by a key of the graph,
# the inputs' shapes and the versions). Measured on a shared 2-core machine (a 3-layer PredNet at 16x16, nt 4,
# prednet-train; docs/benchmarks/cpu2-inductor-cache-2026-12-06/): a first step of 320 s with an empty cache, 58 s
# with the cache the first process left; the rest is tracing. Inductor's own default folder is
# /tmp/torchinductor_USER, gone after a reboot; a compiled torch process here gets a folder in the package's cache
# instead (Keras' convention, as the downloads), unless the user's environment names one. The folder is in the
# run's recorded environment.
INDUCTOR_DIR_ENV = "TORCHINDUCTOR_CACHE_DIR"


def inductor_folder():
    """The Inductor cache folder compiled torch processes share: $KERAS_HOME/compiled/torchinductor."""
    from prednet_keras.files.downloads import cache_dir

    return cache_dir("compiled", "torchinductor")


def inductor_environment(runtime_config, base):
    """{TORCHINDUCTOR_CACHE_DIR: the shared folder} for a torch process (environment.torch_environment) that
    compiles (`xla` on) and whose environment `base` names no folder of its own; {} otherwise (eager runs'
    records say nothing of a cache).

    Inductor's own default folder in `base` is not the user's choice: torch writes it into its process's
    environment when it first looks its cache up, which `import keras` on torch does (KERAS_BACKEND=torch), and
    children inherit it."""
    named = base.get(INDUCTOR_DIR_ENV)
    if not runtime_config.xla or (named and not _is_inductor_default(named)):
        return {}
    return {INDUCTOR_DIR_ENV: os.fspath(inductor_folder())}


def _is_inductor_default(folder):
    """Whether `folder` is Inductor's default, TMPDIR/torchinductor_USER (torch's cache_dir_utils, mirrored here
    so that nothing imports torch to ask)."""
    import getpass
    import re
    import tempfile

    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
    default = os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))
    return os.path.abspath(folder) == os.path.abspath(default)


def inductor_cache_line(hits, misses, folder):
    """The line a compiled torch process prints after its first step: how many graphs came from Inductor's cache.

    Args:
        hits, misses: the graphs Inductor found in its cache and the graphs it compiled
            (session.torch_compile.inductor_cache_use).
        folder: the cache folder (TORCHINDUCTOR_CACHE_DIR), or None for Inductor's default.

    Returns:
        The line, or None when nothing was compiled (no graph looked up).
    """
    if hits + misses == 0:
        return None
    where = folder or "Inductor's default folder"
    if misses == 0:
        return f"torch.compile: all {hits} graphs loaded from the cache in {where} (tracing is not cached)."
    return (f"torch.compile: {hits} of {hits + misses} graphs loaded from the cache in {where}; the {misses} "
            "compiled now are kept there for the next process.")
