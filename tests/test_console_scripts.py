"""Every console script as a user runs it: the installed entry point, in a fresh process, from a folder
outside the checkout, with KERAS_BACKEND unset (the default backend decides).

For each script: --help answers without importing a deep-learning framework, and one real invocation
does its job with exit status 0 and no framework start-up chatter or traceback on stderr. The last test
runs training, evaluation, a study and a benchmark with credentials in the environment and looks for
them in every file the runs wrote.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from prednet_keras import _framework_import

BIN = Path(sys.executable).parent
SCRIPTS = ("prednet-import", "prednet-data", "prednet-env", "prednet-train", "prednet-eval", "prednet-study",
           "prednet-bench")
FRAMEWORKS = ("keras", "tensorflow", "jax", "torch")
# A PredNet small enough that a training run takes seconds on 2 cores.
TINY_TRAIN = ["--size", "32x32", "--stack-sizes", "3,4,8", "--nt", "4", "--batch-size", "2",
              "--steps-per-epoch", "2", "--epochs", "1", "--val-sequences", "2", "--quiet"]
SECRETS = {"TF_TOKEN_example": "secret-value-tf", "AWS_SECRET_ACCESS_KEY": "secret-value-aws",
           "GITHUB_TOKEN": "secret-value-gh"}
TINY_STUDY = """
model = "autoencoder"
seeds = 1

[train]
protocol = "quick"
images = 8

[configurations.cpu]
device = "cpu"
threads = 1
"""


def user_environment(**extra):
    """os.environ as a user has it: no KERAS_BACKEND, no test-suite logging settings."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("KERAS_BACKEND", "TF_CPP_MIN_LOG_LEVEL", "PREDNET_VERBOSE", "PREDNET_DEBUG")}
    env.update(extra)
    return env


def run_script(name, *args, cwd, env=None, timeout=600):
    script = BIN / name
    assert script.is_file(), f"{script}: console script not installed"
    return subprocess.run([str(script), *map(str, args)], cwd=cwd, env=env or user_environment(),
                          capture_output=True, text=True, timeout=timeout)


