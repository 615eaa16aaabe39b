"""One writer per run folder (issue 24): a second command is refused, names the holder, changes nothing.

The real case, a second prednet-train while one trains, is in test_child_processes.py.
"""

import os

from click.testing import CliRunner

from prednet_keras.cli.train import main as train_main
from prednet_keras.session.lock import RunFolderLocked, RunLock
from tests.train.conftest import TINY, folder_hash


def _invoke(main, args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_a_folder_being_written_refuses_a_second_writer(copy_of_run):
    before = folder_hash(copy_of_run)
    with RunLock(copy_of_run) as held:
        assert held.owner()["pid"] == os.getpid()
        for args in (["--resume", "--epochs", "3", "-o", copy_of_run], TINY + ["--overwrite", "-o", copy_of_run]):
            result = _invoke(train_main, args)
            assert result.exit_code == 1, result.output
            errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
            assert len(errors) == 1 and f"{copy_of_run} is being written by another command (pid {os.getpid()}" \
                in errors[0], result.output
    assert folder_hash(copy_of_run) == before
    assert not held.owner_path.exists()  # the holder's record goes with the lock




def test_the_lock_lives_beside_the_folder_and_dies_with_its_holder(tmp_path):
    folder = tmp_path / "run"
    lock = RunLock(folder).acquire()
    assert lock.lock_path == tmp_path / ".prednet-locks" / "run.lock" and lock.fds()
    assert not folder.exists()  # nothing is written into the folder itself
    try:
        refused = RunLock(folder)
        try:
            refused.acquire()
        except RunFolderLocked as error:
            assert f"(pid {os.getpid()}:" in str(error)
        else:
            raise AssertionError("a second lock on the same folder was granted")
    finally:
        lock.release()
    with RunLock(folder):
        pass
