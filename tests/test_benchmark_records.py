"""Numbers that docs/benchmarks.md and a record's README state, recomputed from the record's raw JSON: a
sentence that drifts from its record fails here."""

import csv
import json
import statistics
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "docs" / "benchmarks.md"


def _inductor_cache_processes():
    record = ROOT / "docs" / "benchmarks" / "h100-inductor-cache-2026-12-06"
    trains = [json.loads((record / f"process-{i}.json").read_text())["results"][0]["train"] for i in (1, 2, 3)]
    return record, trains


@pytest.mark.parametrize("where", ["docs/benchmarks.md", "record README"])
def test_the_inductor_cache_figures_are_the_records(where):
    record, trains = _inductor_cache_processes()
    text = " ".join((BENCHMARKS if where == "docs/benchmarks.md" else record / "README.md").read_text().split())
    first = [f"{t['warmup_seconds'][0]:.1f} s" for t in trains]
    fps = [f"{t['fps']:,.0f}" for t in trains]
    caches = [t["torch_inductor_cache"] for t in trains]
    # The first process compiled every graph into the empty cache; the later ones loaded all of them.
    assert caches[0]["hits"] == 0 and all(c["hits"] == caches[0]["misses"] and c["misses"] == 0 for c in caches[1:])
    if where == "docs/benchmarks.md":
        assert f"**{first[0]}** with the empty cache ({caches[0]['misses']} graphs compiled)" in text
        assert f"**{first[1]} and {first[2]}** in the next two (all {caches[1]['hits']} loaded)" in text
        assert f"at {fps[0]}, {fps[1]} and {fps[2]} frames/s" in text
    else:
        for i, (seconds, rate, cache) in enumerate(zip(first, fps, caches, strict=True), 1):
            assert f"| {seconds} | {cache['hits']} / {cache['misses']} | {rate} |" in text, i


def _port_eager_record():
    record = ROOT / "docs" / "benchmarks" / "h100-port-eager-2026-12-06"

    def fps(call, name):
        document = json.loads((record / call / f"{name}.json").read_text())
        return document["fps"] if name.startswith("port") else document["results"][0]["train"]["fps"]

    return record, fps


@pytest.mark.parametrize("where", ["docs/benchmarks.md", "record README"])
def test_the_eager_torch_and_channel_alignment_figures_are_the_records(where):
    record, fps = _port_eager_record()
    text = " ".join((BENCHMARKS if where == "docs/benchmarks.md" else record / "README.md").read_text().split())
    port = {16: [fps("call-1", f"port-b16-r{r}") for r in (1, 2)], 4: [fps("call-2", f"port-b4-r{r}") for r in (1, 2)]}
    eager = {16: fps("call-1", "torch-eager-float32-b16"), 4: fps("call-2", "torch-eager-float32-b4")}
    ratio = {b: eager[b] / (sum(port[b]) / 2) for b in (4, 16)}
    jax = {name: fps("call-2", f"jax-{name}-b16") for name in ("float32", "float32-cm8", "bf16", "bf16-cm8")}
    for b in (4, 16):
        assert f"{port[b][0]:,.0f} / {port[b][1]:,.0f}" in text, b
        assert f"{eager[b]:,.0f}" in text and f"{ratio[b]:.2f}x" in text, b
    for precision in ("float32", "bf16"):
        assert f"{jax[precision]:,.0f}" in text and f"{jax[precision + '-cm8']:,.0f}" in text
        assert f"{jax[precision + '-cm8'] / jax[precision]:.2f}x" in text
    # The aligned runs ran with the variable, the others without it.
    for name in jax:
        environment = (record / "call-2" / f"jax-{name}-b16.json").read_text()
        assert ('"PREDNET_CHANNEL_MULTIPLE": "8"' in environment) == name.endswith("cm8"), name


def test_the_operations_per_step_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-kernels-once-2026-12-06"
    found = {t: json.loads((record / f"ops-{t}.json").read_text())["policies"] for t in ("before", "after")}
    text = " ".join(BENCHMARKS.read_text().split())
    for policy, label in (("float32", "float32"), ("mixed_bfloat16", "mixed_bfloat16")):
        before, after = found["before"][policy]["total"], found["after"][policy]["total"]
        change = 100 * (after - before) / before
        assert f"| {label}, every operation | {before:,} | {after:,} | {change:.1f}% |" in text, policy
    cats = [found[t]["float32"]["by_operation"]["aten.cat"] for t in ("before", "after")]
    assert f"| float32, concatenations | {cats[0]} | {cats[1]} | |" in text
    # 4 layers x 10 steps x (kernel, bias): 80 concatenations forward become 8.
    assert cats[0] - cats[1] == 80 - 8


def test_the_convolutions_views_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-conv-views-2026-12-06"
    found = {t: json.loads((record / f"ops-{t}.json").read_text())["policies"] for t in ("before", "after")}
    text = " ".join(BENCHMARKS.read_text().split())
    for policy in ("float32", "mixed_bfloat16"):
        before, after = found["before"][policy]["total"], found["after"][policy]["total"]
        assert f"| {policy}, every operation | {before:,} | {after:,} | {100 * (after - before) / before:.1f}% |" in text
    clones = [found[t]["float32"]["by_operation"].get("aten.clone", 0) for t in ("before", "after")]
    assert f"| float32, copies (`aten.clone`) | {clones[0]} | {clones[1]} | |" in text
    # Every copy removed, nothing else added: the views are permutes, which were there before too (Keras' own).
    assert found["before"]["float32"]["total"] - found["after"]["float32"]["total"] == clones[0] - clones[1]
    frames = json.loads((record / "cpu-frames.json").read_text())["results"]
    median = {code: statistics.median(r["train"]["fps"] for r in frames if r["code"] == code)
              for code in ("before", "after")}
    assert f"gave {median['before']:.1f} frames/s before and {median['after']:.1f} after" in text
    assert f"after / before {median['after'] / median['before']:.3f}" in text
    assert "history identical, weights identical" in (record / "identity.txt").read_text()
    assert "DIFFER" not in (record / "identity.txt").read_text()


def _identity_lines(record):
    """The lines of a record's identity.txt (scripts/train_identity.sh) that compare one configuration."""
    return [line for line in (record / "identity.txt").read_text().splitlines()
            if line.startswith(("torch", "jax", "tensorflow"))]


def _fps(path):
    document = json.loads(path.read_text())
    return document["fps"] if "port" in document else document["results"][0]["train"]["fps"]


