"""Grouping runs: what a protocol is, what a configuration is, and how each is named and labelled.

A protocol is what was trained and how (model, schedule, data checksums, the
study's protocol record); a configuration is the runtime asked for, any extra
arm factors, and the machine and software (docs/study-statistics.md,
"Grouping: protocols and configurations"). Manifests in, identities, labels and
names out.
"""

import hashlib
import json
import math
import re

from prednet_keras import backends
from prednet_keras.session.records import Fingerprint, Manifest

__all__ = [
    "SETTINGS",
    "canonical",
    "configuration_settings",
    "describe_precision",
    "describe_settings",
    "group_configurations",
    "machine_identity",
    "protocol_differences",
    "protocol_identity",
    "run_sort_key",
]

# The runtime fields that make a configuration (RuntimeConfig's, less `strict`,
# which only decides whether a missing switch is an error).
SETTINGS = ("backend", "device", "threads", "interop_threads", "deterministic", "cudnn", "tf32", "onednn", "xla")


def canonical(obj):
    """A JSON text that is equal for equal values (sorted keys), to group and compare by."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def configuration_settings(requested, effective):
    """The runtime settings that define a configuration.

    The requested values are used: they are what the study varies, and the
    worker refuses to train when one did not take effect. A setting left to
    the backend's default (None) stays None; its effective value is shown in
    the report and is a function of the machine and software, which are part
    of the configuration too.

    Args:
        requested: manifest runtime.requested.
        effective: manifest runtime.effective (used only without a request).
    """
    source = requested or {}
    out = {}
    for key in SETTINGS:
        value = source.get(key)
        if not source and key in ("backend", "device", "deterministic"):
            value = effective.get(key)
        out[key] = value
    # Left out at float32 (and in manifests from before the option), so that earlier
    # configurations keep their identity and labels; named when it differs.
    if source.get("precision") not in (None, "float32"):
        out["precision"] = source["precision"]
    if source.get("autotune") is not None:  # likewise: named only where a run set it
        out["autotune"] = source["autotune"]
    # gpu:0 and gpu:1 of one machine are the same kind of device; which model
    # it is goes into the machine identity.
    if isinstance(out["device"], str):
        out["device"] = "gpu" if out["device"].split(":")[0] in ("gpu", "cuda") else out["device"].split(":")[0]
    return out


def _gpu_names(manifest, effective):
    gpu = (manifest.fingerprint.gpu if manifest.fingerprint else None) or {}
    smi = gpu.get("nvidia_smi") or {}
    gpus = smi.get("gpus") or []
    visible = effective.get("cuda_visible_devices")
    if visible not in (None, ""):
        chosen = [g for g in gpus if str(g.get("index")) in str(visible).split(",") or g.get("uuid") in str(visible)]
        gpus = chosen or gpus
    names = sorted({g.get("name") for g in gpus if g.get("name")})
    if names:
        return names
    for info in gpu.values():
        if isinstance(info, dict):
            for device in info.get("devices") or []:
                if isinstance(device, dict) and (device.get("device_name") or device.get("name")):
                    names.append(device.get("device_name") or device.get("name"))
    return sorted(set(names))


def machine_identity(manifest, settings):
    """The hardware and software a run's configuration includes.

    Args:
        manifest: the run's manifest (a records.Manifest or its dict).
        settings: its configuration_settings.

    Returns:
        dict: cpu (model), gpu (models used, GPU runs only), backend_version,
        keras_version, and cuda/cudnn for GPU runs.
    """
    manifest = Manifest.coerce(manifest)
    fingerprint = manifest.fingerprint or Fingerprint()
    effective = manifest.effective.to_dict() if manifest.effective else {}
    out = {
        "cpu": (fingerprint.cpu or {}).get("model"),
        "backend_version": effective.get("backend_version"),
        "keras_version": effective.get("keras_version"),
    }
    if settings.get("device") == "gpu":
        out["gpu"] = _gpu_names(manifest, effective)
        backend_info = (fingerprint.gpu or {}).get(settings.get("backend") or "") or {}
        out["cuda"] = backend_info.get("cuda")
        out["cudnn"] = backend_info.get("cudnn")
    return out


# Manifest parts that define what was trained; everything run-specific (seed,
# paths, times, jit_compile, which follows the runtime) is left out.
_MODEL_KEYS = ("name", "layer", "kwargs", "frame_shape", "nt", "layer_loss_weights", "time_loss_weights")
_SCHEDULE_KEYS = ("epochs", "steps_per_epoch", "batch_size", "optimizer", "lr", "lr_drop_epoch", "lr_after_drop",
                  "loss", "monitor")
_OPTION_KEYS = ("model", "stack_sizes", "r_stack_sizes", "filter_size", "nt", "batch_size", "epochs",
                "steps_per_epoch", "lr", "lr_drop_epoch", "lr_drop_factor", "layer_loss", "val_sequences",
                "val_fraction", "size")


def protocol_identity(manifest):
    """What was trained and how: runs compared with each other must agree on it.

    Args:
        manifest: the run's manifest (a records.Manifest or its dict).

    Returns:
        dict: protocol (the study's record, if any), model, schedule (from the
        manifest, or from options for a run that never started) and data
        (checksum per split).
    """
    manifest = Manifest.coerce(manifest)
    model = manifest.model or {}
    schedule = manifest.schedule or {}
    options = manifest.options.to_dict() if manifest.options else {}
    out = {"protocol": manifest.protocol}
    if model or schedule:
        out["model"] = {k: model.get(k) for k in _MODEL_KEYS}
        if isinstance(out["model"]["kwargs"], dict):
            # Unrolling changes how the time loop is computed, not what is trained
            # (like --xla), and runs recorded before the option have no such key.
            out["model"]["kwargs"] = {k: v for k, v in out["model"]["kwargs"].items() if k != "unroll"}
        out["schedule"] = {k: schedule.get(k) for k in _SCHEDULE_KEYS}
    else:
        out["options"] = {k: options.get(k) for k in _OPTION_KEYS}
    # Augmented data is another protocol; runs without augmentation (and those
    # recorded before the option existed) carry no key, so they stay one protocol.
    augment = schedule.get("augment") if (model or schedule) else options.get("augment")
    if augment:
        out["augment"] = list(augment)
    out["data"] = {split: (info or {}).get("checksum") for split, info in sorted((manifest.data or {}).items())}
    return out


# -------------------------------------------------------------- configurations


def _on_off(value):
    return "on" if value else "off"


def _machine_name(settings, machine):
    """The device a configuration ran on: its GPU models, else its CPU model."""
    return ", ".join(machine.get("gpu") or []) if settings.get("device") == "gpu" else machine.get("cpu")


def describe_precision(settings, effective):
    """What float32 convolutions and matrix products ran in, from the effective settings.

    A device, a library and a precision change together when a CPU run is
    compared with a GPU run: JAX and PyTorch use TF32 on NVIDIA GPUs by
    default, which no CPU has, so the label says it.

    Args:
        settings: configuration_settings (the requested tf32 is None for the default).
        effective: manifest runtime.effective (tf32, tf32_applies).
    """
    if settings.get("precision") == "mixed_bfloat16":
        return "bfloat16 convolutions (mixed_bfloat16)"
    if settings.get("device") != "gpu" or effective.get("tf32_applies") is False:
        return "float32"
    tf32 = effective.get("tf32", settings.get("tf32"))
    default = " (default)" if settings.get("tf32") is None else ""
    if tf32 is True:
        return "TF32 on" + default
    if tf32 is False:
        return "TF32 off" + default
    if isinstance(tf32, str) and "conv True" in tf32 and "matmul False" in tf32:
        return "TF32 convolutions" + default
    return f"TF32 {tf32 if tf32 is not None else 'unknown'}" + default


def describe_settings(settings, machine, effective=None):
    """A one-line human label of a configuration: library, device, switches, precision, machine.

    Args:
        settings: configuration_settings.
        machine: machine_identity.
        effective: manifest runtime.effective of one of its runs (for the precision).
    """
    backend = settings.get("backend")
    known = backends.find(backend)
    library = known.display_name if known is not None else str(backend or "?")
    if machine.get("backend_version"):
        library += f" {machine['backend_version']}"
    where = _machine_name(settings, machine)
    parts = [library, f"{str(settings.get('device') or '?').upper()} ({where or 'unknown machine'})"]
    threads = settings.get("threads")
    if threads is not None:
        parts.append(f"{threads} thread{'s' if threads != 1 else ''}")
    if settings.get("interop_threads") is not None:
        parts.append(f"interop {settings['interop_threads']}")
    if settings.get("deterministic"):
        parts.append("deterministic")
    if settings.get("cudnn") is False:
        parts.append("cuDNN off")
    parts.append(describe_precision(settings, effective or {}))
    for key, name in (("onednn", "oneDNN"), ("autotune", "autotuning"), ("xla", "XLA")):
        if settings.get(key) is not None:
            parts.append(f"{name} {_on_off(settings[key])}")
    parts += [f"{key}={value}" for key, value in settings.items() if key not in SETTINGS + ("precision", "autotune")]
    return ", ".join(parts)


def _slug(text):
    return re.sub(r"[^a-z0-9.]+", "-", str(text).lower()).strip("-")


def _generated_name(settings, varying):
    """A configuration name from its settings, for runs that carry none (or several): the
    backend and device, and the settings in which the unnamed configurations differ."""
    parts = [str(settings.get("backend") or "unknown"), str(settings.get("device") or "unknown")]
    threads = settings.get("threads")
    if threads is not None and "threads" in varying:
        parts.append(f"{threads}-thread{'s' if threads != 1 else ''}")
    if settings.get("interop_threads") is not None and "interop_threads" in varying:
        parts.append(f"interop-{settings['interop_threads']}")
    if settings.get("deterministic") and "deterministic" in varying:
        parts.append("deterministic")
    if settings.get("cudnn") is False and "cudnn" in varying:
        parts.append("no-cudnn")
    for key in ("tf32", "onednn", "xla"):
        if settings.get(key) is not None and key in varying:
            parts.append(key if settings[key] else f"no-{key}")
    for key in sorted(k for k in settings if k not in SETTINGS and k in varying):
        value = settings[key]
        parts.append(_slug(key) if value is True else f"no-{_slug(key)}" if value is False else
                     f"{_slug(key)}-{_slug(value)}")
    return "-".join(parts)


def _clashes(records, field):
    """[(value, records)] for each value of record[field] that more than one record has, in first-seen order."""
    groups = {}
    for record in records:
        groups.setdefault(record[field], []).append(record)
    return [(value, same) for value, same in groups.items() if len(same) > 1]


def _name_configurations(records):
    """Gives every configuration record an id: the name its runs' spec gave it
    (study.configuration), else one made from its settings; the machine is
    added where that leaves two alike. Unique within the report."""
    counts = {}
    for record in records:
        for name in record["names"]:
            counts[name] = counts.get(name, 0) + 1
    for record in records:
        # Runs merged from two studies may carry two names for one configuration:
        # one that no other configuration uses names it. A name that several
        # configurations share (one spec run on two machines) gets the machine below.
        own = [name for name in record["names"] if counts[name] == 1]
        record["id"] = own[0] if own else (record["names"][0] if record["names"] else None)
    unnamed = [r for r in records if r["id"] is None]
    varying = {key for key in {k for r in unnamed for k in r["settings"]}
               if len({canonical(r["settings"].get(key)) for r in unnamed}) > 1}
    for record in unnamed:
        record["id"] = _generated_name(record["settings"], varying)
    for name, same in _clashes(records, "id"):
        # Same settings on other hardware or software: the machine tells them apart.
        for record in same:
            where = _machine_name(record["settings"], record["machine"])
            record["id"] = f"{name}@{_slug(where or 'unknown')[:24]}"
    final = {}
    for record in sorted(records, key=lambda r: (r["id"], r["label"], r["key"])):
        if record["id"] in final:
            # Nothing else differs in a name: number them in a fixed order.
            number = 2
            while f"{record['id']}-{number}" in final:
                number += 1
            record["id"] = f"{record['id']}-{number}"
        final[record["id"]] = record


def group_configurations(runs):
    """Configuration records (id, label, names, key, settings, machine, runs), sorted by id."""
    groups = {}
    for run in runs:
        groups.setdefault(run.config_key, []).append(run)
    records = []
    for key, members in groups.items():
        first = members[0]
        names = sorted({r.name_hint for r in members if r.name_hint})
        records.append({
            "key": key,
            "label": describe_settings(first.settings, first.machine, first.effective),
            "names": names,
            "name": names[0] if len(names) == 1 else None,
            "settings": first.settings,
            "machine": first.machine,
            "effective": {k: first.effective.get(k) for k in ("threads", "interop_threads", "deterministic",
                                                                "cudnn", "tf32", "tf32_applies", "onednn",
                                                                "jit_compile")},
            "runs": members,
        })
    for label, same in _clashes(records, "label"):
        # Same settings, library version and hardware: the rest of the software tells them apart.
        for record in same:
            m = record["machine"]
            extra = [f"keras {m.get('keras_version')}"] + [f"{k} {m[k]}" for k in ("cuda", "cudnn") if m.get(k)]
            record["label"] = f"{label} ({', '.join(extra)})"
    if len({r["label"] for r in records}) != len(records):
        for record in records:
            record["label"] += f" #{hashlib.sha256(record['key'].encode()).hexdigest()[:6]}"
    _name_configurations(records)
    records.sort(key=lambda r: r["id"])
    return records


def run_sort_key(run):
    return (str(type(run.seed)), run.seed if run.seed is not None else -1,
            run.replicate if isinstance(run.replicate, (int, float)) else math.inf, run.where)


def protocol_differences(protocols):
    """Top-level protocol fields whose values differ between protocols."""
    if len(protocols) < 2:
        return []
    fields = set()
    for p in protocols:
        fields.update(p)
    differing = []
    for field in sorted(fields):
        values = {canonical(p.get(field)) for p in protocols}
        if len(values) > 1:
            sub = set()
            for p in protocols:
                if isinstance(p.get(field), dict):
                    sub.update(p[field])
            detail = [k for k in sorted(sub) if len({canonical((p.get(field) or {}).get(k)) for p in protocols}) > 1]
            differing.append(field + (f" ({', '.join(detail)})" if detail else ""))
    return differing
