"""The measuring process of one benchmark configuration: `python -m prednet_keras.bench.child CONFIG_JSON
RESULT_JSON [--profile FOLDER]`, started by runner.run_configuration in the runtime's environment.

It sets the runtime up before the framework is imported, measures (bench.measure) and writes its result
file. Reached by `python -m` only, so the package's face does not import it.
"""

import argparse
import json
import os
import sys

from prednet_keras.bench.measure import measure
from prednet_keras.bench.runner import SYNTHETIC_DATA, BenchConfig
from prednet_keras.runtime import log_noise


def _child(config_text, result_path, profile_dir=None):
    """Runs inside the configured child process: set up, measure, write the result file."""
    from prednet_keras import runtime

    try:
        config = BenchConfig.from_dict(json.loads(config_text))  # resolved by the parent
        config.validate()
        runtime_config, effective = runtime.configure_from_environment()
        from prednet_keras.session.recipe_training import jit_compile_for

        jit_compile = jit_compile_for(runtime_config.to_dict(), effective)
        print(f"measuring {config.label()} on {runtime_config.backend} / {runtime_config.device} "
              f"(jit_compile={jit_compile})", flush=True)
        phases = measure(config, jit_compile, progress=lambda text: print(text, flush=True), profile_dir=profile_dir)
        result = {
            "ok": True,
            "config": config.to_dict(),
            "data": SYNTHETIC_DATA,
            "runtime": {"requested": runtime_config.to_dict(), "effective": effective, "jit_compile_used": jit_compile},
            "fingerprint": runtime.fingerprint(),
            **phases,
        }
    except (ValueError, runtime.RuntimeSetupError) as error:
        if os.environ.get("PREDNET_DEBUG"):
            raise
        result = {"ok": False, "error": " ".join(str(error).split())}
    except Exception as error:  # a bug: the parent shows it with the child's output
        import traceback

        traceback.print_exc()
        result = {"ok": False, "error": f"{type(error).__name__}: {error}"}
    from prednet_keras.files.diskwrite import atomic_write_json

    atomic_write_json(result_path, result)
    return 0 if result["ok"] else 1


def main(argv=None):
    """Entry point of `python -m prednet_keras.bench.child CONFIG_JSON RESULT_JSON` (started by
    runner.run_configuration)."""
    parser = argparse.ArgumentParser(prog="python -m prednet_keras.bench.child",
                                     description="measure one configuration in this (runtime-configured) process")
    parser.add_argument("config", help="BenchConfig as JSON")
    parser.add_argument("result", help="where to write the result JSON")
    parser.add_argument("--profile", help="folder for profiler traces of each phase")
    args = parser.parse_args(argv)
    return _child(args.config, args.result, args.profile)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    log_noise.finish()  # its last lines out before the parent's next ones
    # The result file is complete; skip interpreter teardown (TensorFlow's noise at exit).
    os._exit(code)