def test_the_h100_views_figures_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "h100-conv-views-2026-12-06"
    text = " ".join(BENCHMARKS.read_text().split())
    fps = {(call, path.stem): _fps(path) for call in (1, 2, 3, 4) for path in (record / f"call-{call}").glob("*.json")}
    pair = lambda call, a, b: f"{fps[call, a]:,.0f} / {fps[call, b]:,.0f}"  # noqa: E731
    port4 = ", ".join(pair(c, "port-b4-r1", "port-b4-r2") for c in (1, 3, 4))
    assert f"| the port, each call's two rounds | {port4} (calls 1, 3, 4); {pair(2, 'port-b4-r1', 'port-b4-r2')} (call 2) | {pair(1, 'port-b16-r1', 'port-b16-r2')} |" in text
    eager4 = ", ".join(pair(c, "torch-eager-before-float32-b4", "torch-eager-float32-b4") for c in (1, 3, 4))
    eager16 = ", ".join(pair(c, "torch-eager-before-float32-b16", "torch-eager-float32-b16") for c in (1, 4))
    assert f"| {eager4} | {eager16} |" in text
    port_mean = lambda call, b: (fps[call, f"port-b{b}-r1"] + fps[call, f"port-b{b}-r2"]) / 2  # noqa: E731
    ratios4 = ", ".join(f"{fps[c, 'torch-eager-float32-b4'] / port_mean(c, 4):.2f}x" for c in (1, 3, 4))
    assert f"**{ratios4}** | **{fps[1, 'torch-eager-float32-b16'] / port_mean(1, 16):.2f}x** |" in text
    compiled = [fps[2, "torch-compiled-float32-b4"], fps[2, "torch-compiled-float32-b4-r2"]]
    assert (f"{compiled[0]:,.0f} / {compiled[1]:,.0f} (**{compiled[0] / port_mean(2, 4):.2f}x / "
            f"{compiled[1] / port_mean(2, 4):.2f}x**)") in text
    trains = {n: json.loads((record / "call-2" / f"{n}.json").read_text())["results"][0]["train"]
              for n in ("torch-compiled-float32-b4", "torch-compiled-float32-b4-r2")}
    first, later = (trains[n]["warmup_seconds"][0] for n in trains)
    assert f"{first:.1f} s / **{later:.1f} s** (8 of 8 graphs loaded)" in text
    assert trains["torch-compiled-float32-b4-r2"]["torch_inductor_cache"]["hits"] == 8
    assert trains["torch-compiled-float32-b4-r2"]["torch_inductor_cache"]["misses"] == 0
    for precision in ("float32", "bf16"):
        plain, aligned = fps[2, f"jax-{precision}-b16"], fps[2, f"jax-{precision}-cm8-b16"]
        assert f"{plain:,.0f} / {aligned:,.0f} ({aligned / plain:.2f}x)" in text, precision
    gains = [fps[c, "torch-eager-float32-b16"] / fps[c, "torch-eager-before-float32-b16"] - 1 for c in (1, 4)]
    assert f"+{100 * gains[0]:.1f}% and +{100 * gains[1]:.1f}% over the code before" in text
    b4 = [f"{fps[c, 'torch-eager-float32-b4'] / fps[c, 'torch-eager-before-float32-b4']:.2f}" for c in (1, 3, 4)]
    assert f"(after / before {b4[0]}, {b4[1]} and {b4[2]} in the three calls)" in text
    # The profiles' busy times per step, as the text quotes them.
    for name, quoted in (("torch-eager-float32-b4-profile", ("38.8 ms", "57.1 ms", "76.3 ms")),
                         ("port-b4-profile", ("48.5 ms", "54.1 ms", "64.5 ms")),
                         ("torch-eager-float32-b16-profile", ("108.2 ms",)), ("port-b16-profile", ("132.3 ms",))):
        document = json.loads((record / "call-1" / f"{name}.json").read_text())
        profile = document.get("profile") or document["results"][0]["train"]["profile"]
        busy = {f"{line['busy_ms'] / profile['steps']:.1f} ms" for line in profile["summary"]["timelines"]}
        assert set(quoted) <= busy, (name, busy)
        assert all(q in text for q in quoted), name


def test_the_readme_quotes_the_h100_eager_ratios():
    """README's Speed section quotes the eager torch ratios of the newest H100 record and the compiled one of the
    morning's; they must be the records'. (The batch-4 ratios: test_the_h100_carried_views_figures_are_the_records.)"""
    readme = " ".join((ROOT / "README.md").read_text().split())
    record = ROOT / "docs" / "benchmarks" / "h100-channels-first-2026-12-07" / "call-1" / "b16"
    fps = {p.stem: _fps(p) for p in record.glob("*.json")}
    port = statistics.mean(fps[f"port-b16-r{r}"] for r in (1, 2))
    assert (f"{fps['torch-eager-float32-b16'] / port:.2f}x the port at batch 16 on an H100 (one round, float32; "
            f"{fps['torch-eager-before-float32-b16'] / port:.2f}x before") in readme
    morning = ROOT / "docs" / "benchmarks" / "h100-2026-12-07" / "call-1"
    compiled = _fps(morning / "torch-compiled-autotune-float32-b16.json") / statistics.mean(
        _fps(morning / f"port-b16-r{r}.json") for r in (1, 2))
    assert f"reaches {compiled:.2f}x the port at batch 16" in readme


def test_the_compile_times_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-compile-times-2026-12-06"
    first, later = (json.loads((record / f"{name}.json").read_text()) for name in ("first", "later"))
    text = " ".join(BENCHMARKS.read_text().split())
    phases = later["phases"]
    assert (f"the first call took {first['first_call_seconds']:.1f} s with the empty cache and "
            f"{later['first_call_seconds']:.1f} s in the later process, where TorchDynamo's "
            f"{phases['_compile.compile_inner']['calls']} frames took {phases['_compile.compile_inner']['seconds']:.1f} s: "
            f"{phases['bytecode_tracing']['seconds']:.1f} s tracing bytecode and "
            f"{phases['OutputGraph.call_user_compiler']['seconds']:.1f} s handing the graphs") in text
    assert f"The largest frame, {later['largest_frames_seconds'][0]:.1f} s, is the one that holds the model's forward" in text
    # The later process compiled nothing: Inductor's code generation did not run, its graphs came from the cache.
    assert "GraphLowering.codegen" in first["phases"] and "GraphLowering.codegen" not in phases
    assert "check_fn.guards_state must not be None" in (record / "precompile.txt").read_text()


def test_the_compiled_step_traced_once_figures_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-compile-once-2026-12-06"
    times = {name: json.loads((record / f"{name}.json").read_text())
             for name in ("before-first", "before-later", "after-first", "after-later")}
    bench = {name: json.loads((record / "bench" / f"{name}.json").read_text())["results"][0]["train"]
             for name in ("before-r1", "after-r1", "before-r2", "after-r2")}
    text = " ".join(BENCHMARKS.read_text().split())
    # The two parts have no graph break and never start an analysis over; Keras' step has and does.
    assert [times[n]["graph_breaks"] for n in times] == [2, 2, 0, 0]
    assert all("compile_attempt_1" in times[n]["phases"] for n in ("before-first", "before-later"))
    assert not any("compile_attempt_1" in times[n]["phases"] for n in ("after-first", "after-later"))
    first = {n: f"{t['first_call_seconds']:.1f} s" for n, t in times.items()}
    tracing = {n: f"{times[n]['phases']['bytecode_tracing']['seconds']:.1f} s" for n in ("before-later", "after-later")}
    assert f"| the first step, empty cache | {first['before-first']} | {first['after-first']} |" in text
    assert (f"| the first step, a later process (every graph from the cache) | {first['before-later']} | "
            f"**{first['after-later']}** |") in text
    assert f"| of which TorchDynamo tracing bytecode | {tracing['before-later']} | {tracing['after-later']} |" in text
    fps = {n: f"{t['fps']:.1f}" for n, t in bench.items()}
    assert f"{fps['before-r1']} / {fps['after-r1']} frames/s in the first round" in text
    assert f"{fps['before-r2']} / {fps['after-r2']} in the second" in text
    assert (f"first step took {bench['before-r2']['warmup_seconds'][0]:.1f} s before and "
            f"{bench['after-r2']['warmup_seconds'][0]:.1f} s after") in text
    assert "history identical, weights identical" in (record / "identity.txt").read_text()


