"""prednet-study report on synthetic run folders from two "machines"."""

import json
import shutil

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from prednet_keras.cli.study import main
from prednet_keras.session import folder as run_folders
from prednet_keras.study.report import configurations
from prednet_keras.study import report as study_report
from prednet_keras.study.report import ReportOptions, build_report, make_report

from .synthetic_runs import write_run

SEEDS = range(8)
# A smaller permutation budget than the default keeps the tests quick; the
# statistics are the same.
FAST = dict(permutations=500)


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    """Two result folders: a CPU box (1 and 2 threads) and a GPU box (a planted
    shift; a TF32-off arm whose "deterministic" repeats differ), plus
    trajectories, a 1-ulp baseline, a failed run and a run copied to both."""
    root = tmp_path_factory.mktemp("study")
    cpu, gpu = root / "cpu-box", root / "gpu-box"
    for seed in SEEDS:
        trajectory = (0.0, 0) if seed < 4 else None
        write_run(cpu, f"t1-s{seed}", seed=seed, threads=1, trajectory=trajectory)
        # Other threads: other rounding, same distribution; shared seed level.
        write_run(cpu, f"t2-s{seed}", seed=seed, threads=2, noise=1)
        write_run(gpu, f"gpu-s{seed}", seed=seed, machine="gpu-box", device="gpu", shift=0.05, noise=2,
                  trajectory=(1.0, 1) if seed < 4 else None)
    for seed in (0, 1):
        write_run(cpu, f"t1-s{seed}-r1", seed=seed, threads=1, replicate=1, trajectory=(0.0, 0))
        write_run(gpu, f"gpu-s{seed}-r1", seed=seed, machine="gpu-box", device="gpu", shift=0.05, noise=2,
                  replicate=1)
    for seed in range(4):
        write_run(gpu, f"tf32off-s{seed}", seed=seed, machine="gpu-box", device="gpu", tf32=False)
    write_run(gpu, "tf32off-s0-r1", seed=0, machine="gpu-box", device="gpu", tf32=False, replicate=1, noise=5)
    for seed in range(4):
        write_run(cpu, f"t1-s{seed}-ulp", seed=seed, threads=1, perturbation="ulp", trajectory=(0.1, 2))
    write_run(cpu, "t1-broken", seed=9, threads=1, status="failed")
    shutil.copytree(cpu / "t1-s3", gpu / "copied" / "t1-s3")
    return cpu, gpu


def _config(section, **match):
    found = [c for c in section["configurations"]
             if all(c["settings"].get(k) == v for k, v in match.items() if k != "host")
             and ("host" not in match or match["host"] in c["hosts"])]
    assert len(found) == 1, [c["label"] for c in section["configurations"]]
    return found[0]


def _pair(section, a, b):
    for pair in section["comparisons"]["pairs"]:
        if {pair["a"], pair["b"]} == {a["id"], b["id"]}:
            return pair
    raise AssertionError(f"no pair {a['id']}-{b['id']}")


