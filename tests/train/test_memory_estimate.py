"""Issue 39: an absurd frame size or batch used to run until the kernel killed the process; a batch larger than
the data was not refused. Both are now refused before the model is built, with the numbers."""

import os
import subprocess
import sys
import time

import pytest

from prednet_keras.runtime.memory_estimate import kept_activation_bytes, memory_problem
from prednet_keras.options.recipe import TrainConfig
from prednet_keras.session.recipe_training import check_fits

KWARGS = {"stack_sizes": (3, 4, 8), "R_stack_sizes": (3, 4, 8)}


def test_the_lower_bound_counts_each_layers_tensors_at_its_resolution():
    # Layer 0 (32x32, a=3, r=3, R1=4): LSTM input 2*3+3+4, gates 12, cell and R 6, A/Ahat/E 12 -> 43 values.
    # Layer 1 (16x16, a=4, r=4, R2=8): 20+16+8+16 = 60. Layer 2 (8x8, a=8, r=8): 24+32+16+32 = 104.
    per_frame = 32 * 32 * 43 + 16 * 16 * 60 + 8 * 8 * 104
    assert kept_activation_bytes((32, 32, 3), (3, 4, 8), (3, 4, 8), nt=5, batch_size=2) == per_frame * 5 * 2 * 4


def test_a_step_beyond_the_machine_is_refused_with_the_numbers():
    needed = kept_activation_bytes((32, 32, 3), (3, 4, 8), (3, 4, 8), nt=10, batch_size=4)
    assert memory_problem((32, 32, 3), KWARGS, 10, 4, available=needed) is None
    problem = memory_problem((32, 32, 3), KWARGS, 10, 4, available=needed - 1)
    assert problem.startswith("Training 32x32 frames, 10 per sequence, 4 sequences per batch keeps at least ")
    assert "Use a smaller --size, --batch-size or --nt." in problem


def test_a_batch_larger_than_the_data_and_an_absurd_size_are_refused_before_the_model_is_built():
    config = TrainConfig(stack_sizes=(3, 4, 8), nt=10, batch_size=200).resolved()
    with pytest.raises(ValueError, match=r"--batch-size 200 is larger than the training data: the embedded video "
                                         r"holds 156 sequences of 10 frames"):
        check_fits(config, (32, 32, 3), 156, "cpu")
    huge = TrainConfig(stack_sizes=(3, 4, 8), nt=10, batch_size=4).resolved()
    with pytest.raises(ValueError, match=r"Training 65536x65536 frames.* GiB of activations"):
        check_fits(huge, (65536, 65536, 3), 156, "cpu")
    check_fits(huge, (65536, 65536, 3), 156, "gpu")  # a GPU's own out-of-memory error says it there


@pytest.mark.slow
def test_an_absurd_size_is_refused_before_the_frames_are_loaded(tmp_path):
    # Through the real command: the frames resized to 16384x16384 would take the machine's memory while they
    # load, before check_fits could see them (seen: prednet-train ran until it was killed).
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "prednet_keras.cli.train", "--size", "16384x16384", "--stack-sizes",
                           "3,4,8", "--epochs", "1", "--quiet", "-o", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Training 16384x16384 frames, 10 per sequence, 4 sequences per batch keeps at least" in done.stderr
    assert "Loading data" not in done.stdout
    assert not (tmp_path / "run").exists()
    assert time.monotonic() - started < 120