def test_the_h200_compiled_figures_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "h200-compile-once-2026-12-06"

    def run(call, name):
        document = json.loads((record / call / f"{name}.json").read_text())
        if name.startswith("port"):
            return document["fps"], document["warmup_seconds"][0], None
        train = document["results"][0]["train"]
        return train["fps"], train["warmup_seconds"][0], train.get("torch_compiled_graphs", {}).get("after_timed_steps")

    text = " ".join(BENCHMARKS.read_text().split())
    # Two graphs once get_initial_state no longer breaks the graph; six with Keras' step and with 76810bb.
    assert run("call-1", "torch-compiled-before-float32-b4")[2] == run("call-1", "torch-compiled-float32-b4")[2] == 6
    assert all(run("call-2", n)[2] == 2 for n in ("torch-compiled-float32-b4", "torch-compiled-float32-b16"))
    later = [run("call-2", "torch-compiled-float32-b4-r2")[1], run("call-2", "torch-compiled-float32-b16-r2")[1],
             run("call-3", "torch-compiled-float32-b16")[1]]
    assert max(later) < 30
    assert (f"{later[0]:.1f} s at batch 4, {later[1]:.1f} s and {later[2]:.1f} s at batch 16** (f3b0285), under "
            f"issue 40's 30 s, against {run('call-1', 'torch-compiled-before-float32-b4-r2')[1]:.1f} s before") in text
    for call, batch, names in (("call-2", 4, ("torch-compiled-float32-b4", "torch-compiled-float32-b4-r2")),
                               ("call-2", 16, ("torch-compiled-float32-b16", "torch-compiled-float32-b16-r2"))):
        ours = [run(call, n)[0] for n in names]
        port = [run(call, f"port-b{batch}-r{r}")[0] for r in (1, 2)]
        ratios = [f / statistics.mean(port) for f in ours]
        assert (f"{ours[0]:,.0f} and {ours[1]:,.0f}" in text and f"{port[0]:,.0f} / {port[1]:,.0f}" in text
                and f"**{ratios[0]:.2f}x / {ratios[1]:.2f}x**" in text), batch
    port3 = statistics.mean(run("call-3", f"port-b16-r{r}")[0] for r in (1, 2))
    before, after = run("call-3", "torch-compiled-before-float32-b16")[0], run("call-3", "torch-compiled-float32-b16")[0]
    assert f"the code before {before:,.0f} and f3b0285 {after:,.0f}" in text
    assert f"{before / port3:.2f}x and {after / port3:.2f}x" in text
    cudagraphs = json.loads((record / "call-4" / "torch-compiled-cudagraphs-b4.json").read_text())["results"][0]["train"]
    assert cudagraphs["torch_cudagraph_skips"] == 0
    port5 = run("call-5", "port-b4-r1")[0]
    assert f"**{cudagraphs['fps']:,.0f} frames/s**" in text and f"the port {port5:,.0f}" in text
    assert f"({cudagraphs['fps'] / port5:.2f}x)" in text
    assert "Gradient addition node" in (record / "call-3" / "logs" / "torch-compiled-cudagraphs-b4.log").read_text()


def test_the_readme_quotes_the_h200_compiled_figures():
    record = ROOT / "docs" / "benchmarks" / "h200-compile-once-2026-12-06" / "call-2"
    readme = " ".join((ROOT / "README.md").read_text().split())

    def fps(name):
        document = json.loads((record / f"{name}.json").read_text())
        return document["fps"] if name.startswith("port") else document["results"][0]["train"]["fps"]

    ours = {b: fps(f"torch-compiled-float32-b{b}") for b in (4, 16)}
    port = {b: statistics.mean(fps(f"port-b{b}-r{r}") for r in (1, 2)) for b in (4, 16)}
    assert f"trains at {ours[4]:,.0f} / {ours[16]:,.0f} frames/s at batch 4 / 16 compiled" in readme
    assert f"{ours[4] / port[4]:.2f}x / {ours[16] / port[16]:.2f}x the port in the same call" in readme


def test_the_compiled_autoencoder_figures_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-autoencoder-compiled-2026-12-07"
    runs = {name: json.loads((record / f"{name}-manifest.json").read_text())["result"]
            for name in ("before-31ed157", "after-cfe3b3b")}
    logs = {name: (record / f"{name}.log").read_text() for name in runs}
    text = " ".join(BENCHMARKS.read_text().split())
    readme = " ".join((record / "README.md").read_text().split())
    first = {name: log.split("first update done in ")[1].split(" s")[0] for name, log in logs.items()}
    before, after = runs["before-31ed157"], runs["after-cfe3b3b"]
    assert before["weights_checksum"] == after["weights_checksum"]
    assert (f"| Keras' step (31ed157) | {before['train_seconds']:.1f} | {first['before-31ed157']} s | "
            f"{before['weights_checksum'][:8]}... |") in text
    assert f"| the two parts (cfe3b3b) | {after['train_seconds']:.1f} | {first['after-cfe3b3b']} s | the same" in text
    assert (f"| before (Keras' step) | {before['train_seconds']:.1f} | {first['before-31ed157']} s | "
            f"{before['weights_checksum'][:8]}... |") in readme
    assert f"| after (two parts) | {after['train_seconds']:.1f} | {first['after-cfe3b3b']} s |" in readme


def test_the_chainer_window_compiled_on_torch_figures_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-chainer-compiled-torch-2026-12-07"
    seconds, losses = {}, {}
    for name in ("eager", "compiled"):
        with open(record / f"{name}-history.csv", newline="") as handle:
            rows = list(csv.DictReader(handle))
        seconds[name] = [float(row["seconds"]) for row in rows]
        losses[name] = [float(row["loss"]) for row in rows]
        manifest = json.loads((record / f"{name}-manifest.json").read_text())
        assert manifest["runtime"]["effective"]["jit_compile"] is (name == "compiled")
    np.testing.assert_allclose(losses["compiled"], losses["eager"], rtol=5e-6)
    text = " ".join(BENCHMARKS.read_text().split())
    readme = " ".join((record / "README.md").read_text().split())
    for name, label in (("eager", "eager"), ("compiled", "compiled (`--xla`)")):
        first, later = seconds[name][0], statistics.median(seconds[name][1:])
        assert f"| {label} | {first:.1f} s | {later:.2f} s |" in text
        assert f"| {label} | {first:.1f} s | {later:.2f} s |" in readme
    assert f"| eager | 5.7 s | 3.06 s | {', '.join(f'{loss:.7f}' for loss in losses['eager'])} |" in readme
    compiling = seconds["compiled"][0] - seconds["eager"][0]
    saved = statistics.median(seconds["eager"][1:]) - statistics.median(seconds["compiled"][1:])
    assert f"after about {5 * round(compiling / saved / 5)} updates" in readme
    ratio = statistics.median(seconds["compiled"][1:]) / statistics.median(seconds["eager"][1:])
    assert f"each later update took {ratio:.2f} of eager's time" in readme
    assert f"the first update's {compiling / 60:.1f} minutes of compiling" in readme
    assert f"{ratio:.2f} of eager's time per update on 2 CPU cores, after {compiling / 60:.1f} minutes of compiling" in text
    autoencoder = json.loads((record / "autoencoder-compiled-manifest.json").read_text())["result"]
    assert autoencoder["weights_checksum"].startswith("625a9de8")


def test_the_tensorflow_kept_out_figures_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-tensorflow-kept-out-2026-12-07"
    runs = json.loads((record / "results.json").read_text())["results"]
    readme = " ".join((record / "README.md").read_text().split())
    runtime_doc = " ".join((ROOT / "docs" / "runtime.md").read_text().split())
    medians = {}
    for backend in ("torch", "jax"):
        for code in ("before", "after"):
            mine = [r for r in runs if r["backend"] == backend and r["code"] == code]
            assert all(r["tensorflow_imported"] is (code == "before") for r in mine)
            medians[backend, code] = f"{statistics.median(r['wall_seconds'] for r in mine):.2f}"
        assert f"| {backend} | {medians[backend, 'before']} | {medians[backend, 'after']} | yes / no |" in readme
    assert (f"{medians['torch', 'before']} s on torch and {medians['jax', 'before']} s on JAX before, "
            f"{medians['torch', 'after']} s and {medians['jax', 'after']} s after") in runtime_doc


