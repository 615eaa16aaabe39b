"""How a training process stops when asked (Ctrl-C, SIGTERM): at once, except while an epoch is being
recorded, or, for a protocol counted in updates that checkpoints, while it trains (the update in progress
then completes, is recorded and checkpointed: `protocol_training`). No framework at import.

A handler that raises KeyboardInterrupt raises it wherever the main thread is. During an epoch's end that
can be after its checkpoint is written and before the state that makes the epoch count: the epoch's work
is then thrown away, and a stop between the state and the best model leaves a model.keras older than its
record. So the recorder marks that work `deferred()`: a request arriving meanwhile is only noted, and
`StopOnRequest` (callbacks), which runs after the recorder, stops training once the epoch is
recorded whole. A protocol counted in updates defers for as long as it trains, and an update can be long
(the first one compiles: minutes on a GPU), so there a second request stops at once: the updates since the
last checkpoint are then lost, and --resume trains them again.
"""

import contextlib
import signal
import sys

_stop_requested = False
_deferrals = []  # one per deferred() entered: whether a second request stops at once within it


def _on_signal(signum, frame):
    global _stop_requested
    again, _stop_requested = _stop_requested, True
    if not _deferrals or (again and all(_deferrals)):
        raise KeyboardInterrupt
    if all(_deferrals):
        print("\nStopping after the update in progress, once it is recorded and checkpointed; stop again to stop "
              "at once (the updates since the last checkpoint are then lost).", file=sys.stderr, flush=True)


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
def deferred(second_stops=False):
    """Within: a stop request is noted, not raised (see the module's docstring).

    Args:
        second_stops: a second request raises KeyboardInterrupt after all (for long deferrals: a training).
    """
    _deferrals.append(second_stops)
    try:
        yield
    finally:
        _deferrals.pop()
