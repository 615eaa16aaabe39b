"""The published answer says only what the committed records give.

Every number in README.md's "### The answer so far" and in the table of docs/study/README.md is recomputed
here from the studies' runs.tar.xz: per-seed metrics from the run manifests, replicates averaged per seed,
tests from prednet_keras.study.stats and .comparisons as `prednet-study report` makes them. A number in those texts that is
neither recomputed here nor one of the stated set-up facts below (frame sizes, thread counts, the margin
given to the report) fails the test, so a stale or unmeasured number cannot stay.
"""

import functools
import json
import re
import tarfile
from pathlib import Path

import numpy as np
import pytest

from prednet_keras.session import folder as run_folders
from prednet_keras.study import archive, stats
from prednet_keras.study.stats import comparisons
from prednet_keras.study.report.run_records import Run, find_run_folders

ROOT = Path(__file__).resolve().parents[2]
STUDIES = ROOT / "docs" / "study"
MARGIN = 0.001  # the --margin of the Chainer and Lotter reports (their report.json options)

# What the studies set up (their specs), not what they measured.
SETUP = ["40x32 frames", "channels 3,16,32,64", "4000 frames", "(2 threads)", "120x160 frames", "5,000 frames",
         "64x80 frames", "100 updates", "3,000 images", "at batch 1", "1 and 4 threads", "1, 2 and 4", "95% CI",
         "+/- 0.001", "--margin 0.001", "(of 8 planned)", "larger than 5%"]
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?")


def g2(value, signed=False):
    """Two significant digits, as the answer writes them: 0.0054, 4.9e-5 (below 0.001)."""
    text = f"{value:.1e}" if abs(value) < 1e-3 and value != 0 else f"{value:.2g}"
    text = re.sub(r"e([-+])0*(\d)", lambda m: f"e{'-' if m.group(1) == '-' else ''}{m.group(2)}", text)
    return ("+" if signed and value > 0 else "") + text


def g3(value):
    return f"{value:.3g}"


def interval(ci):
    return f"[{g2(ci[0])}, {g2(ci[1])}]"


def p4(value):
    return "< 0.0001" if value < 1e-4 else f"= {value:.4f}"


def _load(study, metric):
    """{configuration: {seed: [(replicate, where, value, weights checksum)]}} of the finished runs in
    STUDY/runs.tar.xz."""
    packed = STUDIES / study / archive.ARCHIVE
    out = {}
    with archive.opened(packed) as root:
        for path in find_run_folders(root):
            manifest = json.loads((path / run_folders.MANIFEST).read_text())
            # The history is not needed: every metric here is in the manifest.
            run = Run(path, manifest, [], where=f"{study}:{path.relative_to(root).as_posix()}")
            if run.status == "complete" and not run.perturbation:
                out.setdefault(run.name_hint, {}).setdefault(run.seed, []).append(
                    (run.replicate, run.where, run.metric(metric), run.weights_checksum))
    return out


def _per_seed(runs):
    return {name: {seed: float(np.mean([row[2] for row in rows])) for seed, rows in by_seed.items()}
            for name, by_seed in runs.items()}


def _compare(values, margin):
    """compare_configurations over a study's configurations, as the report forms them (sorted by name)."""
    names = sorted(values)
    result = comparisons.compare_configurations({n: list(values[n].values()) for n in names},
                                          seeds={n: list(values[n]) for n in names}, margin=margin)
    return result, {(p["a"], p["b"]): p for p in result["pairs"]}


def _all_equivalent(values, margin):
    result, pairs = _compare(values, margin)
    assert {p["verdict_kind"] for p in result["pairs"]} == {"equivalent"}
    return result, pairs


def _range(values):
    every = [v for by_seed in values.values() for v in by_seed.values()]
    return f"{g3(min(every))}-{g3(max(every))}"