def test_the_gates_one_activation_figures_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-gates-one-activation-2026-12-07"
    ops = {side: json.loads((record / f"ops-{side}.json").read_text())["policies"] for side in ("before", "after")}
    runs = json.loads((record / "torch-overhead.json").read_text())["results"]
    fps = {side: statistics.median(r["train"]["fps"] for r in runs if r["code"] == side) for side in ("before", "after")}
    readme = " ".join((record / "README.md").read_text().split())
    text = " ".join(BENCHMARKS.read_text().split())
    for policy in ("float32", "mixed_bfloat16"):
        assert f"| {policy} | {ops['before'][policy]['total']:,} | {ops['after'][policy]['total']:,} |" in readme
    counts = f"{ops['before']['float32']['total']:,} -> {ops['after']['float32']['total']:,} operations per"
    assert counts in text
    ratio = f"{fps['after'] / fps['before']:.3f}"
    assert f"{fps['before']:.1f} frames/s before and {fps['after']:.1f} with the change (medians; {ratio})" in readme
    assert f"({fps['before']:.1f} / {fps['after']:.1f} frames/s, {ratio})" in text
    launches = ops["before"]["float32"]["total"] - ops["after"]["float32"]["total"]
    assert f"the {launches} fewer kernel launches" in readme
    compared = _identity_lines(record)
    assert len(compared) == 4 and all(", weights DIFFER (" in line for line in compared)


def test_the_activations_once_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-activations-once-2026-12-07"
    found = {t: json.loads((record / f"ops-{t}.json").read_text())["policies"] for t in ("before", "after")}
    readme = " ".join((record / "README.md").read_text().split())
    text = " ".join(BENCHMARKS.read_text().split())
    for policy in ("float32", "mixed_bfloat16"):
        before, after = found["before"][policy]["total"], found["after"][policy]["total"]
        row = f"| {policy}, every operation | {before:,} | {after:,} | {100 * (after - before) / before:.1f}% |"
        assert row in text and row in readme, policy
    ops = {t: found[t]["float32"]["by_operation"] for t in ("before", "after")}
    # The clamp once per layer and step instead of once per gate (4 layers, nt 10), and its backward with it.
    for name in ("aten.clamp", "aten.ge", "aten.le", "aten.logical_and"):
        assert (ops["before"][name], ops["after"][name]) == (120, 40), name
    assert f"from {ops['before']['aten.mul']} to {ops['after']['aten.mul']}" in readme
    assert f"`zeros` rises from {ops['before']['aten.zeros']} to {ops['after']['aten.zeros']}" in readme
    compared = _identity_lines(record)
    assert len(compared) == 4 and all("history identical, weights identical" in line for line in compared)


def test_the_chainer_window_operations_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-chainer-window-eager-2026-12-07"
    found = {t: json.loads((record / f"ops-{t}.json").read_text()) for t in ("before", "after")}
    assert all(found[t]["model"] == "chainer-window" for t in found)
    ops = {t: found[t]["policies"]["float32"] for t in found}
    readme = " ".join((record / "README.md").read_text().split())
    text = " ".join(BENCHMARKS.read_text().split())
    before, after = ops["before"]["total"], ops["after"]["total"]
    row = f"| float32, every operation | {before:,} | {after:,} | {100 * (after - before) / before:.1f}% |"
    assert row in readme and row in text
    for label, name in (("copies (`aten.clone`)", "aten.clone"), ("concatenations (`aten.cat`)", "aten.cat"),
                        ("`aten.where`", "aten.where"),
                        ("numbers made into tensors (`aten.lift_fresh`)", "aten.lift_fresh")):
        counts = [ops[t]["by_operation"].get(name, 0) for t in ("before", "after")]
        assert f"| {label} | {counts[0]} | {counts[1]} | |" in readme, name


def test_the_h100_figures_of_2026_12_07_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "h100-2026-12-07"
    text = " ".join(BENCHMARKS.read_text().split())

    def train(path):
        return json.loads((record / path).read_text())["results"][0]["train"]

    def fps(path):
        return _fps(record / path)

    def ms(path):
        return train(path)["step_ms"]["median_ms"]

    # Every frames/s of the table, and its ratio to the mean of its call's port rounds.
    port = {("call-1", 16): ["port-b16-r1", "port-b16-r2"], ("call-2", 4): ["port-b4-r1", "port-b4-r2"],
            ("call-5", 4): ["port-b4-r1", "port-b4-r2"], ("call-5", 16): ["port-b16-r1"]}
    for (call, batch), rounds in port.items():
        mean = statistics.mean(fps(f"{call}/{name}.json") for name in rounds)
        assert " / ".join(f"{fps(f'{call}/{name}.json'):,.0f}" for name in rounds) in text, (call, batch)
        ours = {("call-1", 16): ["torch-eager-float32-b16", "torch-eager-autotune-float32-b16",
                                 "torch-compiled-float32-b16", "torch-compiled-float32-b16-r2",
                                 "torch-compiled-autotune-float32-b16"],
                ("call-2", 4): ["torch-eager-float32-b4", "torch-eager-autotune-float32-b4"],
                ("call-5", 4): ["torch-eager-before-float32-b4", "torch-eager-float32-b4"],
                ("call-5", 16): ["torch-eager-before-float32-b16", "torch-eager-float32-b16"]}[call, batch]
        for name in ours:
            value = fps(f"{call}/{name}.json")
            assert f"{value:,.0f}" in text and f"{value / mean:.2f}x" in text, (call, name)
    for call, name in (("call-2", "port-autotune-b4"), ("call-1", "port-autotune-b16")):
        assert f"{fps(f'{call}/{name}.json'):,.0f} (call {call[-1]})" in text
    # The compiled first steps, and the cache each found.
    for name, seconds in (("torch-compiled-float32-b16", "116.1 s"), ("torch-compiled-float32-b16-r2", "33.0 s"),
                          ("torch-compiled-autotune-float32-b16", "27.3 s")):
        found = train(f"call-1/{name}.json")
        assert f"{found['warmup_seconds'][0]:.1f} s" == seconds and seconds in text
        assert (found["torch_inductor_cache"]["hits"] > 0) == name.endswith(("-r2", "autotune-float32-b16"))
    for name in ("jax-float32-b16", "jax-float32-cm8-b16", "jax-bf16-b16", "jax-bf16-cm8-b16"):
        assert f"{fps(f'call-1/{name}.json'):,.0f}" in text, name
    # The before and after of the activations once, in one call.
    after, before = fps("call-5/torch-eager-float32-b4.json"), fps("call-5/torch-eager-before-float32-b4.json")
    assert f"{after:,.0f} against {before:,.0f} frames/s in the same call" in text
    assert round(100 * (after / before - 1)) == 14 and "eager torch 14% at batch 4" in text
    # The Chainer window: per update, before and after in call 5, and the compiled and JAX updates of call 2.
    chainer = {name: ms(f"call-5-chainer/{name}.json") for name in
               ("chainer-torch-eager-r1", "chainer-torch-eager-before-r1", "chainer-torch-eager-before-r2")}
    assert (f"{chainer['chainer-torch-eager-r1']:.1f} ms against {chainer['chainer-torch-eager-before-r1']:.1f} and "
            f"{chainer['chainer-torch-eager-before-r2']:.1f} ms") in text
    for name in ("chainer-torch-eager", "chainer-torch-compiled", "chainer-torch-compiled-r2", "chainer-jax"):
        assert f"{ms(f'call-2-chainer/{name}.json'):.1f} ms" in text, name
    assert "chainer-torch-eager-r2\ttimed out" in (record / "call-5-chainer" / "status.tsv").read_text()
    # The profiles: the GPU stream's and the host threads' busy time per step.
    for path, figures in (("call-4-profile-b4/torch-eager-float32-b4-profile.json", ("38.9", "60.7", "109.5")),
                          ("call-4-profile-b4/port-b4-profile.json", ("48.9", "80.4", "126.4")),
                          ("call-4-chainer-profile/chainer-torch-eager.json", ("40.5", "201.5", "286.5"))):
        found = json.loads((record / path).read_text())
        profile = found["results"][0]["train"]["profile"] if "results" in found else found["profile"]
        busy = {f"{line['busy_ms'] / profile['steps']:.1f}" for line in profile["summary"]["timelines"]}
        assert set(figures) <= busy and all(f"{figure} ms" in text for figure in figures), path
    # The async-safe callbacks.
    runs = {side: statistics.median(json.loads((record / "call-3-async" / "json" / f"jax-float32-b4-{side}-r{r}.json")
                                               .read_text())["results"][0]["train"]["fps"] for r in (1, 2))
            for side in ("before", "after")}
    assert f"{runs['before']:,.0f} frames/s before, {runs['after']:,.0f} after" in text