@pytest.fixture(scope="module")
def merged(machines, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    report = make_report(list(machines), out, ReportOptions(**FAST))
    return report, out


def test_two_machines_merge_into_one_report(merged):
    report, out = merged
    for name in ("report.md", "report.json", "final_metric.png", "loss_curves.png", "divergence.png"):
        assert (out / name).is_file(), name
    assert json.loads((out / "report.json").read_text())["runs_used"] == report["runs_used"]
    (section,) = report["protocols"]
    assert len(section["configurations"]) == 4
    assert {h for c in section["configurations"] for h in c["hosts"]} == {"cpu-box", "gpu-box"}
    assert len(section["comparisons"]["pairs"]) == 6
    # 8 + 2 (t1) + 8 (t2) + 8 + 2 (gpu) + 5 (tf32 off); the copy, the failed run
    # and the 4 nudged runs are not data.
    assert report["runs_used"] == 33
    assert report["perturbed_runs"] == 4
    reasons = " ".join(e["reason"] for e in report["excluded"])
    assert "duplicate of" in reasons and "status 'failed'" in reasons
    assert section["metric"]["name"] == "final_loss_mean"
    assert section["starting_points"]["same_start"]


def test_verdicts(merged):
    report, _ = merged
    (section,) = report["protocols"]
    t1 = _config(section, threads=1)
    t2 = _config(section, threads=2)
    gpu = _config(section, device="gpu", tf32=None)
    assert "NVIDIA H200" in gpu["label"] and "Intel" in t1["label"]
    same = _pair(section, t1, t2)
    assert same["design"] == "paired" and same["shared_seeds"] == 8
    assert same["verdict"].startswith("equivalent within +/- ")
    for cpu in (t1, t2):
        shifted = _pair(section, cpu, gpu)
        assert shifted["verdict"] == "difference detected"
        assert shifted["p_holm"]["primary"] < 0.05
    assert t1["summary"]["n"] == 8 and t1["runs"] == 10  # replicates averaged per seed


def test_determinism_audit_flags_the_defect(merged):
    report, out = merged
    (section,) = report["protocols"]
    t1 = _config(section, threads=1)
    assert t1["determinism"]["status"] == "deterministic"
    assert (t1["determinism"]["identical"], t1["determinism"]["audited"]) == (2, 2)
    broken = _config(section, tf32=False)
    assert broken["determinism"]["status"] == "defect"
    assert broken["determinism"]["differing_seeds"] == [0]
    assert any("claims determinism" in w for w in report["warnings"])
    assert "**DEFECT**" in (out / "report.md").read_text()


def test_determinism_audit_measures_the_run_to_run_metric_difference(machines, merged):
    report, out = merged
    (section,) = report["protocols"]
    metric = section["metric"]["name"]
    _, gpu = machines
    first, repeat = (study_report.load_run(gpu / name).metric(metric) for name in ("tf32off-s0", "tf32off-s0-r1"))
    broken = _config(section, tf32=False)["determinism"]
    assert broken["max_metric_difference"] == pytest.approx(abs(repeat - first)) and broken["max_metric_difference"] > 0
    assert broken["metric_repeats"] == 1
    t1 = _config(section, threads=1)["determinism"]
    assert (t1["max_metric_difference"], t1["metric_repeats"]) == (0.0, 2)
    t2 = _config(section, threads=2)["determinism"]
    assert (t2["max_metric_difference"], t2["metric_repeats"]) == (None, 0)  # no repeats
    saved = json.loads((out / "report.json").read_text())["protocols"][0]["configurations"]
    assert {c["id"]: c["determinism"]["max_metric_difference"] for c in saved} == {
        c["id"]: c["determinism"]["max_metric_difference"] for c in section["configurations"]}
    ids = {c["id"] for c in section["configurations"]}
    rows = {line.split(" | ")[0].lstrip("| "): line for line in (out / "report.md").read_text().splitlines()
            if line.split(" | ")[0].lstrip("| ") in ids and line.count(" | ") > 5}
    broken_id = _config(section, tf32=False)["id"]
    assert (f"**DEFECT**: defect (0/1 repeats identical; metric differs by up to "
            f"{abs(repeat - first):.2g})") in rows[broken_id]
    # Identical repeats: the count says it; no repeats: nothing to say.
    assert rows[_config(section, threads=1)["id"]].endswith("| deterministic (2/2 repeats identical) |")
    assert rows[_config(section, threads=2)["id"]].endswith("| not audited |")
    assert "'metric differs by up to' is the largest absolute difference" in (out / "report.md").read_text()


def test_curves_and_divergence(merged):
    report, _ = merged
    (section,) = report["protocols"]
    t1, t2 = _config(section, threads=1), _config(section, threads=2)
    gpu = _config(section, device="gpu", tf32=None)
    tests = {frozenset((t["a"], t["b"])): t for t in section["curves"]["tests"]}
    shifted = tests[frozenset((t1["id"], gpu["id"]))]
    assert shifted["differs"]
    # The planted shift grows with the step: the first checkpoints do not differ.
    assert not shifted["significant"][0] and shifted["significant"][-1]
    assert not tests[frozenset((t1["id"], t2["id"]))]["differs"]

    divergence = section["divergence"]
    (between,) = divergence["between"]
    assert {between["a"], between["b"]} == {t1["id"], gpu["id"]}
    assert between["n"] == 4 and between["final_median"] > 0.5
    (baseline,) = divergence["baseline"]
    assert baseline["configuration"] == t1["id"] and baseline["perturbation"] == "ulp"
    assert 0 < baseline["final_median"] < between["final_median"]
    (replicates,) = divergence["replicates"]
    assert replicates["final_median"] == 0.0  # deterministic replicates do not diverge


def test_markdown_says_it_in_words(merged):
    _, out = merged
    text = (out / "report.md").read_text()
    assert "difference detected" in text and "equivalent within +/-" in text
    assert "![loss curves](loss_curves.png)" in text
    assert "| configuration | what it is |" in text


def test_each_machine_alone_and_merged(machines):
    cpu, gpu = machines
    alone = [build_report([d], ReportOptions(**FAST))[0] for d in (cpu, gpu)]
    assert [len(r["protocols"][0]["configurations"]) for r in alone] == [2, 3]
    merged, _ = build_report([cpu, gpu], ReportOptions(**FAST))
    assert merged["runs_used"] == sum(r["runs_used"] for r in alone) - 1  # the copied run counts once


def test_report_is_reproducible(machines):
    first, _ = build_report(list(machines), ReportOptions(**FAST))
    again, _ = build_report(list(machines), ReportOptions(**FAST))
    strip = lambda r: json.dumps({**r, "created": None}, default=str, sort_keys=True)
    assert strip(first) == strip(again)


def test_protocols_are_never_mixed(tmp_path):
    for seed in range(3):
        write_run(tmp_path, f"a{seed}", seed=seed, threads=1)
        write_run(tmp_path, f"b{seed}", seed=seed, threads=2)
        write_run(tmp_path, f"c{seed}", seed=seed, threads=1, model_name="chainer-prednet")
    report = make_report([tmp_path], tmp_path / "out", ReportOptions(plots=True, **FAST))
    assert [len(p["configurations"]) for p in report["protocols"]] == [2, 1]
    assert any("2 different protocols" in w and "model" in w for w in report["warnings"])
    assert (tmp_path / "out" / "P1-final_metric.png").is_file()
    assert (tmp_path / "out" / "P2-loss_curves.png").is_file()


def test_metric_choice(tmp_path):
    for seed in range(3):
        write_run(tmp_path, f"a{seed}", seed=seed, protocol=None, metrics=False)
        write_run(tmp_path, f"b{seed}", seed=seed, threads=2, protocol=None, metrics=False)
    report, _ = build_report([tmp_path], ReportOptions(**FAST))
    assert report["protocols"][0]["metric"]["name"] == "final_loss"
    report, _ = build_report([tmp_path], ReportOptions(metric="last_steps:10", **FAST))
    section = report["protocols"][0]
    assert section["metric"] == {"name": "last_steps:10", "from": "--metric"}
    # The synthetic final_loss is the mean of the last 10 steps too.
    run = study_report.load_run(tmp_path / "a0")
    assert run.metric("last_steps:10") == pytest.approx(run.metric("final_loss"))
    report, _ = build_report([tmp_path], ReportOptions(metric="nonexistent", **FAST))
    assert any("no value for metric 'nonexistent'" in w for w in report["warnings"])
    assert report["protocols"][0]["configurations"][0]["summary"]["n"] == 0


def test_protocol_metric_record_and_study_settings(tmp_path):
    # protocols.py gives {"name", "value", "count", "description"}; an arm
    # factor that is not a runtime setting comes in study.settings.
    for seed in range(4):
        for aliasing in (False, True):
            path = write_run(tmp_path, f"s{seed}-{aliasing}", seed=seed, protocol={"name": "paper", "period": 5000},
                             metrics=False, shift=0.1 if aliasing else 0.0, noise=int(aliasing))
            manifest = run_folders.RunFolder(path).read_manifest()
            value = study_report.load_run(path).metric("last_steps:10")
            manifest["metric"] = {"name": "mean_last_10_updates", "value": value, "count": 10}
            manifest["study"]["settings"] = {"emulate_cpu_aliasing": aliasing}
            run_folders.RunFolder(path).write_manifest(manifest)
    report, _ = build_report([tmp_path], ReportOptions(**FAST))
    (section,) = report["protocols"]
    assert section["metric"] == {"name": "mean_last_10_updates", "from": "metric.name in the manifests"}
    labels = sorted(c["label"] for c in section["configurations"])
    assert [("emulate_cpu_aliasing=True" in label) for label in labels] == [False, True]
    (pair,) = section["comparisons"]["pairs"]
    assert pair["design"] == "paired" and pair["verdict"] == "difference detected"


def test_different_initial_weights_are_flagged(tmp_path):
    for seed in range(3):
        write_run(tmp_path, f"a{seed}", seed=seed, threads=1)
        write_run(tmp_path, f"b{seed}", seed=seed, threads=2, initial_checksum="x" * 64 if seed == 1 else None)
    report, _ = build_report([tmp_path], ReportOptions(**FAST))
    assert report["protocols"][0]["starting_points"]["differ"] == [1]
    assert any("seed 1 started from different initial weights" in w for w in report["warnings"])


def test_the_code_the_runs_were_made_with_is_listed(tmp_path):
    commit, other = "a" * 40, "b" * 40
    codes = [{"commit": commit, "dirty": False, "source": "git", "package_sha256": "1" * 64},
             {"commit": other, "dirty": True, "source": "environment", "package_sha256": "2" * 64},
             None]
    for seed in range(3):
        for arm, code in enumerate(codes):
            write_run(tmp_path, f"{arm}-{seed}", seed=seed, threads=arm + 1,
                      extra={"code": code} if code else None)
    write_run(tmp_path, "0-3", seed=3, threads=1, extra={"code": codes[0]})
    report, _ = build_report([tmp_path], ReportOptions(**FAST, plots=False))
    assert [(row["commit"], row["dirty"], row["runs"]) for row in report["code"]] == [
        (commit, False, 4), (other, True, 3), (None, None, 3)]
    assert [row["recorded"] for row in report["code"]] == [True, True, False]
    text = study_report.render_markdown(report)
    assert f"| `{commit}` | no | 111111111111 | 4 |" in text
    assert f"| `{other}` | yes | 222222222222 | 3 |" in text
    assert "| not recorded (made before manifests recorded their code) | n/a | n/a | 3 |" in text


def _write_checkpoint(path, seed, tweak=0.0):
    folder = run_folders.RunFolder(path)
    checkpoint = folder.checkpoint_path(2)
    checkpoint.parent.mkdir(exist_ok=True)
    weights = np.random.default_rng(seed).standard_normal((3, 3, 4)).astype("float32")
    weights[0, 0, 0] += tweak
    with h5py.File(checkpoint, "w") as handle:
        handle["layers/conv/vars/0"] = weights
        handle["optimizer/vars/0"] = np.array(4, dtype="int64")
    folder.write_state({"epoch": 2, "checkpoint": str(checkpoint.relative_to(folder.path))})


def test_weights_checksum_from_the_checkpoint(tmp_path):
    for name, tweak in (("r0", 0.0), ("r1", 0.0), ("r2", 1e-6)):
        path = write_run(tmp_path, name, seed=0, record_weights_checksum=False)
        _write_checkpoint(path, 0, tweak)
    r0, r1, r2 = (study_report.load_run(tmp_path / n) for n in ("r0", "r1", "r2"))
    assert r0.weights_checksum == r1.weights_checksum != r2.weights_checksum
    assert r0.curve_checksum == r2.curve_checksum
    report, _ = build_report([tmp_path], ReportOptions(**FAST))
    audit = report["protocols"][0]["configurations"][0]["determinism"]
    assert audit["status"] == "defect" and audit["identical"] == 1 and audit["audited"] == 2
    assert report["runs"][0]["weights_checksum_from"] == "checkpoint"


def test_cli(machines, tmp_path):
    cpu, gpu = machines
    out = tmp_path / "report"
    runner = CliRunner()
    args = ["report", str(cpu), str(gpu), "-o", str(out), "--no-plots", "--permutations", "200"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "difference detected" in result.output
    assert "DETERMINISM DEFECT" in result.output
    assert (out / "report.md").is_file() and not (out / "loss_curves.png").exists()

    again = runner.invoke(main, args)
    assert again.exit_code == 1 and "--overwrite" in again.output
    result = runner.invoke(main, args + ["--overwrite", "--margin", "0.5", "--metric", "last_steps:5"])
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "report.json").read_text())
    assert saved["protocols"][0]["comparisons"]["margin"] == 0.5
    assert saved["protocols"][0]["comparisons"]["margin_rule"] == "fixed"

    missing = runner.invoke(main, ["report", str(tmp_path / "nowhere"), "-o", str(out)])
    assert missing.exit_code == 2
    bad = runner.invoke(main, ["report", str(cpu), "-o", str(out), "--overwrite", "--margin", "-1"])
    assert bad.exit_code == 2


