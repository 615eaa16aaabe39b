"""Data-parallel training on the devices of one host (`prednet-train --devices N`).

Keras' distribution API on JAX: `keras.distribution.DataParallel` over the
first N devices `keras.distribution.list_devices()` names, set in the training
process before the model is built. Every device holds all the weights; each
training and validation batch is split along its first axis, batch_size / N
sequences a device, and the gradients are averaged over the devices inside the
compiled step. So `--batch-size` is the global batch, as in DataParallel, and a
run on N devices computes what a run on one does, up to the round-off of a
differently ordered sum.

The checks (`request_problem`, `batch_problem`) import nothing, so the command
line makes them before any process starts; `configure` imports Keras and runs
in the training process, after `runtime.configure`.
"""

STRATEGY = "DataParallel"
# How JAX shows N devices on one CPU (each a share of the host), e.g. for tests.
CPU_DEVICES_FLAG = "--xla_force_host_platform_device_count"

__all__ = ["CPU_DEVICES_FLAG", "STRATEGY", "batch_problem", "configure", "request_problem"]


def request_problem(backend, device, devices):
    """Why `devices` cannot be asked of this backend and --device, or None.

    Args:
        backend: the Keras backend.
        device: the runtime's device ("cpu", "gpu", "gpu:N").
        devices: the number of devices asked for.
    """
    if devices == 1:
        return None
    from prednet_keras import backends

    if not backends.named(backend).data_parallel:
        return (f"--devices {devices}: data-parallel training exists on the JAX backend (--backend jax); "
                f"{backend} trains on one device.")
    if ":" in str(device):
        return (f"--devices {devices} with --device {device}: one GPU was named; use --device gpu "
                f"(the first {devices} visible GPUs).")
    return None


def batch_problem(batch_size, val_sequences, devices):
    """Why the batches cannot be split evenly over `devices`, or None.

    Every batch is split into equal shares, the last validation batch
    (val_sequences % batch_size sequences, when not 0) included.

    Args:
        batch_size: sequences per training step (the global batch).
        val_sequences: validation sequences (0: none).
        devices: the number of devices.
    """
    if devices == 1:
        return None
    if batch_size % devices:
        return (f"--batch-size {batch_size} does not divide by --devices {devices}: the batch is global, "
                f"split evenly over the devices (e.g. --batch-size {devices * max(1, batch_size // devices)}).")
    last = val_sequences % batch_size
    if last % devices:
        return (f"--val-sequences {val_sequences} ends in a validation batch of {last}, which does not divide by "
                f"--devices {devices}; use a multiple of {devices} (e.g. --val-sequences {val_sequences - last}).")
    return None


def configure(devices, device_kind):
    """Sets Keras' DataParallel over the first `devices` devices of `device_kind`; returns the record.

    Call once per process, before any model or variable is built (the
    variables are then created replicated on every device).

    Args:
        devices: how many devices (> 1).
        device_kind: "cpu" or "gpu".

    Returns:
        {"strategy": "DataParallel", "devices": [...], "count": N, "batch": ...}
        for the manifest's runtime.effective.distribution.

    Raises:
        runtime.RuntimeSetupError: the process sees fewer devices.
    """
    import keras

    from prednet_keras.runtime.process import RuntimeSetupError

    problem = request_problem(keras.backend.backend(), device_kind, devices)
    if problem:
        raise RuntimeSetupError(problem)
    available = keras.distribution.list_devices(device_kind)
    if len(available) < devices:
        advice = (f"; on a CPU, JAX shows N devices with XLA_FLAGS={CPU_DEVICES_FLAG}=N" if device_kind == "cpu"
                  else "")
        raise RuntimeSetupError(
            f"--devices {devices}: this process sees {len(available)} {device_kind} device"
            f"{'s' if len(available) != 1 else ''} ({', '.join(available) or 'none'}){advice}."
        )
    chosen = list(available[:devices])
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=chosen))
    return {
        "strategy": STRATEGY,
        "devices": chosen,
        "count": devices,
        "batch": "global: each batch is split evenly over the devices",
    }