def test_the_kernel_copies_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-kernel-copies-2026-12-07"
    found = {name: json.loads((record / f"{name}.json").read_text())
             for name in ("before-b1", "after-b1", "before-b4", "after-b4")}
    readme = " ".join((record / "README.md").read_text().split())
    text = " ".join(BENCHMARKS.read_text().split())
    for batch in (1, 4):
        before, after = found[f"before-b{batch}"], found[f"after-b{batch}"]
        assert before["config"]["batch_size"] == after["config"]["batch_size"] == batch
        row = f"| {batch} | {before['median_step_ms']:,.1f} ms | {after['median_step_ms']:,.1f} ms |"
        assert row in readme and row in text, batch
        # Before, the top gate kernel's copy was the largest own time; after, no copy of it leads.
        top = before["by_self_cpu_time"][0]
        assert top["name"] == "aten::copy_" and "[768, 576, 3, 3]" in top["input_shapes"]
        assert f"{top['self_cpu_ms']:.1f} ms, `aten::copy_` of [768, 576, 3, 3]" in readme
        assert after["by_self_cpu_time"][0]["name"] != "aten::copy_"
    port = [_fps(record / f"port-b1-r{r}.json") for r in (1, 2)]
    ours = [_fps(record / f"ours-b1-r{r}.json") for r in (1, 2)]
    earlier = _fps(record / "ours-before-b1.json")
    figures = f"the port {port[0]:.1f} / {port[1]:.1f} frames/s, ours"
    assert figures in readme and figures in text
    assert f"{ours[0]:.1f} / {ours[1]:.1f} (7.4 before)" in text and f"{earlier:.1f} frames/s" in readme
    compared = _identity_lines(record)
    assert len(compared) == 5 and all("history identical, weights identical" in line for line in compared)


def test_the_kernels_once_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-kernels-once-2026-12-07"
    readme = " ".join((record / "README.md").read_text().split())
    text = " ".join(BENCHMARKS.read_text().split())
    for batch in (1, 4):
        steps = {side: [json.loads((record / f"{side}-b{batch}-r{r}.json").read_text()) for r in (1, 2)]
                 for side in ("before", "after")}
        assert all(run["config"]["batch_size"] == batch for runs in steps.values() for run in runs)
        before, after = ([f"{run['median_step_ms']:,.1f}" for run in steps[side]] for side in ("before", "after"))
        row = f"| {batch} | {before[0]} / {before[1]} ms | {after[0]} / {after[1]} ms |"
        assert row in readme and row in text, batch
        # Every round after is faster than every round before.
        assert max(run["median_step_ms"] for run in steps["after"]) < min(run["median_step_ms"] for run in steps["before"])
    # The A and Ahat kernels' copies: among the largest own times before, none of the 12 after.
    before, after = (json.loads((record / f"{side}-b1-r1.json").read_text())["by_self_cpu_time"]
                     for side in ("before", "after"))
    copies = [row for row in before[:4] if row["name"] == "aten::copy_" and "[192, 192, 3, 3]" in row["input_shapes"]]
    assert copies and f"{copies[0]['self_cpu_ms']:.1f} ms a step at batch 1" in readme
    assert not [row for row in after if row["name"] == "aten::copy_" and "[192, 192, 3, 3]" in row["input_shapes"]]
    port = [_fps(record / f"port-b1-r{r}.json") for r in (1, 2)]
    ours = {side: [_fps(record / f"ours-{side}-b1-r{r}.json") for r in (1, 2)] for side in ("before", "after")}
    figures = (f"the port {port[0]:.1f} / {port[1]:.1f} frames/s, ours before {ours['before'][0]:.1f} / "
               f"{ours['before'][1]:.1f}, ours after {ours['after'][0]:.1f} / {ours['after'][1]:.1f}")
    assert figures in readme and figures in text
    compared = _identity_lines(record)
    assert len(compared) == 5 and all("history identical, weights identical" in line for line in compared)


def test_the_h100_kernels_once_figures_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "h100-kernels-once-2026-12-07"
    readme = " ".join((record / "README.md").read_text().split())
    text = " ".join(BENCHMARKS.read_text().split())

    def found(call, name):
        document = json.loads((record / call / f"{name}.json").read_text())
        if "port" in document:
            return document["fps"], document["step_ms_median"]
        train = document["results"][0]["train"]
        return train["fps"], train["step_ms"]["median_ms"]

    def ms(call, name):
        return f"{found(call, name)[1]:.1f}"

    # Batch 16, call 1: the table's row and the frames/s.
    row = (f"| eager torch, batch 16, median step (call 1) | {ms('call-1', 'torch-eager-before-float32-b16')} ms | "
           f"{ms('call-1', 'torch-eager-float32-b16')} ms | {ms('call-1', 'port-b16-r1')} / {ms('call-1', 'port-b16-r2')} ms |")
    assert row in text
    before, after = (found("call-1", name)[0] for name in ("torch-eager-before-float32-b16", "torch-eager-float32-b16"))
    assert f"{before:,.0f} -> {after:,.0f} frames/s" in text and f"{before:,.0f} -> {after:,.0f} frames/s" in readme
    port16 = statistics.mean(found("call-1", f"port-b16-r{r}")[0] for r in (1, 2))
    assert f"{before / port16:.2f}x to {after / port16:.2f}x the port" in text
    # Batch 4, calls 1, 3 and 4.
    calls = ("call-1", "call-3", "call-4")
    row = ("| eager torch, batch 4, median step (calls 1, 3, 4) | "
           + " / ".join(ms(c, "torch-eager-before-float32-b4") for c in calls) + " ms | "
           + " / ".join(ms(c, "torch-eager-float32-b4") for c in calls) + " ms | "
           + " / ".join(f"{ms(c, 'port-b4-r1')}, {ms(c, 'port-b4-r2')}" for c in calls) + " ms |")
    assert row in text
    ports = [found(c, f"port-b4-r{r}")[0] for c in calls for r in (1, 2)]
    assert f"({min(ports):.0f}-{max(ports):.0f} frames/s)" in text
    # Compiled torch at batch 16, call 2.
    port = statistics.mean(found("call-2", f"port-b16-r{r}")[0] for r in (1, 2))
    for name in ("torch-compiled-float32-b16", "torch-compiled-autotune-float32-b16", "torch-compiled-cudagraphs-b16"):
        fps = found("call-2", name)[0]
        assert f"{fps:,.0f} ({fps / port:.2f}x" in text or f"{fps:,.0f} frames/s ({fps / port:.2f}x" in text, name
    autotune = json.loads((record / "call-2" / "torch-compiled-autotune-float32-b16.json").read_text())
    first = autotune["results"][0]["train"]["warmup_seconds"][0]
    assert f"{first:.1f} s" in text and f"{first:.1f} s" in readme
    # The Chainer window.
    before, after = (" / ".join(ms("call-1-chainer", f"chainer-torch-eager{side}-r{r}") for r in (1, 2))
                     for side in ("-before", ""))
    window = f"{before} ms per update before, {after} after"
    assert window in text and window in readme


