"""Child Python processes: the one way the package starts them.

Four commands do their work in a fresh interpreter, because a framework's
threads, devices and determinism are fixed when it is imported: prednet-train
(the training process, session/worker.py; prednet-study runs it too), prednet-bench
(each measurement), prednet-env (the configured probe) and prednet-study (the
seeds' starting points). Each is started here, and each gets:

- the environment of its runtime.RuntimeConfig (runtime.environment_for), so
  the framework comes up configured;
- death with its parent. A child that outlived a killed parent (kill -9, a
  closed terminal) would go on writing a run folder nobody watches and hold
  its GPU. On Linux the child asks the kernel for a signal when its parent
  dies (prctl PR_SET_PDEATHSIG; SIGTERM unless the caller asks for another).
  Everywhere, it holds the read end of a pipe whose only write end the
  parent holds: a thread reading it sees end of file when the parent is gone,
  sends the signal where the kernel will not, and ends the process
  PARENT_GONE_GRACE seconds later if the signal did not;
- signals passed on: the child runs in its own session, so a terminal's
  Ctrl-C reaches the parent only, and `Child.wait_forwarding` sends it on, once
  (SIGINT, SIGTERM, and SIGHUP as SIGTERM): the child records the interruption,
  then the parent reports;
- exit statuses as a shell gives them: 128 + N for a child killed by signal N.

A child starts as

    python -m prednet_keras.runtime.childproc --watch FD --parent PID --death-signal N [--hold FD,...] -m MODULE ARGS...

the bootstrap below sets up the watch and runs MODULE as __main__, so the
child modules need nothing of their own. This module imports no framework.
"""

import os
import signal
import subprocess
import sys
import threading
import time

__all__ = ["Child", "EXIT_PARENT_GONE", "exit_status", "run", "start"]

# SIGTERM's status: the process ended as a plain kill would have ended it.
EXIT_PARENT_GONE = 128 + signal.SIGTERM
# Seconds a child whose parent is gone has to stop by itself (the training
# process records the interruption) before it is ended regardless.
PARENT_GONE_GRACE = 10.0
PR_SET_PDEATHSIG = 1
# Test hook: "1" leaves the kernel's death signal unarmed, so that the pipe
# watch, the fallback of systems without prctl, is what ends the child.
NO_DEATH_SIGNAL_ENV = "PREDNET_TEST_NO_PDEATHSIG"
FORWARDED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def exit_status(code):
    """A Popen return code as a shell reports it (killed by signal N: 128 + N)."""
    return 128 - code if code < 0 else code


def start(args, runtime_config=None, env=None, pass_fds=(), death_signal=signal.SIGTERM, **popen_kwargs):
    """Starts `python -m MODULE ...` as a child that dies with this process.

    Args:
        args: the interpreter's arguments: ["-m", module, *its arguments].
        runtime_config: a runtime.RuntimeConfig whose environment the child
            gets (environment_for returns a whole environment, with variables
            that would contradict the settings removed); None: this
            process's environment.
        env: variables to set on top (e.g. PYTHONUNBUFFERED).
        pass_fds: further descriptors the child keeps (a run folder's lock,
            so that it is held until the child is gone too).
        death_signal: what the child gets when this process dies: SIGTERM
            lets a training process record the interruption; SIGKILL stops it
            at once (a Ray task whose partial folder will be remade at once).
        **popen_kwargs: passed to subprocess.Popen (stdout, stderr, stdin, text, ...).

    Returns:
        A Child.

    Raises:
        ValueError: args do not name a module; or environment_for's (a GPU
            index out of range).
    """
    args = [os.fspath(a) for a in args]
    if len(args) < 2 or args[0] != "-m":
        raise ValueError(f"childproc.start runs modules: args must start with '-m MODULE', got {args[:2]}")
    if runtime_config is None:
        environment = dict(os.environ)
    else:
        from prednet_keras import runtime

        environment = {key: str(value) for key, value in runtime.environment_for(runtime_config).items()}
    environment.update({key: str(value) for key, value in (env or {}).items()})
    hold = [int(fd) for fd in pass_fds]
    read_end, write_end = os.pipe()
    command = [sys.executable, "-m", __name__, "--watch", str(read_end), "--parent", str(os.getpid()),
               "--death-signal", str(int(death_signal))]
    if hold:
        command += ["--hold", ",".join(map(str, hold))]
    try:
        process = subprocess.Popen(command + args, env=environment, pass_fds=(read_end, *hold),
                                   start_new_session=True, **popen_kwargs)
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return Child(process, write_end)


def run(args, runtime_config=None, env=None, timeout=None, capture_output=False, **popen_kwargs):
    """Runs a child (see start) to its end, as subprocess.run does.

    On a timeout or an interruption of this process the child is killed
    before the exception goes on.

    Returns:
        subprocess.CompletedProcess.
    """
    if capture_output:
        popen_kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child = start(args, runtime_config, env, **popen_kwargs)
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except BaseException:
        child.kill()
        child.communicate()
        raise
    return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


