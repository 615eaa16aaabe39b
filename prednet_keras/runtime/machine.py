"""The environment fingerprint of a run: the machine (OS, CPU, memory, GPUs), the software (Python, package
versions, BLAS) and the recorded environment variables. Imports no framework: versions come from package
metadata, GPU details from nvidia-smi and, after runtime.configure, from the active backend."""

import importlib
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys

from prednet_keras import backends
from prednet_keras.runtime.environment import relevant_environment
from prednet_keras.runtime.process import available_cpus, configured


def bf16_support(device):
    """How this machine computes bfloat16: recorded beside a mixed precision."""
    if device == "gpu":
        return "GPU"
    cpuinfo = _read_text("/proc/cpuinfo") or ""
    flags = set((re.findall(r"^flags\s*:\s*(.+)$", cpuinfo, re.M) or [""])[0].split())
    native = [name for flag, name in (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512-BF16")) if flag in flags]
    if native:
        return "CPU with bfloat16 instructions (" + ", ".join(native) + ")"
    return "CPU without bfloat16 instructions: converted to and from float32, often slower than float32"


def _read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return None


def _cpu_info():
    info = {
        "machine": platform.machine(),
        "logical_cores": os.cpu_count(),
        "available_cores": available_cpus(),
    }
    cpuinfo = _read_text("/proc/cpuinfo")
    if cpuinfo:
        models = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
        info["model"] = models[0].strip() if models else platform.processor()
        cores = set()
        physical = core = None
        for line in cpuinfo.splitlines() + [""]:
            if line.startswith("physical id"):
                physical = line.split(":", 1)[1].strip()
            elif line.startswith("core id"):
                core = line.split(":", 1)[1].strip()
            elif not line.strip():
                if core is not None:
                    cores.add((physical, core))
                physical = core = None
        if cores:
            info["physical_cores"] = len(cores)
        flags = re.findall(r"^flags\s*:\s*(.+)$", cpuinfo, re.M)
        if flags:
            present = set(flags[0].split())
            info["simd"] = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16") if f in present]
    else:
        info["model"] = platform.processor() or None
    quota = _read_text("/sys/fs/cgroup/cpu.max")
    if quota:
        parts = quota.split()
        if len(parts) == 2 and parts[0] != "max":
            info["cgroup_cpu_limit"] = round(int(parts[0]) / int(parts[1]), 2)
    meminfo = _read_text("/proc/meminfo")
    if meminfo:
        match = re.search(r"^MemTotal:\s*(\d+) kB", meminfo, re.M)
        if match:
            info["memory_gib"] = round(int(match.group(1)) / 2**20, 1)
    return info


def _nvidia_smi():
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    out = {"path": exe}
    fields = ["index", "name", "driver_version", "memory.total", "compute_cap", "uuid"]
    for attempt in (fields, fields[:4]):  # old drivers lack compute_cap
        try:
            result = subprocess.run(
                [exe, f"--query-gpu={','.join(attempt)}", "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=20,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            out["error"] = str(error)
            return out
        if result.returncode == 0:
            out["gpus"] = [
                dict(zip(attempt, (v.strip() for v in line.split(","))))
                for line in result.stdout.strip().splitlines() if line.strip()
            ]
            break
        out["error"] = (result.stderr or result.stdout).strip()[-500:]
    try:
        text = subprocess.run([exe], capture_output=True, text=True, timeout=20).stdout
        match = re.search(r"CUDA Version:\s*([\d.]+)", text)
        if match:
            out["cuda_driver_version"] = match.group(1)
    except (OSError, subprocess.TimeoutExpired):
        pass
    return out


def _installed_versions():
    names = [
        "prednet-keras", "keras", "numpy", "h5py", "ml-dtypes", "tensorflow", "tensorflow-cpu",
        "jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda12-pjrt",
        "jax-cuda13-pjrt", "torch", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13",
    ]
    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def _blas_info():
    info = {}
    numpy = sys.modules.get("numpy") or importlib.import_module("numpy")
    try:
        config = numpy.show_config(mode="dicts")
        blas = config.get("Build Dependencies", {}).get("blas", {})
        info = {k: blas.get(k) for k in ("name", "version", "openblas configuration") if blas.get(k)}
    except Exception as error:  # numpy < 1.25
        info = {"error": str(error)}
    try:
        import threadpoolctl

        info["threadpools"] = [
            {k: p.get(k) for k in ("internal_api", "version", "num_threads", "threading_layer")}
            for p in threadpoolctl.threadpool_info()
        ]
    except ImportError:
        pass
    return info


def _framework_gpu_info():
    """GPU facts from the frameworks already imported and configured in this process."""
    info = {}
    config, _ = configured()
    if config is None:
        # Asking a framework about devices starts it; before configure() that
        # would fix its settings, so only configured processes ask.
        return info
    backend = backends.find(config.backend)
    try:
        if backend is not None:
            info[backend.name] = backend.gpu_info()
    except Exception as error:
        info["error"] = f"{type(error).__name__}: {error}"
    return info


def torch_gpu_info():
    """torch's CUDA, cuDNN and GPUs, for the fingerprint (Backend.gpu_info)."""
    import torch

    torch_info = {"cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    if torch.cuda.is_available():
        torch_info["devices"] = [
            {"name": torch.cuda.get_device_name(i),
             "capability": ".".join(map(str, torch.cuda.get_device_capability(i)))}
            for i in range(torch.cuda.device_count())
        ]
    return torch_info


def jax_gpu_info():
    """JAX's devices, cuDNN and CUDA runtime, for the fingerprint (Backend.gpu_info)."""
    import jax

    jax_info = {"devices": [f"{d.platform}:{d.id} {getattr(d, 'device_kind', '')}".strip() for d in jax.devices()]}
    try:
        from jax._src.lib import cuda_versions

        if cuda_versions is not None:
            jax_info["cudnn"] = cuda_versions.cudnn_get_version()
            jax_info["cuda_runtime"] = cuda_versions.cuda_runtime_get_version()
    except Exception:
        pass
    return jax_info


def tensorflow_gpu_info():
    """TensorFlow's CUDA and cuDNN builds and GPUs, for the fingerprint (Backend.gpu_info)."""
    import tensorflow as tf

    build = tf.sysconfig.get_build_info()
    tf_info = {"cuda": build.get("cuda_version"), "cudnn": build.get("cudnn_version")}
    tf_info["devices"] = []
    for gpu in tf.config.get_visible_devices("GPU"):
        try:
            tf_info["devices"].append({k: str(v) for k, v in tf.config.experimental.get_device_details(gpu).items()})
        except Exception:
            tf_info["devices"].append({"name": gpu.name})
    return tf_info


def fingerprint():
    """The machine and software a run executes on.

    Imports no framework: versions come from package metadata, GPU details from
    nvidia-smi and, after `configure`, from the active backend.

    Returns:
        a JSON-ready dict with keys os, cpu, gpu, python, packages, keras_backend,
        blas, environment.
    """
    gpu = {"nvidia_smi": _nvidia_smi()}
    gpu.update(_framework_gpu_info())
    keras = sys.modules.get("keras")
    active = None
    if keras is not None:
        try:
            active = keras.backend.backend()
        except Exception:
            active = None
    return {
        "os": {
            "system": platform.system(),
            "release": platform.release(),
            "platform": platform.platform(),
            "hostname": platform.node(),
            "libc": " ".join(platform.libc_ver()).strip() or None,
        },
        "cpu": _cpu_info(),
        "gpu": gpu,
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "packages": _installed_versions(),
        "keras_backend": active or os.environ.get("KERAS_BACKEND"),
        "imported_frameworks": [backend.name for backend in backends.BACKENDS if backend.imported()],
        "blas": _blas_info(),
        "environment": relevant_environment(),
    }