def test_the_cpu_backends_figures_of_the_xeon_are_the_records():
    import lzma

    record = ROOT / "docs" / "benchmarks" / "cpu2-backends-2026-12-07"
    document = json.loads(lzma.decompress((record / "cpu-backends.json.xz").read_bytes()))
    fps = {}
    for result in document["results"]:
        effective = result["runtime"]["effective"]
        assert "AMX" in result["fingerprint"]["cpu"]["model"] + " ".join(result["fingerprint"]["cpu"]["simd"]).upper()
        fps.setdefault((effective["backend"], effective["precision"]), []).append(result["train"]["fps"])
    assert all(len(rounds) == 2 for rounds in fps.values()) and len(fps) == 6
    readme = " ".join((record / "README.md").read_text().split())
    text = " ".join(BENCHMARKS.read_text().split())
    for backend in ("tensorflow", "torch", "jax"):
        f32, bf16 = (fps[(backend, precision)] for precision in ("float32", "mixed_bfloat16"))
        ratio = statistics.mean(bf16) / statistics.mean(f32)
        assert f"{f32[0]:.2f} / {f32[1]:.2f}" in readme and f"{bf16[0]:.2f} / {bf16[1]:.2f}" in readme, backend
        assert f"{f32[0]:.2f} / {f32[1]:.2f}" in text and f"{ratio:.2f}x" in readme, backend
    # The project README's sentence: ranges of the two rounds, one decimal.
    front = " ".join((ROOT / "README.md").read_text().split())

    def span(rounds):
        low, high = (f"{value:.1f}" for value in sorted(rounds))
        return low if low == high else f"{low}-{high}"

    assert (f"float32 ({span(fps[('tensorflow', 'float32')])} frames/s against torch's "
            f"{span(fps[('torch', 'float32')])} and JAX's {span(fps[('jax', 'float32')])})") in front
    assert (f"({span(fps[('torch', 'mixed_bfloat16')])} against TensorFlow's "
            f"{span(fps[('tensorflow', 'mixed_bfloat16')])}") in front
    gains = [statistics.mean(fps[(backend, "mixed_bfloat16")]) / statistics.mean(fps[(backend, "float32")])
             for backend in ("torch", "tensorflow")]
    assert f"{gains[0]:.1f}x and {gains[1]:.1f}x float32" in front


def _median_step_ms(path):
    document = json.loads(path.read_text())
    return document["step_ms_median"] if "port" in document else document["results"][0]["train"]["step_ms"]["median_ms"]


def test_the_carried_views_figures_of_the_cpu_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-channels-first-2026-12-07"
    readme = " ".join((record / "README.md").read_text().split())
    text = " ".join(BENCHMARKS.read_text().split())

    def steps(folder, name, rounds):
        return " / ".join(f"{_median_step_ms(record / folder / f'{name}-r{r}.json'):.1f}" for r in rounds)

    def fps(folder, name, rounds):
        return " / ".join(f"{_fps(record / folder / f'{name}-r{r}.json'):.1f}" for r in rounds)

    short, long = (1, 2, 3), (1, 2, 3, 4)
    row = (f"| 100 steps, in turn with the port | {steps('ab-100', 'torch-eager-before', short)} ms | "
           f"{steps('ab-100', 'torch-eager-after', short)} ms | {steps('ab-100', 'port', short)} ms |")
    assert row in text
    row = (f"| 300 steps | {steps('ab-300', 'torch-eager-before', long)} ms | "
           f"{steps('ab-300', 'torch-eager-after', long)} ms | |")
    assert row in text
    row = (f"| ab-100 | {fps('ab-100', 'torch-eager-before', short)} | {fps('ab-100', 'torch-eager-after', short)} | "
           f"{fps('ab-100', 'port', short)} |")
    assert row in readme
    ratios = [_fps(record / folder / f"torch-eager-after-r{r}.json") / _fps(record / folder / f"torch-eager-before-r{r}.json")
              for folder, rounds in (("ab-100", short), ("ab-300", long)) for r in rounds]
    assert f"{', '.join(f'{x:.2f}' for x in ratios[:3])} (ab-100); {', '.join(f'{x:.2f}' for x in ratios[3:])} (ab-300)" in readme
    assert 1.0 < statistics.mean(ratios) < 1.1
    # The split: each part as the README's table and docs/benchmarks.md give it.
    split = {(side, r): json.loads((record / "split" / f"split-{side}-r{r}.json").read_text())
             for side in ("port", "before", "after") for r in (1, 2)}
    for side, label in (("port", "the port"), ("before", "ours, before"), ("after", "ours, after")):
        parts = [" / ".join(f"{value:.2f}" for value in values) + " ms" for values in (
            [split[side, r]["median_ms"]["forward"] for r in (1, 2)], [split[side, r]["backward_ms"] for r in (1, 2)],
            [split[side, r]["rest_ms"] for r in (1, 2)], [split[side, r]["median_ms"]["step"] for r in (1, 2)])]
        assert f"| {label} | {' | '.join(parts)} |" in readme
    forward = {side: [split[side, r]["median_ms"]["forward"] for r in (1, 2)] for side in ("port", "after")}
    low = min(a / p for a, p in zip(forward["after"], forward["port"]))
    high = max(a / p for a, p in zip(forward["after"], forward["port"]))
    assert f"forward pass, {low:.1f}-{high:.1f}x the port's" in readme and f"forward pass {low:.1f}-{high:.1f}x the port's" in text
    assert f"{low:.1f}-{high:.1f}x;" in text and f"forward pass takes {low:.1f}-{high:.1f}x the port's" in " ".join(
        (ROOT / "README.md").read_text().split())
    backward = [split["after", r]["backward_ms"] / split["port", r]["backward_ms"] for r in (1, 2)]
    assert f"({min(backward):.1f}-{max(backward):.1f}x the port's;" in readme
    assert f"the backward {min(backward):.1f}-{max(backward):.1f}x:" in " ".join((ROOT / "README.md").read_text().split())
    split_text = (f"the port's forward pass {' / '.join(f'{x:.2f}' for x in forward['port'])} ms, "
                  f"ours {' / '.join(f'{x:.2f}' for x in forward['after'])} ms")
    assert split_text in text
    overhead = json.loads((record / "step-overhead-after.json").read_text())["profile"]["by_owner"]
    keras_share, torch_python = (f"{100 * overhead[owner]['share']:.1f}%" for owner in ("keras", "torch (Python)"))
    assert f"{keras_share} of a profiled step's own time" in text and keras_share in readme and torch_python in readme
    compared = _identity_lines(record)
    assert len(compared) == 5 and all("history identical, weights identical" in line for line in compared)