class Child:
    """A started child process: subprocess.Popen's interface, plus the watch pipe's end.

    The pipe's write end is closed once the child has exited (closing it
    earlier would tell the child its parent is gone).

    Args:
        process: the subprocess.Popen.
        watch_fd: the write end of the child's watch pipe.
    """

    def __init__(self, process, watch_fd):
        self.process = process
        self._watch = watch_fd
        self.forwarded = []

    pid = property(lambda self: self.process.pid)
    args = property(lambda self: self.process.args)
    returncode = property(lambda self: self.process.returncode)
    stdin = property(lambda self: self.process.stdin)
    stdout = property(lambda self: self.process.stdout)
    stderr = property(lambda self: self.process.stderr)

    def __repr__(self):
        return f"Child(pid={self.pid}, returncode={self.returncode})"

    def poll(self):
        """The return code, or None while the child runs."""
        return self._ended(self.process.poll())

    def wait(self, timeout=None):
        """Waits for the child (subprocess.TimeoutExpired after `timeout` seconds)."""
        return self._ended(self.process.wait(timeout=timeout))

    def communicate(self, input=None, timeout=None):
        """Popen.communicate."""
        out = self.process.communicate(input, timeout=timeout)
        self._ended(self.process.returncode)
        return out

    def send_signal(self, signum):
        """Sends `signum` unless the child has already exited."""
        if self.process.poll() is None:
            try:
                self.process.send_signal(signum)
            except ProcessLookupError:
                pass

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(getattr(signal, "SIGKILL", signal.SIGTERM))

    def stop(self, grace=30):
        """SIGTERM (the training process records the interruption), then SIGKILL after `grace` seconds."""
        self.terminate()
        try:
            return self.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.wait()

    def wait_forwarding(self, every=None, interval=1.0):
        """Waits for the child, passing this process's SIGINT, SIGTERM and SIGHUP on to it.

        Signal handlers can only be set in the main thread; elsewhere this
        just waits.

        Args:
            every: called about every `interval` seconds while the child runs.
            interval: seconds.

        Returns:
            The child's exit status (exit_status).
        """
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for signum in FORWARDED:
                previous[signum] = signal.signal(signum, self._forward)
        try:
            while True:
                try:
                    code = self.wait(timeout=interval)
                    break
                except subprocess.TimeoutExpired:
                    if every is not None:
                        every()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return exit_status(code)

    def _forward(self, signum, frame):
        self.forwarded.append(signum)
        self.send_signal(signal.SIGTERM if signum == getattr(signal, "SIGHUP", None) else signum)

    def _ended(self, code):
        if code is not None and self._watch is not None:
            os.close(self._watch)
            self._watch = None
        return code


# -- in the child -------------------------------------------------------------

_parent_pid = None
_death_signal = signal.SIGTERM
_death_signal_armed = False


def parent_is_gone():
    """In a child started here: whether the process that started it has ended."""
    return _parent_pid is not None and os.getppid() != _parent_pid


def _arm_death_signal(signum):
    """Asks the kernel for `signum` when the parent dies (Linux); True if it will come."""
    if not sys.platform.startswith("linux") or os.environ.get(NO_DEATH_SIGNAL_ENV) == "1":
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(fd):
    """Waits for end of file on the watch pipe: the parent is gone."""
    try:
        while os.read(fd, 64):
            pass
    except OSError:
        pass
    if not _death_signal_armed:
        os.kill(os.getpid(), _death_signal)
    time.sleep(PARENT_GONE_GRACE)
    os._exit(EXIT_PARENT_GONE)


def _bootstrap(argv):
    global _parent_pid, _death_signal, _death_signal_armed

    watch = parent = None
    hold = []
    while argv and argv[0] != "-m":
        flag, value, argv = argv[0], argv[1], argv[2:]
        if flag == "--watch":
            watch = int(value)
        elif flag == "--parent":
            parent = int(value)
        elif flag == "--death-signal":
            _death_signal = signal.Signals(int(value))
        elif flag == "--hold":
            hold = [int(fd) for fd in value.split(",") if fd]
        else:
            raise SystemExit(f"prednet_keras.runtime.childproc: unknown option {flag}")
    if watch is None or parent is None or len(argv) < 2:
        raise SystemExit("usage: python -m prednet_keras.runtime.childproc --watch FD --parent PID --death-signal N "
                         "[--hold FD,...] -m MODULE ...")
    # Kept by this process only: a grandchild holding them would keep the lock,
    # and the pipe, alive.
    for fd in [watch, *hold]:
        os.set_inheritable(fd, False)
    _parent_pid = parent
    _death_signal_armed = _arm_death_signal(_death_signal)
    # A parent started where SIGINT is ignored (nohup, a background job of a script) passes that on with exec,
    # and Python then installs no KeyboardInterrupt: the signals the parent forwards would do nothing here.
    for signum in FORWARDED:
        if signal.getsignal(signum) == signal.SIG_IGN:
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
    # The watch thread blocks the signals a parent passes on (it inherits the mask it is started with): the
    # kernel gives a process's signal to any thread that does not block it, and Python runs the handler only
    # when the main thread next runs Python, which a main thread asleep in C (time.sleep, a wait) may not
    # do for as long as it sleeps.
    unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    try:
        threading.Thread(target=_watch, args=(watch,), name="parent-watch", daemon=True).start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
    if os.getppid() != parent:
        # The parent died before the death signal was armed: nothing will come.
        os.kill(os.getpid(), _death_signal)
    import runpy

    module = argv[1]
    sys.argv = [module, *argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    # The state lives in the module as imported, where the child's own code
    # finds it (parent_is_gone), not in this __main__ copy of it.
    import importlib

    importlib.import_module("prednet_keras.runtime.childproc")._bootstrap(sys.argv[1:])
