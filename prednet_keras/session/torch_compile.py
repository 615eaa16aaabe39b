"""What a process compiled with torch.compile (the torch backend's jit_compile=True): how many graphs
torch compiled, how many of them came from Inductor's cache, and how many Inductor ran without the
CUDA graphs asked for. The training step it compiles is the models' (models.torch_training_step).

This module imports torch only when the torch backend is in use.
"""

from prednet_keras import backends

__all__ = ["compiled_graphs", "cudagraph_skips", "inductor_cache_line", "inductor_cache_use"]


def compiled_graphs():
    """Graphs TorchDynamo has compiled in this process so far (first compilations and
    recompilations alike), or None when torch is not imported here."""
    if not backends.TORCH.imported():
        return None
    try:
        from torch._dynamo.utils import counters
    except Exception:  # a torch without dynamo
        return None
    return int(counters["stats"]["unique_graphs"])


def cudagraph_skips():
    """How many times Inductor has declined to run a compiled graph as a CUDA graph in this process, or None
    when torch is not imported here or Inductor's CUDA graphs are off (TORCHINDUCTOR_CUDAGRAPHS unset).

    Inductor gives each reason only in its logs, which are off by default; this count says whether a
    run that asked for CUDA graphs got them.
    """
    if not backends.TORCH.imported():
        return None
    try:
        from torch._dynamo.utils import counters
        from torch._inductor import config
    except Exception:  # a torch without Inductor
        return None
    if not config.triton.cudagraphs:
        return None
    return int(counters["inductor"]["cudagraph_skips"])


def inductor_cache_use():
    """{"hits", "misses", "folder"}: the graphs Inductor looked up in its cache in this process so far and found
    or compiled (runtime.compile_cache; folder: TORCHINDUCTOR_CACHE_DIR, None for Inductor's default), or None when
    torch is not imported here or compiled nothing."""
    if not backends.TORCH.imported():
        return None
    try:
        from torch._dynamo.utils import counters
    except Exception:  # a torch without dynamo
        return None
    import os

    from prednet_keras.runtime import compile_cache

    inductor = counters["inductor"]
    hits, misses = int(inductor["fxgraph_cache_hit"]), int(inductor["fxgraph_cache_miss"])
    if hits + misses == 0:
        return None
    return {"hits": hits, "misses": misses, "folder": os.environ.get(compile_cache.INDUCTOR_DIR_ENV) or None}


def inductor_cache_line():
    """The line a process prints after its first compiled step (compile_cache.inductor_cache_line), or None."""
    from prednet_keras.runtime import compile_cache

    use = inductor_cache_use()
    return None if use is None else compile_cache.inductor_cache_line(use["hits"], use["misses"], use["folder"])