def _largest_rerun_move(by_seed):
    """(largest |metric of a repeat - the seed's first run|, seeds re-run, repeats with the first run's
    final weights), the report's determinism audit: runs in (replicate, name) order."""
    moves, seeds, identical = [], [], 0
    for seed, rows in by_seed.items():
        rows = sorted(rows, key=lambda row: (row[0], row[1]))
        if len(rows) > 1:
            seeds.append(seed)
            moves += [abs(row[2] - rows[0][2]) for row in rows[1:]]
            identical += sum(row[3] == rows[0][3] for row in rows[1:])
    return max(moves), sorted(seeds), identical


def _spread(values):
    seeds = [len(v) for v in values.values()]
    return f"{min(seeds)}-{max(seeds)}" if min(seeds) != max(seeds) else str(seeds[0])


@functools.lru_cache(maxsize=None)
def facts():
    """{what: the text the answer must contain}, every one recomputed from the records."""
    out = {}
    # The retraction study: two code paths on two stacks, 30 seeds.
    retraction = _load("retraction", "mean_last_50_updates")
    values = _per_seed(retraction)
    result, pairs = _compare(values, MARGIN)
    out["retraction seeds"] = f"{_spread(values)} seeds per arm"
    for stack, (cpu_path, gpu_path) in {"jax-gpu": ("gpu-jax-cpu-path", "gpu-jax-gpu-path"),
                                        "torch-cpu": ("cpu-torch-cpu-path", "cpu-torch-gpu-path")}.items():
        pair = pairs[cpu_path, gpu_path]
        assert pair["verdict_kind"] == "difference"
        per_seed = pair["seed_differences"]
        out[f"code path {stack} seeds"] = f"{per_seed['a_higher']} of {per_seed['n']}"
        out[f"code path {stack}"] = f"{g2(pair['primary']['difference'], True)} (95% CI {interval(pair['primary']['ci'])})"
        out[f"code path {stack} holm"] = f"Holm p {p4(pair['p_holm']['primary'])}"
    stack_pairs = {"gpu path": pairs["cpu-torch-gpu-path", "gpu-jax-gpu-path"],
                   "cpu path": pairs["cpu-torch-cpu-path", "gpu-jax-cpu-path"]}
    for path, pair in stack_pairs.items():
        assert pair["verdict_kind"] == "equivalent"
        out[f"stack {path}"] = f"{g2(pair['primary']['difference'], True)} (95% CI {interval(pair['primary']['ci'])})"
    out["stack tost"] = f"TOST Holm p {p4(max(p['p_holm']['tost'] for p in stack_pairs.values()))}"
    gpu, cpu = (stack_pairs[k]["seed_differences"] for k in ("gpu path", "cpu path"))
    out["stack seeds beyond"] = (f"{gpu['beyond_margin'] + cpu['beyond_margin']} of the {gpu['n'] + cpu['n']} seed "
                                 f"pairs ({gpu['beyond_margin']} with the GPU code path, {cpu['beyond_margin']} with "
                                 "the CPU path)")
    out["stack largest"] = f"by up to {g2(max(gpu['largest'], cpu['largest']))}"
    out["median seed"] = f"median seed ends at {g2(float(np.median(list(values['gpu-jax-gpu-path'].values()))))}"
    out["default margin"] = f"would be {g2(0.5 * result['pooled_sd'])}"
    move, rerun_seeds, identical = _largest_rerun_move(retraction["gpu-jax-gpu-path"])
    assert identical == 0
    out["rerun"] = f"seeds {rerun_seeds[0]}-{rerun_seeds[-1]} by up to {g2(move)}"
    out["rerun count"] = f"re-runs of {len(rerun_seeds)} seeds"

    # The runtime switches on the same protocol (chainer-configurations), and its CPU threads beside the
    # retraction study's 2-thread arm (chainer-combined).
    configurations = _load("chainer-configurations", "mean_last_50_updates")
    switches = _per_seed(configurations)
    result, pairs = _all_equivalent(switches, MARGIN)
    out["switches seeds"] = f"{_spread(switches)} seeds"
    out["switches pairs"] = f"all {len(result['pairs'])} pairs"
    out["switches mean"] = f"at most {g2(max(abs(p['primary']['difference']) for p in result['pairs']))}"
    out["switches seed"] = f"a single seed's at most {g2(max(p['seed_differences']['largest'] for p in result['pairs']))}"
    out["switches range"] = _range(switches)
    threads = {"1": switches["cpu-torch-1-thread"], "2": values["cpu-torch-gpu-path"],
               "4": switches["cpu-torch-4-threads"]}
    moves = []
    for a, b in (("1", "2"), ("1", "4"), ("2", "4")):
        shared = sorted(set(threads[a]) & set(threads[b]))
        x, y = (np.array([threads[k][s] for s in shared]) for k in (a, b))
        assert stats.tost_paired(x, y, MARGIN)["p"] < 0.05
        moves.append(abs(stats.paired_test(x, y)["difference"]))
    out["threads"] = f"at most {g2(max(moves))} apart"
    # gpu-jax and gpu-jax-gpu-path are one configuration run in several work periods (the report merges them).
    merged = {}
    for by_seed in (configurations["gpu-jax"], retraction["gpu-jax-gpu-path"]):
        for seed, rows in by_seed.items():
            merged.setdefault(seed, []).extend(rows)
    move, _, identical = _largest_rerun_move(merged)
    assert identical == 0
    out["combined rerun"] = f"moved by up to {g2(move)}"

    # Full size, 3 seeds, through Ray (the local executor's runs alike).
    for executor in ("ray", "local"):
        full = _per_seed(_load(f"ray-vs-local/{executor}", "mean_last_50_updates"))
        assert all(full["gpu-jax-cpu-path"][s] > full["gpu-jax"][s] for s in full["gpu-jax"])
        if executor == "ray":
            for name in ("gpu-jax-cpu-path", "gpu-jax"):
                out[f"full {name}"] = " / ".join(f"{full[name][s]:.4f}" for s in sorted(full[name]))
            out["full seeds"] = f"{_spread(full)} seeds"
            result, pairs = _compare(full, None)
            out["full needed"] = f"about {pairs['gpu-jax', 'gpu-jax-cpu-path']['power']['seeds_needed']} needed"
            assert pairs["gpu-jax", "gpu-jax-deterministic"]["verdict_kind"] == "equivalent"
            out["full margin"] = f"+/- {g2(result['margin'])}"

    # Lotter's PredNet.
    lotter = _per_seed(_load("lotter-prednet", "final_loss"))
    result, _ = _all_equivalent(lotter, MARGIN)
    out["lotter seeds"] = f"{_spread(lotter)} seeds per arm"
    out["lotter pairs"] = f"all {len(result['pairs'])} pairs"
    out["lotter tost"] = f"TOST Holm p {p4(max(p['p_holm']['tost'] for p in result['pairs']))}"
    moves = [abs(p["primary"]["difference"]) for p in result["pairs"]]
    out["lotter mean"] = f"mean differences {g2(min(moves))} to {g2(max(moves))}"
    out["lotter range"] = _range(lotter)

    # The MNIST autoencoder: the report's default margin, half the pooled seed SD.
    autoencoder = _per_seed(_load("autoencoder", "mean_last_1000_images"))
    result, pairs = _all_equivalent(autoencoder, None)
    out["autoencoder seeds"] = f"{_spread(autoencoder)} seeds per arm, {len(autoencoder)} arms"
    out["autoencoder pairs"] = f"all {len(result['pairs'])} pairs"
    out["autoencoder margin"] = f"+/- {g2(result['margin'])}"
    out["autoencoder stack"] = f"{g2(pairs['cpu-jax-1-thread', 'gpu-jax']['primary']['difference'], True)}"
    plain = {"cpu-jax-1-thread", "cpu-jax-4-threads", "gpu-jax-no-tf32", "gpu-torch-no-tf32", "gpu-torch-no-cudnn"}
    tf32 = {"gpu-jax", "gpu-jax-deterministic", "gpu-torch"}
    assert plain | tf32 == set(autoencoder)
    largest = {kind: max(p["seed_differences"]["largest"] for (a, b), p in pairs.items()
                         if ({a, b} <= plain if kind == "plain" else len({a, b} & tf32) == 1))
               for kind in ("plain", "tf32")}
    out["autoencoder tf32"] = f"by up to {g2(largest['tf32'])} from"
    out["autoencoder plain"] = f"within {g2(largest['plain'])}"

    # The pre-registered device study and its secondary part at full size (no runs.tar.xz until its first
    # portion is in): their seeds and the runs done (test_device_study.py checks the rest of what the device
    # study's README says, test_device_answer.py its answer).
    for name in ("device", "device-full"):
        planned, runs = _planned_seeds_and_runs(STUDIES / name)
        done = {int(run.split("/seed-")[1][:4]) for run in runs}
        out[f"{name} seeds"] = f"{len(planned)} fresh seeds ({planned[0]}-{planned[-1]}) planned; {len(done)} done"
    return out


