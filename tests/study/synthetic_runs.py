"""Synthetic run folders in the layout prednet-train writes (session/folder.py, session/recipe_training.py),
with losses drawn from known distributions, so the report can be tested on
answers fixed in advance and without training anything."""

import hashlib

import numpy as np

from prednet_keras.session import folder as run_folders

MACHINES = {
    "cpu-box": {"cpu": "Intel(R) Core(TM) i7-6800K CPU @ 3.40GHz", "gpus": []},
    "gpu-box": {"cpu": "AMD EPYC 9334 32-Core Processor", "gpus": [{"index": "0", "name": "NVIDIA H200"}]},
}

PROTOCOL = {"name": "tiny", "metric": "final_loss_mean"}


def _fingerprint(machine, backend):
    info = MACHINES[machine]
    smi = {"path": "/usr/bin/nvidia-smi", "gpus": info["gpus"]} if info["gpus"] else None
    gpu = {"nvidia_smi": smi}
    if info["gpus"]:
        gpu[backend] = {"cuda": "12.5.1", "cudnn": "9"}
    return {
        "os": {"system": "Linux", "hostname": machine},
        "cpu": {"machine": "x86_64", "model": info["cpu"], "logical_cores": 16},
        "gpu": gpu,
        "python": {"version": "3.11.7"},
        "packages": {"keras": "3.15.1", "tensorflow": "2.21.0"},
        "keras_backend": backend,
    }