def test_unrolling_the_loop_does_not_split_a_protocol():
    from prednet_keras.study.report.configurations import protocol_identity

    model = {"name": "prednet", "layer": "prednet_keras.layers.lotter.PredNet", "kwargs": {"stack_sizes": [3, 4]}}
    before = {"model": model, "schedule": {"epochs": 2}, "data": {"train": {"checksum": "sha256:1"}}}
    after = {**before, "model": {**model, "kwargs": {"stack_sizes": [3, 4], "unroll": True}}}
    assert protocol_identity(before) == protocol_identity(after)
    other = {**before, "model": {**model, "kwargs": {"stack_sizes": [3, 5]}}}
    assert protocol_identity(other) != protocol_identity(before)


def test_augmented_runs_are_another_protocol_and_unaugmented_ones_are_not():
    from prednet_keras.study.report.configurations import protocol_identity

    model = {"name": "prednet", "layer": "prednet_keras.layers.lotter.PredNet", "kwargs": {"stack_sizes": [3, 4]}}
    before = {"model": model, "schedule": {"epochs": 2}, "data": {"train": {"checksum": "sha256:1"}}}
    plain = {**before, "schedule": {"epochs": 2, "augment": []}}
    flipped = {**before, "schedule": {"epochs": 2, "augment": ["flip"]}}
    assert protocol_identity(plain) == protocol_identity(before)
    assert protocol_identity(flipped) != protocol_identity(plain)
    # A run that never started is identified by its options.
    assert protocol_identity({"options": {"epochs": 2, "augment": ["flip"]}}) != protocol_identity(
        {"options": {"epochs": 2}})