def assert_clean(result):
    """Exit status 0, and stderr free of tracebacks and framework start-up lines."""
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    chatter = [line for line in result.stderr.splitlines() if _framework_import.is_chatter(line)]
    assert not chatter, chatter


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_answers_without_a_framework(name, tmp_path):
    module = "prednet_keras.cli." + {"prednet-import": "imports"}.get(name, name.split("-", 1)[1])
    probe = (
        "import atexit, sys\n"
        f"atexit.register(lambda: print('FRAMEWORKS', [m for m in {FRAMEWORKS!r} if m in sys.modules]))\n"
        f"from {module} import main\n"
        "main(['--help'])\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=user_environment(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout and "FRAMEWORKS []" in result.stdout, result.stdout[-500:]
    # The installed entry point itself answers too.
    assert "Usage:" in run_script(name, "--help", cwd=tmp_path).stdout


def test_import_of_the_package_leaves_every_framework_out():
    result = subprocess.run(
        [sys.executable, "-c", "import sys, prednet_keras, prednet_keras.datasets, prednet_keras.pretrained, "
         "prednet_keras.data; print([m for m in sys.modules if m.split('.')[0] in "
         f"{FRAMEWORKS!r}])"],
        env=user_environment(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_packages_of_the_foundation_and_the_models_face_leave_every_framework_out():
    # The models face loads models.lotter (Keras) on first use only: a starting point is read without Keras.
    result = subprocess.run(
        [sys.executable, "-c", "import sys, prednet_keras.models, prednet_keras.models.starting_point, "
         "prednet_keras.options.recipe, prednet_keras.options.value_rules, prednet_keras.files.downloads, "
         "prednet_keras.files.figures, prednet_keras.runtime.childproc; print([m for m in sys.modules if "
         f"m.split('.')[0] in {FRAMEWORKS!r} or m == 'prednet_keras.models.lotter'])"],
        env=user_environment(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.slow  # a fresh process or a training: the full suite, not the fast loop
def test_prednet_env_reports_the_default_backend(tmp_path, monkeypatch):
    from prednet_keras import _backend_choice

    result = run_script("prednet-env", "--json", cwd=tmp_path)
    monkeypatch.delenv("KERAS_BACKEND", raising=False)  # the script ran as a user runs it (user_environment)
    assert_clean(result)
    report = json.loads(result.stdout)
    assert report["requested"]["backend"] == report["effective"]["backend"] == _backend_choice.default_backend()


def test_prednet_data_describes_an_embedded_file(tmp_path):
    from prednet_keras import datasets

    result = run_script("prednet-data", "info", datasets.embedded_video_path("val"), "--nt", "10", cwd=tmp_path)
    assert_clean(result)
    assert "50" in result.stdout and "bikes.mp4#scene3" in result.stdout


@pytest.mark.slow  # a fresh process or a training: the full suite, not the fast loop
def test_prednet_import_converts_a_keras2_file(tmp_path):
    from tests.layers.numpy_prednet import random_weights
    from tests.legacy_files import write_model_json, write_weights_h5

    stack, r_stack, filt = (3, 4), (3, 5), 3
    write_model_json(tmp_path / "model.json", stack, r_stack, filt, 4, (8, 12))
    write_weights_h5(tmp_path / "weights.hdf5", random_weights(stack, r_stack, filt, np.random.default_rng(0)), nt=4)
    result = run_script("prednet-import", "model.json", "weights.hdf5", "-o", "imported.keras", cwd=tmp_path)
    assert_clean(result)
    assert (tmp_path / "imported.keras").is_file()


def test_prednet_study_plans_a_spec(tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY_STUDY)
    result = run_script("prednet-study", "run", "tiny.toml", "-o", "study", "--dry-run", cwd=tmp_path)
    assert_clean(result)
    assert "cpu" in result.stdout and not (tmp_path / "study").exists()


@pytest.mark.slow
def test_training_evaluation_study_and_bench_write_no_credentials(tmp_path):
    env = user_environment(**SECRETS)
    (tmp_path / "tiny.toml").write_text(TINY_STUDY)
    # Training, the study and the benchmark are independent: side by side, each mostly starting its framework.
    commands = {
        "train": ["prednet-train", *TINY_TRAIN, "-o", "runs/tiny"],
        "study": ["prednet-study", "run", "tiny.toml", "-o", "study", "--quiet"],
        "bench": ["prednet-bench", "--mode", "infer", "--size", "32x32", "--stack-sizes", "3,4", "--nt", "2",
                  "--batch-size", "1", "--steps", "2", "--warmup", "1", "--json", "bench.json", "-q"],
    }
    started = {name: subprocess.Popen([str(BIN / script), *args], cwd=tmp_path, env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for name, (script, *args) in commands.items()}
    results = {}
    for name, process in started.items():
        stdout, stderr = process.communicate(timeout=600)
        results[name] = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        assert_clean(results[name])
    manifest = json.loads((tmp_path / "runs" / "tiny" / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    figures = json.loads((tmp_path / "bench.json").read_text())
    assert "infer fps" in results["bench"].stdout and "frames/s" in results["bench"].stderr and figures
    evaluation = run_script("prednet-eval", "runs/tiny", cwd=tmp_path, env=env)
    assert_clean(evaluation)
    assert (tmp_path / "runs" / "tiny" / "eval" / "prediction_scores.json").is_file()
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "tiny.toml"]
    assert len(written) > 10
    for path in written:
        data = path.read_bytes()
        for name, value in SECRETS.items():
            assert value.encode() not in data and name.encode() not in data, f"{path} holds {name}"


@pytest.mark.parametrize("first", [
    "import prednet_keras, keras",            # the README's order
    "import keras, prednet_keras",
    "from prednet_keras import PredNet",      # Keras arrives in the middle of importing a layer module
    "import prednet_keras.layers.chainer",
    "import prednet_keras.bench",
])
@pytest.mark.slow
def test_every_serializable_is_registered_whoever_imports_keras(first):
    # JAX imports fastest; the registration does not depend on the backend.
    probe = (f"{first}\nimport keras\n"
             "print(sorted(k for k in keras.saving.get_custom_objects() if k.startswith('prednet_keras>')))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                            env=user_environment(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"))
    assert result.returncode == 0, result.stderr
    registered = eval(result.stdout.strip().splitlines()[-1])
    for name in ("PredNet", "PredNetCell", "keras2_hard_sigmoid", "WeightedError", "ChainerPredNet"):
        assert f"prednet_keras>{name}" in registered
    assert len(registered) == 14


@pytest.mark.slow
def test_readme_api_examples_print_nothing_but_their_own_output(tmp_path):
    # Issue 39: the README's API example, run as written, showed TensorFlow's start-up lines (imported
    # through keras before prednet_keras could quiet them). Each example imports prednet_keras first, and
    # that order gives a silent start on the default backend.
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert blocks
    for block in blocks:
        imports = [line.split("#")[0] for line in block.splitlines() if re.match(r"(import|from) ", line)]
        first_keras = next((i for i, line in enumerate(imports) if re.search(r"(?<![\w.])keras\b", line)), None)
        first_ours = next((i for i, line in enumerate(imports) if "prednet_keras" in line), None)
        if first_keras is not None:
            assert first_ours is not None and first_ours < first_keras, block
    probe = "import prednet_keras\nimport keras, numpy as np\nprint(keras.layers.Dense(1)(np.zeros((1, 2))).shape)\n"
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=user_environment(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "(1, 1)", result.stdout + result.stderr
    assert result.stderr == "", result.stderr


# Printed by a probe at the moment a command hands over to its children: the frameworks imported so far.
SHOW_FRAMEWORKS = f"print('FRAMEWORKS', [m for m in {FRAMEWORKS!r} if m in sys.modules])"


def run_probe(probe, cwd):
    """`probe` (Python code) in a fresh interpreter as a user runs it; asserts it imported no framework before
    it printed SHOW_FRAMEWORKS, and returns its stdout."""
    result = subprocess.run([sys.executable, "-c", probe], cwd=cwd, env=user_environment(),
                            capture_output=True, text=True, timeout=120)
    assert "FRAMEWORKS []" in result.stdout, result.stdout + result.stderr
    return result.stdout


def test_prednet_train_parent_never_imports_a_framework(tmp_path):
    """The parent validates the options and writes the run folder without Keras: the framework starts once,
    in the training process (TensorFlow's start-up used to run, and print, twice)."""
    run_probe(
        "import sys\n"
        "from prednet_keras.session import worker\n"
        "def launch(*args, **kwargs):\n"
        f"    {SHOW_FRAMEWORKS}\n"
        "    return 0\n"
        "worker.launch = launch\n"
        "from prednet_keras.cli.train import main\n"
        "main(['--size', '32x32', '--stack-sizes', '3,4', '--epochs', '1', '-o', 'run'])\n",
        tmp_path,
    )


def test_prednet_study_parent_never_imports_a_framework(tmp_path, monkeypatch):
    """The study process plans, makes the seeds' starting points in a child and starts the training processes:
    it needs no framework of its own (the starting points' backend is found without importing Keras)."""
    output = run_probe(
        "import sys\n"
        "from prednet_keras.study.executors import local_executor, starting_points\n"
        "def start(spec, study_dir, runs, backend):\n"
        "    print('BACKEND', backend)\n"
        "    return starting_points.StartingPoints(study_dir, {run.seed: {} for run in runs}, None, [])\n"
        "def execute(self, *args):\n"
        f"    {SHOW_FRAMEWORKS}\n"
        "starting_points.start = start\n"
        "local_executor.LocalExecutor.execute = execute\n"
        "from prednet_keras.cli.study import main\n"
        "main(['run', 'quick', '-o', 'study', '--no-report', '-q'])\n",
        tmp_path,
    )
    from prednet_keras import _backend_choice

    monkeypatch.delenv("KERAS_BACKEND", raising=False)  # the probe ran as a user runs it (user_environment)
    assert f"BACKEND {_backend_choice.default_backend()}" in output


# Slow: starts TensorFlow in two fresh processes.
@pytest.mark.slow
def test_verbose_shows_the_framework_start_up_that_is_otherwise_hidden(tmp_path):
    quiet = run_script("prednet-env", "--json", cwd=tmp_path)
    loud = run_script("prednet-env", "-v", "--json", cwd=tmp_path)
    assert quiet.returncode == loud.returncode == 0
    assert not [line for line in quiet.stderr.splitlines() if _framework_import.is_chatter(line)]
    from prednet_keras import _backend_choice

    if _backend_choice.default_backend() == "tensorflow":  # the backend that prints at start-up
        assert [line for line in loud.stderr.splitlines() if _framework_import.is_chatter(line)], loud.stderr


def test_every_option_a_help_text_names_is_an_option_of_that_command():
    """An option's help that points at --other must be able to mean this command's --other (prednet-eval's
    --precision help once pointed at a --tf32 it does not have); another command's option is named with the
    command before it ("prednet-train --resume")."""
    import re
    from importlib.metadata import entry_points

    import click

    def commands(command, name):
        if isinstance(command, click.Group):
            for sub, child in command.commands.items():
                yield from commands(child, f"{name} {sub}")
        else:
            yield name, command

    scripts = [e for e in entry_points(group="console_scripts") if e.value.startswith("prednet_keras.")]
    assert len(scripts) >= 7
    wrong = []
    for script in scripts:
        for name, command in commands(script.load(), script.name):
            offered = {o for p in command.params for o in getattr(p, "opts", []) + getattr(p, "secondary_opts", [])}
            for param in command.params:
                text = getattr(param, "help", None) or ""
                for match in re.finditer(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text):
                    elsewhere = re.search(r"prednet-\w+( \w+)? *$", text[max(0, match.start() - 40):match.start()])
                    if match.group(1) not in offered and not elsewhere:
                        wrong.append(f"{name} {param.opts[0] if getattr(param, 'opts', None) else param.name}: "
                                     f"{match.group(1)}")
    assert not wrong, wrong