def test_the_h100_carried_views_figures_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "h100-channels-first-2026-12-07"
    readme = " ".join((record / "README.md").read_text().split())
    text = " ".join(BENCHMARKS.read_text().split())
    rounds = [("call-1", "b4-r1"), ("call-1", "b4-r2"), ("call-2", "b4-r3"), ("call-2", "b4-r4"), ("call-2", "b4-r5")]

    def ms(call, folder, name):
        return _median_step_ms(record / call / folder / f"{name}.json")

    big = ("call-1", "b16")
    row = (f"| eager torch, batch 16, median step (call 1) | {ms(*big, 'torch-eager-before-float32-b16'):.1f} ms | "
           f"{ms(*big, 'torch-eager-float32-b16'):.1f} ms | {ms(*big, 'port-b16-r1'):.1f} / {ms(*big, 'port-b16-r2'):.1f} ms |")
    assert row in text
    before, after = (_fps(record / "call-1" / "b16" / f"{name}.json")
                     for name in ("torch-eager-before-float32-b16", "torch-eager-float32-b16"))
    port = statistics.mean(_fps(record / "call-1" / "b16" / f"port-b16-r{r}.json") for r in (1, 2))
    assert f"{before / port:.2f}x to {after / port:.2f}x the port ({before:,.0f} -> {after:,.0f} frames/s)" in text
    assert f"{before / port:.2f}x -> {after / port:.2f}x the port" in readme
    row = ("| eager torch, batch 4, median step (calls 1, 2: five rounds) | "
           + " / ".join(f"{ms(c, f, 'torch-eager-before-float32-b4'):.1f}" for c, f in rounds) + " ms | "
           + " / ".join(f"{ms(c, f, 'torch-eager-float32-b4'):.1f}" for c, f in rounds) + " ms | "
           + " / ".join(f"{ms(c, f, 'port-b4-r1'):.1f}, {ms(c, f, 'port-b4-r2'):.1f}" for c, f in rounds) + " ms |")
    assert row in text
    pairs = " ".join(f"{ms(c, f, 'torch-eager-before-float32-b4'):.1f} / {ms(c, f, 'torch-eager-float32-b4'):.1f},"
                     for c, f in rounds)
    assert pairs.rstrip(",") in readme.replace(" ms;", ",").replace(" ms", "")
    ports = [ms(c, f, f"port-b4-r{r}") for c, f in rounds for r in (1, 2)]
    spread = f"{min(ports):.1f} to {max(ports):.1f} ms"
    assert spread in text and spread in readme
    # Ours against the port's mean in its round, by median step.
    ratios = [statistics.mean(ms(c, f, f"port-b4-r{r}") for r in (1, 2)) / ms(c, f, "torch-eager-float32-b4")
              for c, f in rounds]
    assert f"{min(ratios):.2f}x-{max(ratios):.2f}x" in text
    assert f"{min(ratios):.2f}x-{max(ratios):.2f}x the port in five rounds" in " ".join((ROOT / "README.md").read_text().split())


def test_the_h100_compiled_call_of_the_carried_views_record():
    call = ROOT / "docs" / "benchmarks" / "h100-channels-first-2026-12-07" / "call-3"
    readme = " ".join((call.parent / "README.md").read_text().split())
    text = " ".join(BENCHMARKS.read_text().split())
    port = [_fps(call / f"port-b16-r{r}.json") for r in (1, 2)]
    document = json.loads((call / "torch-compiled-float32-b16.json").read_text())
    train = document["results"][0]["train"]
    fps, first = train["fps"], train["warmup_seconds"][0]
    assert train["torch_inductor_cache"]["hits"] == 0
    figures = f"{fps:,.0f} frames/s, {fps / statistics.mean(port):.2f}x the port"
    assert figures in readme and figures in text
    assert f"({port[0]:,.0f} / {port[1]:,.0f} frames/s in its two rounds)" in readme
    assert f"{first:.1f} s with the empty cache" in readme and f"{first:.1f} s with an empty Inductor cache" in text
    tree = (call / "logs" / "tree.txt").read_text().split()[-1]
    assert tree.startswith("4f8ab28")


def test_the_nested_region_figures_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-nested-region-2026-12-07"
    readme = " ".join((record / "README.md").read_text().split())
    text = " ".join(BENCHMARKS.read_text().split())
    probe = {name: json.loads((record / f"probe-{name}.json").read_text())
             for name in ("base-first", "base-later", "nested-first", "nested-later")}
    assert all(document["graph_breaks"] == 0 and document["torch"] == "2.13.0+cpu" for document in probe.values())
    first = {name: f"{document['first_call_seconds']:.1f} s" for name, document in probe.items()}
    tracing = {name: f"{document['phases']['bytecode_tracing']['seconds']:.1f} s" for name, document in probe.items()}
    assert f"| first step, empty cache | {first['base-first']} | {first['nested-first']} |" in readme
    assert (f"| first step, a later process (every graph from the cache) | {first['base-later']} | "
            f"{first['nested-later']} |") in readme
    assert f"| {tracing['base-later']} | {tracing['nested-later']} |" in readme
    later = f"first step {first['base-later']} -> {first['nested-later']}"
    assert later.replace(" s ->", " ->") in text
    assert f"tracing {tracing['base-later'][:-2]} -> {tracing['nested-later']}" in text
    assert f"{first['base-first']} and {first['nested-first']}" in text
    plain = [json.loads((record / f"bench-plain-{r}.json").read_text())["results"][0]["train"]["fps"] for r in (1, 2)]
    assert f"{plain[0]:.1f} and {plain[1]:.1f} frames/s" in readme and f"{plain[0]:.1f} and {plain[1]:.1f} frames/s" in text
    crash = (record / "crash.txt").read_text()
    assert "free(): invalid next size" in crash and "corrupted double-linked list" in crash
    assert crash.count("failed (exit -6)") == 2
    assert "nested_compile_region" in (record / "nested-region.patch").read_text()


def test_the_chainer_later_process_figures_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-chainer-compiled-later-2026-12-07"
    readme = " ".join((record / "README.md").read_text().split())
    text = " ".join(BENCHMARKS.read_text().split())
    runs = {(kind, r): json.loads((record / f"{kind}-{r}.json").read_text())["results"][0]["train"]
            for kind in ("cold", "warm", "eager") for r in (1, 2, 3)}
    median = {key: train["step_ms"]["median_ms"] for key, train in runs.items()}
    first = {key: train["warmup_seconds"][0] for key, train in runs.items()}
    for r in (1, 2, 3):
        cold, warm, eager = (median[(kind, r)] for kind in ("cold", "warm", "eager"))
        assert (f"| {r} | {cold:.1f} ms / {first[('cold', r)]:.1f} s | {warm:.1f} ms / {first[('warm', r)]:.1f} s | "
                f"{eager:.1f} ms | {warm / cold:.2f} |") in readme
        assert f"| {r} | {cold:.1f} ms | {warm:.1f} ms | {eager:.1f} ms |" in text
        # Every graph of the later process came from the cache the compiling one filled; the same graphs ran.
        assert runs[("warm", r)]["torch_inductor_cache"]["misses"] == 0
        assert runs[("warm", r)]["torch_inductor_cache"]["hits"] == 22 and runs[("cold", r)]["torch_inductor_cache"]["misses"] == 21
        assert runs[("cold", r)]["torch_compiled_graphs"] == runs[("warm", r)]["torch_compiled_graphs"]
        assert runs[("cold", r)]["torch_compiled_graphs"]["after_timed_steps"] == 14
        assert runs[("eager", r)]["torch_compiled_graphs"]["after_timed_steps"] == 0
    later = [median[("warm", r)] / median[("cold", r)] for r in (1, 2, 3)]
    slower = [median[("cold", r)] / median[("eager", r)] for r in (1, 2, 3)]
    span = f"{min(later):.2f}-{max(later):.2f}"
    assert f"{span} of the compiling process's median update" in readme and f"{span} of the compiling one's" in text
    assert f"not slower ({span}, above)" in text
    assert f"{min(slower):.2f}-{max(slower):.2f}x" in readme and f"{min(slower):.2f}-{max(slower):.2f}x slower" in text
    warm_first = sorted(first[("warm", r)] for r in (1, 2, 3))
    cold_first = sorted(first[("cold", r)] for r in (1, 2, 3))
    assert f"{warm_first[0]:.1f}-{warm_first[-1]:.1f} s against {cold_first[0]:.1f}-{cold_first[-1]:.1f} s" in text