def test_repeats_with_other_weights_but_the_same_metric_say_so():
    from prednet_keras.study.stats import determinism_audit
    from prednet_keras.study.report.wording import determinism_cell

    audit = determinism_audit.determinism_audit(
        [{"seed": 0, "weights_checksum": "a", "curve_checksum": "x", "metric": 0.25},
         {"seed": 0, "weights_checksum": "b", "curve_checksum": "y", "metric": 0.25}],
        claims_determinism=False,
    )
    assert determinism_cell(audit) == "not deterministic (0/1 repeats identical; the metric itself equal)"


def _named_run(root, name, seed, configuration, **kwargs):
    return write_run(root, name, seed=seed, extra={"study": {"replicate": 1, "perturbation": None,
                                                             "configuration": configuration}}, **kwargs)


def test_configurations_are_named_by_the_spec_and_described_by_what_they_are(tmp_path):
    for seed in range(4):
        _named_run(tmp_path / "a", f"cpu-{seed}", seed, "cpu-tf", threads=2)
        _named_run(tmp_path / "a", f"gpu-{seed}", seed, "gpu-tf", machine="gpu-box", device="gpu")
        # The same arm run by a second study under another name: one configuration, two names.
        _named_run(tmp_path / "b", f"gpu-{seed}", seed, "gpu-default", machine="gpu-box", device="gpu", noise=3)
        _named_run(tmp_path / "b", f"no-tf32-{seed}", seed, "gpu-no-tf32", machine="gpu-box", device="gpu",
                   tf32=False)
    report, _ = build_report([tmp_path / "a", tmp_path / "b"], ReportOptions(**FAST))
    configs = {c["id"]: c for c in report["protocols"][0]["configurations"]}
    assert sorted(configs) == ["cpu-tf", "gpu-default", "gpu-no-tf32"]  # gpu-tf and gpu-default merged
    assert configs["gpu-default"]["names"] == ["gpu-default", "gpu-tf"]
    # The label names the library, the device and the precision the convolutions ran in.
    assert configs["cpu-tf"]["label"] == ("TensorFlow 2.21.0, CPU (Intel(R) Core(TM) i7-6800K CPU @ 3.40GHz), "
                                          "2 threads, deterministic, float32")
    assert configs["gpu-default"]["label"].endswith("TF32 on (default)")
    assert configs["gpu-no-tf32"]["label"].endswith("TF32 off")
    text = study_report.render_markdown(report)
    assert "| gpu-default | TensorFlow 2.21.0, GPU (NVIDIA H200), deterministic, TF32 on (default) (also named gpu-tf)" in text
    assert "C1" not in text


