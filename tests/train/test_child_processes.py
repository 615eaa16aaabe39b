"""Child processes (issue 24), with real faults: one helper starts them all; a child dies with
its parent (kill -9 included), on Linux's death signal and on the portable pipe watch; signals
sent to the parent reach the child once; prednet-train's training process stops writing when
prednet-train is killed, and a second writer is refused meanwhile.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from prednet_keras.runtime import childproc
from prednet_keras.cli.train import main as train_main
from prednet_keras.session.lock import RunLock
from tests.process_state import describe_process
from tests.train.conftest import TINY, folder_hash

REPOSITORY = Path(__file__).resolve().parents[2]


def _invoke(main, args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _gone(pid):
    """True once `pid` has exited (a zombie waiting for its reaper counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status


def _wait_until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _python(args, ignoring=(), **kwargs):
    """A Python process; `ignoring`: signals it starts with ignored (as under nohup or a script's `&`)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPOSITORY), os.environ.get("PYTHONPATH", "")]))
    env.update(kwargs.pop("env", {}))

    def ignore():
        for signum in ignoring:
            signal.signal(signum, signal.SIG_IGN)

    return subprocess.Popen([sys.executable, *args], cwd=REPOSITORY, env=env, text=True, preexec_fn=ignore,
                            **kwargs)


# -- the helper -----------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("death_signal", ["kernel", "pipe"])
def test_a_child_dies_with_its_parent_killed_by_sigkill(death_signal):
    # "pipe": the kernel's death signal left unarmed, as on systems without prctl.
    env = {childproc.NO_DEATH_SIGNAL_ENV: "1"} if death_signal == "pipe" else {}
    parent = _python(["-m", "tests.train.children", "parent", "sleep"], stdout=subprocess.PIPE, env=env)
    try:
        child = int(parent.stdout.readline().split()[1])
        assert parent.stdout.readline().strip() == "ready"  # the child runs (it shares the parent's stdout)
        assert not _gone(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        _wait_until(lambda: _gone(child), 5, f"child {child} to end after its parent was killed")
    finally:
        parent.kill()


@pytest.mark.parametrize("ignoring", [(), (signal.SIGINT, signal.SIGHUP)], ids=["plain", "started-ignoring"])
@pytest.mark.parametrize("signum, status, said", [(signal.SIGINT, 130, "child: interrupted"),
                                                  (signal.SIGTERM, 128 + signal.SIGTERM, None)])
def test_the_parent_passes_signals_on_and_reports_the_childs_status(signum, status, said, ignoring):
    # "started-ignoring": prednet-train run under nohup or as a script's background job starts with SIGINT
    # ignored, which exec passes on; the child must still act on what its parent forwards.
    parent = _python(["-m", "tests.train.children", "parent", "wait", "interrupted"], stdout=subprocess.PIPE,
                     ignoring=ignoring)
    try:
        child = int(parent.stdout.readline().split()[1])
        # The child's "ready" and the parent's "forwarding" come in either order; a signal sent before the
        # parent forwards would end the parent alone (under load that window lasted long enough to be hit).
        assert sorted(parent.stdout.readline().strip() for _ in range(2)) == ["forwarding", "ready"]
        parent.send_signal(signum)
        try:
            out = parent.communicate(timeout=20)[0]
        except subprocess.TimeoutExpired:
            # Seen once in a full run: say what each process ignores, blocks and catches.
            raise AssertionError(f"no exit 20 s after the signal: parent {describe_process(parent.pid)}; "
                                 f"child {describe_process(child)}") from None
    finally:
        parent.kill()
    assert parent.returncode == 0, out
    if said:
        assert said in out
    assert f"status {status}" in out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_childs_own_thread_leaves_the_passed_on_signals_to_the_main_thread():
    # The kernel gives a process's signal to any thread not blocking it; taken by the watch thread, a Ctrl-C
    # would wait until the main thread woke from its sleep. Only the main thread may take it.
    parent = _python(["-m", "tests.train.children", "parent", "wait", "interrupted"], stdout=subprocess.PIPE)
    try:
        child = int(parent.stdout.readline().split()[1])
        assert sorted(parent.stdout.readline().strip() for _ in range(2)) == ["forwarding", "ready"]
        blocked = {}
        for task in Path(f"/proc/{child}/task").iterdir():
            (line,) = [x for x in (task / "status").read_text().splitlines() if x.startswith("SigBlk:")]
            blocked[int(task.name)] = int(line.split()[1], 16)
        wanted = sum(1 << (int(signum) - 1) for signum in childproc.FORWARDED)
        assert len(blocked) >= 2 and blocked[child] & wanted == 0
        assert all(mask & wanted == wanted for tid, mask in blocked.items() if tid != child), blocked
        parent.send_signal(signal.SIGINT)
        out = parent.communicate(timeout=20)[0]
    finally:
        parent.kill()
    assert "child: interrupted" in out and "status 130" in out


def test_run_and_exit_status():
    done = childproc.run(["-m", "tests.train.children", "nothing"], capture_output=True, text=True,
                         cwd=REPOSITORY)
    assert done.returncode == 2
    assert childproc.exit_status(-9) == 137 and childproc.exit_status(3) == 3
    with pytest.raises(ValueError, match="must start with '-m MODULE'"):
        childproc.start(["script.py"])


def test_every_child_process_is_started_by_the_one_helper():
    # The pattern lived in four places; a new one must go through childproc. One child may not: the error
    # output's filter (runtime/log_noise.py) must outlive the process it serves, to pass on the last lines of
    # one that aborts, so it cannot die with its parent as childproc's children do.
    import re

    allowed = {"prednet_keras/runtime/childproc.py", "prednet_keras/runtime/log_noise.py"}
    starters = {str(path.relative_to(REPOSITORY)) for path in (REPOSITORY / "prednet_keras").rglob("*.py")
                if re.search(r"\[\s*sys\.executable", path.read_text())}
    assert starters - allowed == set()
    assert allowed <= starters  # each exception still starts a process (else it would be stale)


# -- a training process and its run folder ---------------------------------------


@pytest.mark.slow
def test_killing_prednet_train_stops_its_training_process_and_a_second_writer_is_refused(tiny_npz, tmp_path):
    folder = tmp_path / "run"
    log = open(tmp_path / "log.txt", "w")
    parent = _python(["-m", "prednet_keras.cli.train", *TINY, "--epochs", "500", "--data", str(tiny_npz),
                      "--quiet", "-o", str(folder)], stdout=log, stderr=subprocess.STDOUT,
                     env={"TF_CPP_MIN_LOG_LEVEL": "2"})
    child = None
    try:
        _wait_until(lambda: (folder / "state.json").is_file() or parent.poll() is not None, 240,
                    "the first epoch")
        assert parent.poll() is None, (tmp_path / "log.txt").read_text()
        child = json.loads((folder / "manifest.json").read_text())["sessions"][-1]["pid"]
        assert child != parent.pid

        # A second writer while the first one trains: frozen, so that its folder holds still.
        os.kill(child, signal.SIGSTOP)
        before = folder_hash(folder)
        for args in (["--resume", "--epochs", "600", "-o", folder], TINY + ["--overwrite", "-o", folder]):
            result = _invoke(train_main, args)
            assert result.exit_code == 1, result.output
            assert f"{folder} is being written by another command (pid {parent.pid}" in result.output
            assert "nothing was changed" in result.output and "Traceback" not in result.output
            assert folder_hash(folder) == before
        os.kill(child, signal.SIGCONT)

        parent.send_signal(signal.SIGKILL)
        parent.wait()
        _wait_until(lambda: _gone(child), 15, "the training process to end after prednet-train was killed")
        settled = folder_hash(folder)
        time.sleep(2)
        assert folder_hash(folder) == settled  # no orphan writes on
    finally:
        if child is not None and not _gone(child):
            os.kill(child, signal.SIGKILL)
        parent.kill()
        log.close()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["sessions"][-1]["status"] == "interrupted"
    # The kernel let go of the lock with its holders.
    with RunLock(folder):
        pass