def test_the_undonated_window_figures_are_the_records():
    record = ROOT / "docs" / "benchmarks" / "cpu2-chainer-undonated-2026-12-07"
    readme = " ".join((record / "README.md").read_text().split())
    text = " ".join(BENCHMARKS.read_text().split())
    check = json.loads((record / "donation-check.json").read_text())
    donated, not_donated = check["donated"], check["not_donated"]
    flops = f"{donated['flops']:,.0f}"
    assert donated["flops"] == not_donated["flops"] and donated["median_update_ms"] > not_donated["median_update_ms"]
    assert f"| compiled with donation (Keras' trainer) | {donated['median_update_ms']} ms | {flops} |" in readme
    assert f"| compiled without | {not_donated['median_update_ms']} ms | {flops} |" in readme
    assert (f"took {donated['median_update_ms']} ms per update compiled with donation and "
            f"{not_donated['median_update_ms']} ms without, the same {flops} FLOPs") in text
    ratios = []
    for r in (1, 2, 3):
        before, after = (json.loads((record / f"bench-{side}-{r}.json").read_text())["results"][0]["train"]
                         for side in ("before", "after"))
        ratio = after["fps"] / before["fps"]
        ratios.append(ratio)
        assert (f"| {r} | {before['fps']:.2f} ({before['step_ms']['median_ms']:.1f} ms) | {after['fps']:.2f} "
                f"({after['step_ms']['median_ms']:.1f} ms) | {ratio:.3f} |") in readme
        assert f"| {r} | {before['fps']:.2f} | {after['fps']:.2f} | {ratio:.3f} |" in text
    assert f"({min(ratios):.3f}-{max(ratios):.3f}x on 2 CPU cores, above)" in text
    probes = {name: json.loads((record / f"probe-{name}.json").read_text())
              for name in ("before-1", "before-2", "after")}
    gaps = {}
    for name, probe in probes.items():
        assert probe["stateless"]["identical"] and probe["one program"]["identical"]
        keras_ms = 1000 * probe["keras_step"]["seconds_per_seed_update"]
        stateless_ms = 1000 * probe["stateless"]["seconds_per_seed_update"]
        gaps[name] = f"{keras_ms / stateless_ms:.3f}"
        label = {"before-1": "before, run 1", "before-2": "before, run 2", "after": "after"}[name]
        assert f"| {label} | {keras_ms:.2f} ms | {stateless_ms:.2f} ms | {gaps[name]} |" in readme
    assert f"{gaps['before-1']} and {gaps['before-2']} before, {gaps['after']} after" in text


def test_the_h100_step_waits_figures_are_the_records():
    import tarfile

    record = ROOT / "docs" / "benchmarks" / "h100-torch-step-waits-2026-12-07"
    readme = " ".join((record / "README.md").read_text().split())
    text = " ".join(BENCHMARKS.read_text().split())
    probe = json.loads((record / "call-1" / "torch_step_waits.json").read_text())
    fps = {b["batch_size"]: b["frames_per_s"] for b in probe["batches"]}
    labels = {"as-is": "as-is (prednet-train's loop)", "async-callbacks": "the logs converted in Keras' pool",
              "device-batches": "the batch already on the GPU", "both": "both"}
    for name, label in labels.items():
        assert f"| {label} | {fps[4][name]:,.1f} | {fps[16][name]:,.1f} |" in readme
        assert f"{fps[4][name]:,.1f} / {fps[16][name]:,.1f}" in text
    for batch in probe["batches"]:
        assert batch["async_safe"] == {"as-is": False, "async-callbacks": True, "device-batches": False, "both": True}
        sites = {site.split("core.py:")[-1]: n for site, n in batch["sync_sites_in_3_as_is_steps"].items()
                 if "keras/src/backend/torch/core.py" in site}
        assert sites == {"221": 22, "259": 12, "269": 12}
        assert sum(sites.values()) / 3 == pytest.approx(15, abs=0.5)  # "about 15 waits a step"
    with tarfile.open(record / "call-1" / "port_h200.tgz") as archive:
        def fps_of(name):
            document = json.load(archive.extractfile(f"./{name}.json"))
            return document["fps"] if name.startswith("port") else document["results"][0]["train"]["fps"]

        port = {b: [fps_of(f"port-b{b}-r{r}") for r in (1, 2)] for b in (4, 16)}
        main = {b: fps_of(f"torch-eager-before-float32-b{b}") for b in (4, 16)}
        patch = {b: fps_of(f"torch-eager-float32-b{b}") for b in (4, 16)}
        jax = [fps_of(f"jax-{p}-cm8-b16") for p in ("float32", "bf16")]
    x = {b: (main[b] / statistics.mean(port[b]), patch[b] / statistics.mean(port[b])) for b in (4, 16)}
    assert f"| the port, two rounds | {port[4][0]:,.0f} / {port[4][1]:,.0f} | {port[16][0]:,.0f} / {port[16][1]:,.0f} |" in readme
    assert f"| main (2779500) | {main[4]:,.0f} ({x[4][0]:.2f}x the port) | {main[16]:,.0f} ({x[16][0]:.2f}x) |" in readme
    assert f"| the patch | **{patch[4]:,.0f} ({x[4][1]:.2f}x)** | {patch[16]:,.0f} ({x[16][1]:.2f}x) |" in readme
    assert (f"batch 4 {patch[4]:,.0f} against {main[4]:,.0f} frames/s ({x[4][1]:.2f}x against {x[4][0]:.2f}x the "
            f"port), batch 16 {patch[16]:,.0f} against {main[16]:,.0f}") in text
    assert f"eager torch **{x[4][0]:.2f}x at batch 4, {x[16][0]:.2f}x at batch 16**" in text
    assert f"JAX with the channel alignment {jax[0]:,.0f} (float32) and {jax[1]:,.0f} (mixed_bfloat16)" in text
    assert f"float32 {jax[0]:,.0f} frames/s ({jax[0] / statistics.mean(port[16]):.2f}x the port)" in readme
    arm = (record / "call-2" / "arm" / "summary.txt").read_text()
    assert "exit 0, 150 s wall, 30 of 30 runs complete" in arm and "**150 s**" in text and "**150 s for the whole arm**" in readme
    assert arm.count("history (all but seconds) identical; final weights identical") == 2
    for digest in ("25e1a52ec73e", "01b73a79f21d"):
        assert f"sha256 {digest}" in arm and digest in readme
    seeds = json.loads((record / "call-2" / "seed_batching.json").read_text())
    keras_ms, stateless_ms = (1000 * seeds[k]["seconds_per_seed_update"] for k in ("keras_step", "stateless"))
    assert f"**{keras_ms:.1f} ms per update** against {stateless_ms:.1f} ms" in readme
    assert f"in the same process ({keras_ms / stateless_ms:.2f});" in readme
    assert f"the protocol's update {keras_ms:.1f} ms against {stateless_ms:.1f} ms" in text