def _planned_seeds_and_runs(study):
    """A study folder's planned seeds (its spec; its frames are made, not committed) and the names of the runs
    packed in its runs.tar.xz (none before it exists)."""
    from prednet_keras.study.spec import load_spec

    planned = load_spec(study / "spec.toml", check_paths=False).seeds
    if not (study / "runs.tar.xz").is_file():
        return planned, []
    with tarfile.open(study / "runs.tar.xz") as tar:
        return planned, [m.name for m in tar.getmembers() if m.name.endswith("/manifest.json")]

def _section(text, start, end):
    begin = text.index(start)
    return " ".join(text[begin:text.index(end, begin + len(start))].split())  # line breaks do not count


TEXTS = {
    "README.md answer": lambda: _section((ROOT / "README.md").read_text(), "### Earlier answers", "\n## "),
    "docs/study/README.md table": lambda: _section((STUDIES / "README.md").read_text(), "| study |", "\n\n"),
}
# Which recomputed facts each text states.
STATED = {
    "README.md answer": None,  # all of them but the two the index alone gives
    "docs/study/README.md table": ["retraction seeds", "code path jax-gpu seeds", "code path jax-gpu",
                                   "stack gpu path", "stack cpu path", "stack seeds beyond", "rerun",
                                   "switches seeds", "switches mean", "threads", "combined rerun", "lotter seeds",
                                   "lotter mean", "lotter range", "autoencoder seeds", "autoencoder margin",
                                   "autoencoder stack", "full seeds", "full margin", "full gpu-jax-cpu-path",
                                   "full gpu-jax", "full needed", "device seeds", "device-full seeds"],
}


@pytest.mark.parametrize("name", list(TEXTS))
def test_every_number_of_the_published_answer_is_recomputed_from_the_records(name):
    text = TEXTS[name]()
    keys = STATED[name] or [k for k in facts()
                           if k not in ("combined rerun", "full margin", "device seeds", "device-full seeds")]
    wanted = {k: facts()[k] for k in keys}
    missing = {k: v for k, v in wanted.items() if v not in text}
    assert not missing, f"{name} does not say what the records give: {missing}"
    rest = text
    for phrase in sorted(list(facts().values()) + SETUP, key=len, reverse=True):
        rest = rest.replace(phrase, " ")
    assert not NUMBER.findall(rest), f"numbers in {name} that no record gives: {NUMBER.findall(rest)}"


def test_number_format():
    assert [g2(0.005429), g2(4.92e-5, True), g2(-1.278e-4), g2(0.0025), g2(2.4e-4)] == [
        "0.0054", "+4.9e-5", "-1.3e-4", "0.0025", "2.4e-4"]