def test_one_spec_name_on_two_machines_names_two_configurations(tmp_path):
    for seed in range(3):
        _named_run(tmp_path, f"intel-{seed}", seed, "cpu-tf", threads=2)
        _named_run(tmp_path, f"amd-{seed}", seed, "cpu-tf", threads=2, machine="gpu-box")
    report, _ = build_report([tmp_path], ReportOptions(**FAST))
    assert sorted(c["id"] for c in report["protocols"][0]["configurations"]) == [
        "cpu-tf@amd-epyc-9334-32-core-pr", "cpu-tf@intel-r-core-tm-i7-6800k"]


def test_configurations_without_spec_names_get_names_from_their_settings(merged):
    report, _ = merged
    ids = sorted(c["id"] for c in report["protocols"][0]["configurations"])
    # Only what tells them apart: threads, TF32 (deterministic is the same for all).
    assert ids == ["tensorflow-cpu-1-thread", "tensorflow-cpu-2-threads", "tensorflow-gpu", "tensorflow-gpu-no-tf32"]


def test_the_report_opens_with_a_one_sentence_answer(merged):
    report, out = merged
    first = (out / "report.md").read_text().splitlines()[2]
    sentence = study_report.answer(report["protocols"][0])
    assert first == f"**Answer:** {sentence}"
    assert sentence.count(". ") == 0 and sentence.endswith(".")
    assert "pairs of configurations differ in `final_loss_mean`" in sentence
    assert "tensorflow-cpu-1-thread vs tensorflow-cpu-2-threads" in sentence  # the equivalent pair, named


