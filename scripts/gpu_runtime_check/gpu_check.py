# Sanity check of the runtime package / models/starting_point.py on the GPU machine (not part of the repo).
import json, os, subprocess, sys, time
sys.path.insert(0, os.getcwd())
from prednet_keras.runtime import RuntimeConfig as C
from tests.runtime._helpers import run_tasks
sp = {n: f"out/sp/{n}.h5" for n in ("conv_dense", "prednet", "autoencoder")}
pairs = [f"conv_dense={sp['conv_dense']}", f"prednet={sp['prednet']}"]
jobs = {
    "jax_gpu_default": (C(backend="jax", device="gpu"), "readback"),
    "jax_gpu0_det_notf32": (C(backend="jax", device="gpu:0", deterministic=True, tf32=False), "readback"),
    "jax_gpu_tf32": (C(backend="jax", device="gpu", tf32=True), "readback"),
    "jax_gpu_nocudnn_loose": (C(backend="jax", device="gpu", cudnn=False, strict=False), "readback"),
    "jax_gpu5": (C(backend="jax", device="gpu:5"), "readback"),
    "jax_cpu_t4": (C(backend="jax", threads=4), "readback"),
    "torch_gpu_default": (C(backend="torch", device="gpu"), "readback"),
    "torch_gpu0_det_nocudnn_notf32": (C(backend="torch", device="gpu:0", deterministic=True, cudnn=False, tf32=False), "readback"),
    "torch_gpu_tf32": (C(backend="torch", device="gpu", tf32=True), "readback"),
    "torch_gpu5": (C(backend="torch", device="gpu:5"), "readback"),
    "torch_cpu_t4": (C(backend="torch", threads=4, interop_threads=2), "readback"),
    "load_jax_gpu": (C(backend="jax", device="gpu"), "load", *pairs),
    "load_torch_gpu": (C(backend="torch", device="gpu"), "load", *pairs),
    "load_torch_cpu": (C(backend="torch"), "load", *pairs),
}
for rep in (1, 2):
    jobs[f"train_jax_gpu_det_{rep}"] = (C(backend="jax", device="gpu", deterministic=True), "train", sp["autoencoder"], 3)
    jobs[f"train_jax_gpu_nodet_{rep}"] = (C(backend="jax", device="gpu"), "train", sp["autoencoder"], 3)
    jobs[f"train_torch_gpu_det_{rep}"] = (C(backend="torch", device="gpu", deterministic=True), "train", sp["autoencoder"], 3)
    jobs[f"train_torch_gpu_nocudnn_{rep}"] = (C(backend="torch", device="gpu", cudnn=False, deterministic=True), "train", sp["autoencoder"], 3)
t = time.time()
results = run_tasks(jobs)
for r in results.values():
    r.pop("fingerprint", None) if r.get("ok") and "effective" not in r else None
out = os.environ.get("OUT", "out")
cli = subprocess.run([sys.executable, "-m", "prednet_keras.cli.env", "--backend", "torch", "--device", "gpu", "--deterministic", "--no-cudnn"], capture_output=True, text=True)
cli2 = subprocess.run([sys.executable, "-m", "prednet_keras.cli.env", "--backend", "jax", "--device", "gpu", "--json"], capture_output=True, text=True)
results["cli_table"] = {"rc": cli.returncode, "out": cli.stdout[-8000:], "err": cli.stderr[-3000:]}
results["cli_json"] = {"rc": cli2.returncode, "out": cli2.stdout[-20000:], "err": cli2.stderr[-3000:]}
with open(os.path.join(out, "gpu_check.json"), "w") as f:
    json.dump(results, f, indent=1, default=str)
print("seconds", round(time.time() - t, 1))
for k, v in results.items():
    if k.startswith("cli"): continue
    print(k, "ok" if v.get("ok") else f"ERR {v.get('error_type')}: {str(v.get('error'))[:300]}")
print(cli.stdout[-4000:]); print(cli.stderr[-1500:])
