"""How a training process takes Ctrl-C and SIGTERM (session.interrupts), with real signals in a child process:
at once outside a deferral; noted, not raised, while an epoch is recorded; and, within a training that
checkpoints between its updates, noted once and raised by a second request."""

import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import os, signal, sys
    from prednet_keras.session import interrupts

    interrupts.install()
    second_stops = sys.argv[1] == "second-stops"
    signals = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}[sys.argv[2]]
    try:
        with interrupts.deferred(second_stops=second_stops):
            os.kill(os.getpid(), signals)
            print("noted", interrupts.stop_requested(), flush=True)
            os.kill(os.getpid(), signals)
            print("noted again", flush=True)
        print("left the deferral", flush=True)
    except KeyboardInterrupt:
        print("stopped at once", flush=True)
""")


def _run(*args):
    return subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_while_an_epoch_is_recorded_every_request_is_only_noted(signal_name):
    done = _run("whole", signal_name)
    assert done.stdout.splitlines() == ["noted True", "noted again", "left the deferral"], done.stderr
    assert done.stderr == ""


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_in_a_training_that_checkpoints_the_second_request_stops_at_once(signal_name):
    done = _run("second-stops", signal_name)
    assert done.stdout.splitlines() == ["noted True", "stopped at once"], done.stderr
    assert "Stopping after the update in progress" in done.stderr and "stop again to stop at once" in done.stderr


def test_outside_a_deferral_a_request_stops_at_once():
    done = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import os, signal
        from prednet_keras.session import interrupts
        interrupts.install()
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            print("not stopped")
        except KeyboardInterrupt:
            print("stopped at once", interrupts.stop_requested())
    """)], capture_output=True, text=True, timeout=60)
    assert done.stdout == "stopped at once True\n", done.stderr
