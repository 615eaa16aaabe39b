"""Grouping runs: what a protocol is, what a configuration is, and how each is named and labelled.

A protocol is what was trained and how (model, schedule, data checksums, the
study's protocol record); a configuration is the runtime asked for, any extra
arm factors, and the machine and software (docs/study-statistics.md,
"Grouping: protocols and configurations"). Manifests in, identities, labels and
names out. Which factor makes which is study/factors.py's table (STUDY_FACTORS): every maker here takes
`factors=STUDY_FACTORS`.
"""

import hashlib
import json
import math

from prednet_keras.session.records import Fingerprint, Manifest, Study
from prednet_keras.study.factors import (
    STUDY_FACTORS,
    StudyFactor,
    describe_precision,
    label_order,
    machine_name,
    name_part,
    slug,
    words,
)

__all__ = [
    "SETTINGS",
    "arm_settings",
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

# The runtime switches every configuration names (the first studies'; those added since are named only where a
# run set them): factors.py's table says which.
SETTINGS = tuple(f.name for f in STUDY_FACTORS if "runtime" in f.records and f.named_always)


def canonical(obj):
    """A JSON text that is equal for equal values (sorted keys), to group and compare by."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def configuration_settings(requested, effective, factors=STUDY_FACTORS):
    """The runtime settings that define a configuration.

    The requested values are used: they are what the study varies, and the
    worker refuses to train when one did not take effect. A setting left to
    the backend's default (None) stays None; its effective value is shown in
    the report and is a function of the machine and software, which are part
    of the configuration too. A switch added since the first studies is named
    only where a run set it (factors.StudyFactor.named_always), so that
    earlier configurations keep their identity and labels.

    Args:
        requested: manifest runtime.requested.
        effective: manifest runtime.effective (used only without a request).
        factors: the study factors (their comparable runtime switches are read).
    """
    source = requested or {}
    out = {}
    for factor in factors:
        if not factor.comparable or "runtime" not in factor.records:
            continue
        value = source.get(factor.name)
        if not source and factor.unrequested_from_effective:
            value = effective.get(factor.name)
        if factor.is_named(value):
            out[factor.name] = factor.value_kept(value)
    return out


def arm_settings(manifest, factors=STUDY_FACTORS):
    """What defines a run's configuration: its runtime settings (configuration_settings), every other comparable
    factor of `factors` where its records hold it, then the arm factors the study recorded (study.settings,
    e.g. a training-code switch such as emulate_cpu_aliasing) in their names' order.

    Args:
        manifest: the run's manifest (a records.Manifest or its dict).
        factors: the study factors.
    """
    manifest = Manifest.coerce(manifest)
    runtime = manifest.runtime
    requested = runtime.requested.to_dict() if runtime and runtime.requested else {}
    effective = runtime.effective.to_dict() if runtime and runtime.effective else {}
    out = configuration_settings(requested, effective, factors)
    records = _records(manifest)
    for factor in factors:
        if factor.comparable and "runtime" not in factor.records:
            found = [records[r] for r in factor.records if factor.name in records[r]]
            value = found[0][factor.name] if found else None
            if found and factor.is_named(value):
                out[factor.name] = factor.value_kept(value)
    for key, value in sorted(records["study"].items()):
        out.setdefault(str(key), value)
    return out


def _records(manifest):
    """{record name: dict} of the manifest's records a factor may be read from (factors.RECORDS but runtime)."""
    study = manifest.study or Study()
    return {"study": study.settings or {}, "model": manifest.model or {}, "schedule": manifest.schedule or {},
            "options": manifest.options.to_dict() if manifest.options else {}}


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


def protocol_identity(manifest, factors=STUDY_FACTORS):
    """What was trained and how: runs compared with each other must agree on it.

    Args:
        manifest: the run's manifest (a records.Manifest or its dict).
        factors: the study factors; those that are not comparable make the protocol.

    Returns:
        dict: protocol (the study's record, if any), model and schedule (from the
        manifest, or options for a run that never started), each with the
        factors recorded there, any factor named only where set, and data
        (checksum per split).
    """
    manifest = Manifest.coerce(manifest)
    records = _records(manifest)
    sections = ("model", "schedule") if records["model"] or records["schedule"] else ("options",)
    protocol = [f for f in factors if not f.comparable]
    out = {"protocol": manifest.protocol}
    for section in sections:
        record = records[section]
        out[section] = {f.name: f.value_kept(record.get(f.name)) for f in protocol
                        if f.named_always and section in f.records}
    for factor in protocol:
        if not factor.named_always:
            value = next((records[s].get(factor.name) for s in sections if s in factor.records), None)
            if factor.is_named(value):
                out[factor.name] = factor.value_kept(value)
    out["data"] = {split: (info or {}).get("checksum") for split, info in sorted((manifest.data or {}).items())}
    return out


# -------------------------------------------------------------- configurations


def describe_settings(settings, machine, effective=None, factors=STUDY_FACTORS):
    """A one-line human label of a configuration: library, device, switches, precision, machine.

    Args:
        settings: configuration_settings.
        machine: machine_identity.
        effective: manifest runtime.effective of one of its runs (for the precision).
        factors: the study factors, whose words make the label (factors.label_order).
    """
    effective = effective or {}
    parts = []
    comparable = label_order(factors)
    for factor in comparable:
        if factor.named_always or factor.name in settings:
            part = words(factor, settings.get(factor.name), settings, machine, effective)
            if part is not None:
                parts.append(part)
    # An arm factor no table declares (read from study.settings) gets the generic words, last.
    known = {factor.name for factor in comparable}
    parts += [f"{key}={value}" for key, value in settings.items() if key not in known]
    return ", ".join(parts)


def _generated_name(settings, varying, factors=STUDY_FACTORS):
    """A configuration name from its settings, for runs that carry none (or several): the factors named always
    (the backend and device whatever they are, the others where the unnamed configurations differ in them), then
    the rest where they differ, by name."""
    always = [f for f in factors if f.comparable and f.named_always]
    parts = [name_part(f, settings.get(f.name), f.name in varying) for f in always]
    by_name = {f.name: f for f in factors}
    named = {f.name for f in always}
    for key in sorted(k for k in settings if k not in named and k in varying):
        # An arm factor no table declares (read from study.settings) gets the generic words.
        parts.append(name_part(by_name.get(key) or StudyFactor(key, True), settings[key], True))
    return "-".join(part for part in parts if part is not None)


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
        record["id"] = _generated_name(record["settings"], varying, record["runs"][0].factors)
    for name, same in _clashes(records, "id"):
        # Same settings on other hardware or software: the machine tells them apart.
        for record in same:
            where = machine_name(record["settings"], record["machine"])
            record["id"] = f"{name}@{slug(where or 'unknown')[:24]}"
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
            "label": describe_settings(first.settings, first.machine, first.effective, first.factors),
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
