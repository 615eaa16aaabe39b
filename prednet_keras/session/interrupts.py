"""How a training process stops when asked (Ctrl-C, SIGTERM): at once, except while an epoch is being
recorded, or, for a protocol counted in updates that checkpoints, while it trains (the update in progress
then completes, is recorded and checkpointed: `protocol_training`). No framework at import.

A handler that raises KeyboardInterrupt raises it wherever the main thread is. During an epoch's end that
can be after its checkpoint is written and before the state that makes the epoch count: the epoch's work
is then thrown away, and a stop between the state and the best model leaves a model.keras older than its
record. So the recorder marks that work `deferred()`: a request arriving meanwhile is only noted, and
`StopOnRequest` (callbacks), which runs after the recorder, stops training once the epoch is
recorded whole.
"""

import contextlib
import signal

_stop_requested = False
_deferring = 0


def _on_signal(signum, frame):
    global _stop_requested
    _stop_requested = True
    if not _deferring:
        raise KeyboardInterrupt


def install():
    """Makes SIGINT and SIGTERM stop this process as described above (the training process's entry)."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _on_signal)


def ignore():
    """Ignores further SIGINT and SIGTERM (while an interruption is being recorded)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)


def stop_requested():
    """Whether SIGINT or SIGTERM asked this process to stop."""
    return _stop_requested


@contextlib.contextmanager
def deferred():
    """Within: a stop request is noted, not raised (see the module's docstring)."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
