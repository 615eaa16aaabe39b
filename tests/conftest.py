import os

# Quiet TensorFlow's start-up logging in test output; set before any import of it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# The files that take minutes, collected first. Under the README's `-n 2 --dist loadfile` each worker takes
# one file at a time in collection order, so a long file collected last (the wheel's, alphabetically near
# the end) left the other worker idle for minutes at the end of the suite. Longest first, the rest as
# collected.
LONG_FILES = (
    "tests/test_wheel_install.py",
    "tests/study/test_ray_executor.py",
    "tests/reliability/test_training_kills.py",
    "tests/study/test_study_run.py",
    "tests/train/test_train_cli.py",
    "tests/train/test_update_checkpoints.py",
    "tests/test_backends.py",
    "tests/train/test_trajectory.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: position for position, name in enumerate(LONG_FILES)}
    root = config.rootpath

    def order(item):
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else str(item.path)
        return rank.get(path, len(LONG_FILES))

    items.sort(key=order)  # stable: within a file, and among the other files, the collected order stays
