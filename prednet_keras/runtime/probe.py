"""What a run's process would have in force, found out in a child process.

A process can be configured only once, before its framework starts, so `probe` applies the runtime
settings in a fresh child exactly as a training run's process applies them, and the child reads back
what is in force and the environment fingerprint:

    parent:  probe(config)      # no framework here
             -> python -m prednet_keras.runtime.probe RESULT_JSON   (environment: runtime.environment_for)
    child:   runtime.configure_from_environment(); write {"ok", "requested", "effective", "fingerprint"}

`prednet-env` prints the report. No framework at import.
"""

import json
import os
import sys
import tempfile

from prednet_keras import _framework_import, runtime
from prednet_keras.runtime import childproc

__all__ = ["probe"]


def probe(config, timeout=600):
    """Configures a child process for `config` and returns its report.

    Args:
        config: a RuntimeConfig.
        timeout: seconds to wait for the child.

    Returns:
        dict with requested, effective and fingerprint.

    Raises:
        runtime.RuntimeSetupError: the child refused the configuration (the
            message says why) or failed.
    """
    with tempfile.TemporaryDirectory(prefix="prednet-env-") as scratch:
        result_path = os.path.join(scratch, "result.json")
        try:
            completed = childproc.run(["-m", "prednet_keras.runtime.probe", result_path], config,
                                      capture_output=True, text=True, timeout=timeout)
        except ValueError as error:  # environment_for: a GPU index out of range
            raise runtime.RuntimeSetupError(str(error)) from None
        except Exception as error:
            raise runtime.RuntimeSetupError(f"The configured child process did not finish: {error}") from None
        if _framework_import.verbose() and completed.stderr:
            # -v: what the child's framework printed while it started, which the report itself leaves out.
            sys.stderr.write(completed.stderr)
        if not os.path.exists(result_path):
            tail = "\n".join((completed.stderr or completed.stdout or "").strip().splitlines()[-15:])
            raise runtime.RuntimeSetupError(
                f"The configured child process failed (exit {completed.returncode}):\n{tail}"
            )
        with open(result_path) as handle:
            result = json.load(handle)
    if not result.get("ok"):
        raise runtime.RuntimeSetupError(result.get("error", "unknown error"))
    return result


def _child(result_path):
    """Runs inside the configured child: configure from the environment, report."""
    try:
        config, effective = runtime.configure_from_environment()
        result = {
            "ok": True,
            "requested": config.to_dict(),
            "effective": effective,
            "fingerprint": runtime.fingerprint(),
        }
    except runtime.RuntimeSetupError as error:
        result = {"ok": False, "error": str(error)}
    except Exception as error:  # reported, not hidden: the parent shows it
        result = {"ok": False, "error": f"{type(error).__name__}: {error}"}
    with open(result_path, "w") as handle:
        json.dump(result, handle, default=str)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m prednet_keras.runtime.probe RESULT_JSON (started by runtime.probe.probe)")
    _child(sys.argv[1])
