"""XLA's harmless GPU autotuning lines are kept out of a run's output, and nothing else is (issue 39)."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

from prednet_keras.runtime import log_noise

GLOG_LINE = (b"W1203 12:58:38.122815   26902 cuda_timer.cc:88] Delay kernel timed out: measured time has "
             b"sub-optimal accuracy. There may be a missing warmup execution, please investigate in Nsight Systems.\n")
TF_STYLE_LINE = (b"2025-02-10 16:44:23.346297: E external/xla/xla/stream_executor/cuda/cuda_timer.cc:86] Delay "
                 b"kernel timed out: measured time has sub-optimal accuracy.\n")
SAID = log_noise.KNOWN_NOISE["xla-gpu-timer"][1].encode()


def _filtered(chunks, pause=0.0):
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    worker = threading.Thread(target=log_noise.filter_lines, args=(read_in, write_out), kwargs={"idle_seconds": 0.05})
    worker.start()
    for chunk in chunks:
        os.write(write_in, chunk)
        time.sleep(pause)
    os.close(write_in)
    worker.join(10)
    os.close(write_out)
    out = b""
    while data := os.read(read_out, 65536):
        out += data
    os.close(read_in)
    os.close(read_out)
    return out


def test_the_timer_lines_go_and_one_line_says_so_once():
    out = _filtered([b"E0000 something real\n", GLOG_LINE, b"epoch 1\n", TF_STYLE_LINE, GLOG_LINE, b"the end\n"])
    assert out == b"E0000 something real\n" + SAID + b"\nepoch 1\nthe end\n"


def test_a_line_split_across_writes_is_still_recognised_and_other_text_passes_unchanged():
    half = len(GLOG_LINE) // 2
    out = _filtered([b"W0000 cuda_timer.cc:88] another warning\n", GLOG_LINE[:half], GLOG_LINE[half:], b"tail"])
    assert out == b"W0000 cuda_timer.cc:88] another warning\n" + SAID + b"\ntail"


def test_a_partial_line_is_passed_on_after_a_pause_without_waiting_for_its_newline():
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    worker = threading.Thread(target=log_noise.filter_lines, args=(read_in, write_out), kwargs={"idle_seconds": 0.05})
    worker.start()
    try:
        os.write(write_in, b"\r 40% [#####     ]")
        time.sleep(0.5)
        os.set_blocking(read_out, False)
        assert os.read(read_out, 100) == b"\r 40% [#####     ]"
    finally:
        os.close(write_in)
        worker.join(10)
        for fd in (write_out, read_in, read_out):
            os.close(fd)


def _child(code, **kwargs):
    script = textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60, **kwargs)


def test_a_process_that_aborts_still_gets_its_last_words_out_through_the_filter():
    done = _child(f"""
        import os
        from prednet_keras.runtime import log_noise
        assert log_noise.hide_known_noise()
        os.write(2, {GLOG_LINE!r} * 3 + b"F0000 check failed: the real error\\n")
        os.abort()
    """)
    assert done.returncode == -signal.SIGABRT
    assert b"cuda_timer" not in done.stderr
    assert done.stderr.count(SAID) == 1
    assert b"F0000 check failed: the real error\n" in done.stderr


def test_the_variable_shows_every_line_as_written():
    done = _child(f"""
        import os
        from prednet_keras.runtime import log_noise
        assert not log_noise.hide_known_noise()
        os.write(2, {GLOG_LINE!r})
    """, env=dict(os.environ, **{log_noise.SHOW_ENV: "1"}))
    assert done.returncode == 0 and done.stderr == GLOG_LINE


def test_finish_lets_the_filter_end_before_a_process_leaves_by_os_exit():
    done = _child("""
        import os, sys
        from prednet_keras.runtime import log_noise
        log_noise.hide_known_noise()
        print("Error: the last line", file=sys.stderr)
        print(log_noise.finish(), flush=True)
        os._exit(3)
    """)
    assert done.returncode == 3
    assert done.stdout == b"0\n" and done.stderr == b"Error: the last line\n"


def test_ctrl_c_meant_for_the_run_leaves_its_error_output_working():
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from prednet_keras.runtime import log_noise
        log_noise.hide_known_noise()
        try:
            print("ready", flush=True)
            time.sleep(60)
        except KeyboardInterrupt:
            print("Interrupted: the run says so", file=sys.stderr, flush=True)
            sys.exit(130)
    """)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        # As from a terminal: Ctrl-C's default. A test process that ignores SIGINT (an earlier test in the same
        # worker may have left it so) would pass that on, and the child would sleep through it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert child.stdout.readline() == b"ready\n"
    os.killpg(child.pid, signal.SIGINT)  # as a terminal's Ctrl-C reaches its foreground group
    _, err = child.communicate(timeout=30)
    assert child.returncode == 130
    assert err == b"Interrupted: the run says so\n"


def test_a_cpu_run_is_not_filtered():
    done = _child(f"""
        import os
        from prednet_keras import runtime
        runtime.configure(runtime.RuntimeConfig(backend="jax", device="cpu"))
        os.write(2, {GLOG_LINE!r})
    """, env=dict(os.environ, KERAS_BACKEND="jax"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.endswith(GLOG_LINE)