def write_run(root, name, *, seed, machine="cpu-box", backend="tensorflow", device="cpu", threads=None,
              deterministic=True, tf32=None, onednn=None, shift=0.0, replicate=0, noise=None, steps=40,
              steps_per_epoch=20, status="complete", metrics=True, protocol=PROTOCOL, trajectory=None,
              perturbation=None, initial_checksum=None, model_name="prednet", record_weights_checksum=True,
              extra=None):
    """Writes one run folder and returns its path.

    The loss of step t is a seed-specific decay plus N(0, 0.01) noise drawn
    from `noise` (default: the seed, so replicates of a deterministic
    configuration are bit-identical), plus `shift` x t / steps. The final
    metric is the mean loss of the last 10 steps.

    Args:
        root: the results folder ("one machine").
        name: the run folder's name.
        seed: the run's seed.
        machine: a key of MACHINES (fingerprint: CPU and GPU models, hostname).
        backend, device, threads, deterministic, tf32, onednn: runtime.requested.
        shift: planted effect of the configuration on the loss.
        replicate: manifest study.replicate.
        noise: seed of the loss noise.
        steps, steps_per_epoch: history length.
        status: manifest status.
        metrics: write manifest "metrics" (the protocol's final metric).
        protocol: manifest "protocol".
        trajectory: None, or an (amplitude, seed) pair: writes trajectory.npz
            whose values drift away from the seed's base path by that amount.
        perturbation: manifest study.perturbation (e.g. "ulp").
        initial_checksum: initial_weights.checksum (default: from the seed).
        model_name: manifest model.name (a different one is another protocol).
        record_weights_checksum: write result.weights_checksum.
        extra: top-level manifest entries to add or replace.
    """
    folder = run_folders.RunFolder(root / name)
    folder.path.mkdir(parents=True, exist_ok=False)
    rng_seed = np.random.default_rng([seed, 7])
    level = 0.1 + 0.02 * rng_seed.standard_normal()
    rng = np.random.default_rng([seed, 11] if noise is None else [seed, 13, noise])
    t = np.arange(1, steps + 1)
    losses = level + 0.2 * np.exp(-t / 8.0) + 0.01 * rng.standard_normal(steps) + shift * t / steps
    with folder.open_history() as history:
        for g, loss in zip(t, losses):
            epoch, step = (g - 1) // steps_per_epoch + 1, (g - 1) % steps_per_epoch + 1
            history.write(kind="step", epoch=int(epoch), step=int(step), global_step=int(g), loss=float(loss),
                          lr=0.001, seconds=round(0.01 * int(step), 4))
            if step == steps_per_epoch:
                mean = float(np.mean(losses[g - steps_per_epoch : g]))
                history.write(kind="epoch", epoch=int(epoch), step=steps_per_epoch, global_step=int(g),
                              loss=mean, val_loss=mean * 1.1, lr=0.001, seconds=0.3)
    final = float(np.mean(losses[-10:]))
    curve_id = hashlib.sha256(losses.tobytes()).hexdigest()
    gpu = device.startswith("gpu")
    manifest = {
        "format": run_folders.RUN_FORMAT,
        "format_version": run_folders.RUN_FORMAT_VERSION,
        "name": name,
        "created": "2026-12-02T14:37:37+0000",
        "status": status,
        "options": {"model": model_name, "seed": seed, "epochs": steps // steps_per_epoch,
                    "steps_per_epoch": steps_per_epoch, "data": f"/data/on/{machine}/squares.npz"},
        "runtime": {
            "requested": {"backend": backend, "device": device, "threads": threads, "deterministic": deterministic,
                          "cudnn": True, "tf32": tf32, "onednn": onednn, "strict": True, "xla": None,
                          "interop_threads": None},
            "effective": {"backend": backend, "backend_version": "2.21.0", "keras_version": "3.15.1",
                          "device": "gpu" if gpu else "cpu", "threads": threads or "auto",
                          "deterministic": deterministic, "tf32": bool(gpu) if tf32 is None else tf32,
                          "onednn": not gpu if onednn is None else onednn, "jit_compile": False,
                          "cuda_visible_devices": "0" if gpu else ""},
        },
        "fingerprint": _fingerprint(machine, backend),
        "sessions": [{"started": "2026-12-02T14:37:43+0000", "pid": 1000 + seed + 100 * replicate}],
        "data": {"train": {"checksum": "sha256:train", "frames": 36}, "val": {"checksum": "sha256:val", "frames": 12}},
        "initial_weights": {"file": "initial_weights.h5", "from": "seed", "seed": seed,
                            "checksum": initial_checksum or hashlib.sha256(f"init-{seed}".encode()).hexdigest()},
        "seeds": {"seed": seed, "initial_weights": seed, "data_order": seed},
        "model": {"name": model_name, "layer": "prednet_keras.layers.lotter.PredNet",
                  "kwargs": {"stack_sizes": [3, 4, 8]}, "frame_shape": [32, 32, 3], "nt": 4,
                  "layer_loss_weights": [1.0, 0.0, 0.0], "time_loss_weights": [0.0, 0.5, 0.5, 0.0]},
        "schedule": {"epochs": steps // steps_per_epoch, "steps_per_epoch": steps_per_epoch, "batch_size": 2,
                     "optimizer": "adam", "lr": 0.001, "lr_drop_epoch": 1, "lr_after_drop": 0.0001,
                     "loss": "mean_absolute_error of the weighted error vs 0", "monitor": "val_loss",
                     "jit_compile": False},
        "study": {"replicate": replicate, "perturbation": perturbation},
        "result": {"epochs_completed": steps // steps_per_epoch, "final_loss": final},
    }
    if protocol is not None:
        manifest["protocol"] = protocol
    if metrics:
        manifest["metrics"] = {"final_loss_mean": final}
    if record_weights_checksum:
        manifest["result"]["weights_checksum"] = curve_id
    if status != "complete":
        manifest.pop("result")
    manifest.update(extra or {})
    folder.write_manifest(manifest)
    if trajectory is not None:
        amplitude, drift_seed = trajectory
        base = np.random.default_rng([seed, 3]).standard_normal(50)
        steps_saved = np.arange(0, steps + 1, 10)
        drift = np.random.default_rng([seed, 5, drift_seed]).standard_normal(50)
        values = np.array([base + amplitude * (s / steps) * drift for s in steps_saved])
        np.savez(folder.path / "trajectory.npz", steps=steps_saved, values=values)
    return folder.path