def test_paired_pairs_lead_with_the_per_seed_differences(merged):
    report, out = merged
    text = (out / "report.md").read_text()
    assert text.index("## Paired tests") < text.index("## Spread and effect size")
    (section,) = report["protocols"]
    pair = _pair(section, _config(section, threads=1), _config(section, threads=2))
    per_seed = pair["seed_differences"]
    assert per_seed["n"] == 8 and per_seed["beyond_margin"] is not None
    assert "ci" not in pair["hedges_g"]  # no bootstrap interval of g any more
    assert f"| {pair['a']} vs {pair['b']} | 8 | " in text


def test_precision_names_a_configuration_and_older_runs_were_float32():
    settings = configurations.configuration_settings
    base = {"backend": "jax", "device": "gpu", "threads": None, "deterministic": False}
    # Manifests from before `precision`, and float32 ones: the same configuration, as before.
    assert settings(base, {}) == settings(dict(base, precision="float32"), {})
    assert "precision" not in settings(base, {})
    bf16 = settings(dict(base, precision="mixed_bfloat16"), {})
    assert bf16["precision"] == "mixed_bfloat16" and bf16 != settings(base, {})
    label = configurations.describe_settings(bf16, {"backend_version": "0.11"}, {"tf32": True, "tf32_applies": True})
    assert "bfloat16 convolutions (mixed_bfloat16)" in label and "TF32" not in label and "precision=" not in label
