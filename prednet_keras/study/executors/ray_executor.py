"""`prednet-study run --executor ray`: every run a Ray task, placed by what its configuration needs.

Ray is an optional extra (`pip install prednet-keras[ray]`); this module is the
only one that imports it, and only when a study runs on it.

What a run is does not change with the executor (one_run.py): the same
manifest (one_run.run_manifest), the same partial folder made from scratch
(one_run.make_partial), the same training process (worker.start) and the same
finish step (one_run.finish_run: complete, started from the seed's weights,
then renamed atomically to its final name). Here:

* The driver (the `prednet-study run` process) makes the seeds' starting
  points, then submits one Ray task per pending run, asking for the resources
  its configuration needs (`resource_request`): `num_cpus = threads` (1 when
  unset) and, for a GPU configuration, `num_gpus = gpu_share` (1 by default;
  0.25 lets four GPU runs share one GPU). Ray places each task on a node that
  has them: GPU arms only go to nodes that declare GPUs. A configuration that
  no node of the cluster can hold is reported (not left pending forever).
* The task, on whatever node Ray picked, remakes the run's partial folder
  from the driver's manifest (adding `study.executor`: node id, node IP, host,
  GPU ids, attempt), starts the training process exactly as the local pool
  does, waits, and returns its exit code. The driver then runs the shared
  finish step.
* Every node reads and writes the study folder by the same absolute path: it
  must be on a shared file system (NFS, Lustre, ...) mounted at the same path
  everywhere; a task that cannot see it fails with that message.
* Retries: a task whose Ray worker or node dies is retried by Ray
  (`max_retries`); a training process killed by a signal (OOM killer,
  SIGKILL, SIGTERM) is retried by the driver. Each attempt starts from a
  fresh partial folder, and a final folder is only ever made by the one
  attempt that completed, so no run is lost or duplicated. Attempts are
  numbered across both kinds of retry (`begin_attempt`): the manifest's
  study.executor.attempt of a run that Ray retried once says 2. A run that fails
  on its own (exit status 1) is not retried: its configuration stops, as
  with the local pool.
* The training process gets SIGKILL if its Ray worker dies, so nothing of a
  dead attempt writes into the folder of the next one.
"""

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from prednet_keras.session import folder as run_folders
from prednet_keras.study.executors import one_run
from prednet_keras.study.spec import SpecError

__all__ = ["INSTALL_HINT", "RayConnectionError", "RayUnavailableError", "begin_attempt", "check_address",
           "check_configurations", "connect", "execute", "placement_problems", "resource_request"]

INSTALL_HINT = "pip install prednet-keras[ray]"
# Retries of a run whose worker died, by Ray (worker or node lost) and by the driver (process killed).
DEFAULT_RETRIES = 2
# Environment of a private local Ray (no --address): loopback only, no usage statistics.
_LOCAL_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


class RayUnavailableError(ValueError):
    """--executor ray without Ray installed."""


class RayConnectionError(ValueError):
    """The Ray cluster at --address cannot be reached."""


def require_ray():
    """Raises RayUnavailableError (one line: how to install it) when Ray is not installed."""
    try:
        found = importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):
        found = False
    if not found or sys.modules.get("ray", True) is None:
        raise RayUnavailableError(f"--executor ray needs Ray, which is not installed: {INSTALL_HINT}")


def resource_request(configuration, gpu_share=1.0):
    """The Ray resources one run of `configuration` asks for.

    Args:
        configuration: a spec Configuration (or its runtime dict).
        gpu_share: the fraction of a GPU a GPU run asks for (1: a GPU of its own).

    Returns:
        {"num_cpus": threads (1 when unset), "num_gpus": gpu_share for a GPU
        configuration, else 0}: the options of the Ray task.
    """
    runtime = getattr(configuration, "runtime", configuration)
    threads = runtime.get("threads") or 1
    gpu = str(runtime.get("device", "cpu")).split(":")[0] == "gpu"
    return {"num_cpus": int(threads), "num_gpus": float(gpu_share) if gpu else 0}


def check_configurations(configurations, gpu_share):
    """SpecError when a configuration cannot run as written under Ray."""
    if not 0 < gpu_share <= 1:
        raise SpecError(f"--gpu-share must be in (0, 1], got {gpu_share}.")
    for config in configurations:
        device = str(config.runtime.get("device", "cpu"))
        if ":" in device:
            raise SpecError(f"configuration {config.name} asks for {device}; under --executor ray, Ray picks the "
                            "GPU of each run (device = \"gpu\"), use the local executor to pin a GPU.")


def _describe(request):
    parts = [f"{request['num_cpus']} CPU{'s' if request['num_cpus'] != 1 else ''}"]
    if request["num_gpus"]:
        parts.append(f"{request['num_gpus']:g} GPU")
    return " + ".join(parts)


def placement_problems(configurations, gpu_share, nodes):
    """{configuration name: why no node can run it} for the configurations no alive node can hold.

    Args:
        configurations: spec Configurations.
        gpu_share: as for resource_request.
        nodes: ray.nodes() (dicts with Alive, Resources, NodeManagerAddress).
    """
    alive = [n for n in nodes if n.get("Alive", n.get("alive", False))]
    summary = ", ".join(
        f"{n.get('NodeManagerAddress', '?')}: {n['Resources'].get('CPU', 0):g} CPU, "
        f"{n['Resources'].get('GPU', 0):g} GPU" for n in alive
    ) or "none alive"
    problems = {}
    for config in configurations:
        request = resource_request(config, gpu_share)
        fits = any(n["Resources"].get("CPU", 0) >= request["num_cpus"]
                   and n["Resources"].get("GPU", 0) >= request["num_gpus"] for n in alive)
        if not fits:
            hint = ("start a node that declares GPUs (ray start --address HEAD:6379 --num-gpus N)"
                    if request["num_gpus"] else "start a node with that many CPUs, or lower `threads`")
            problems[config.name] = (f"no node of the Ray cluster has {_describe(request)} (nodes: {summary}); "
                                     f"{hint}, or run these arms elsewhere (--only)")
    return problems


def connect(address=None):
    """Connects this process to Ray; returns (ray module, whether this call connected).

    Args:
        address: a running cluster ("auto", "HOST:6379", "ray://HOST:10001");
            None: start a private Ray on this machine only (loopback, no
            dashboard, no usage statistics), stopped again at the end.

    An existing connection of this process (ray.init called before) is used as
    it is and left open.
    """
    require_ray()
    for key, value in (_LOCAL_ENV.items() if address is None else [("RAY_USAGE_STATS_ENABLED", "0")]):
        # Read by Ray when it is imported: only effective before the first import.
        os.environ.setdefault(key, value)
    import ray

    if ray.is_initialized():
        return ray, False
    if address is None:
        ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False,
                 logging_level="ERROR", object_store_memory=200 * 1024 * 1024)
    else:
        check_address(address)
        try:
            ray.init(address=address, log_to_driver=False, logging_level="ERROR")
        except ConnectionError as error:
            raise RayConnectionError(f"Cannot connect to the Ray cluster at {address}: {error}") from None
    return ray, True


def check_address(address, timeout=10):
    """A HOST:PORT address nobody listens on fails here at once (Ray itself would retry for minutes)."""
    import socket

    if "://" in address or ":" not in address:
        return  # auto, ray://...: Ray's own lookup
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except (OSError, ValueError) as error:
        raise RayConnectionError(f"No Ray cluster at {address} ({error}); start one with `ray start --head` "
                                 "there, or leave --address out for a private Ray on this machine.") from None


def _environment_ray_added():
    """Variables Ray set in this worker process for the task (not inherited from the node).

    Ray sets OMP_NUM_THREADS to the task's CPUs when the node did not set it;
    the training process should see the node's environment, as it would
    under the local executor (the configuration's `threads` sets it anyway).
    """
    try:
        inherited = Path("/proc/self/environ").read_bytes().split(b"\0")
    except OSError:
        return []
    names = {item.split(b"=", 1)[0].decode(errors="replace") for item in inherited if b"=" in item}
    return [name for name in ("OMP_NUM_THREADS",) if name in os.environ and name not in names]


def begin_attempt(partial, manifest, node, first):
    """Makes the partial folder of one attempt at a run; returns the manifest written there.

    The manifest is the driver's with study.executor = `node` and the number of
    this attempt. The driver numbers the attempts it submits (`first`: 1, or
    one more than the attempt whose training process was killed) and removes
    the partial folder before each. When a task's worker or node dies, Ray runs
    the task again with the same arguments, `first` included; the partial
    folder the dead attempt made is then still there, and its manifest says
    which attempt that was: this one is the next.

    Args:
        partial: the run's partial folder.
        manifest: the driver's manifest (one_run.run_manifest).
        node: where this attempt runs (recorded as study.executor).
        first: the attempt number the driver gave the task.
    """
    partial = Path(partial)
    attempt = first
    try:
        earlier = run_folders.RunFolder(partial).read_manifest()["study"]["executor"]["attempt"]
    except (run_folders.RunFolderError, KeyError, TypeError):
        earlier = None
    if isinstance(earlier, int) and not isinstance(earlier, bool) and earlier >= first:
        attempt = earlier + 1
    manifest = dict(manifest, study=dict(manifest["study"], executor=dict(node, attempt=attempt)))
    one_run.make_partial(partial, manifest)
    return manifest


def train_on_node(partial, manifest, runtime, attempt, request):
    """The Ray task of one run: fresh partial folder, the training process, its exit code.

    Args:
        partial: the run's partial folder (absolute; on the shared file system).
        manifest: its first manifest (one_run.run_manifest).
        runtime: the configuration's runtime dict.
        attempt: the driver's number for this attempt (1, 2, ...); Ray's own
            retries of the task count on from it (begin_attempt).
        request: the resources asked for (recorded).

    Returns:
        dict: code (Popen's return code) and seconds, or error (the run could
        not start here); node (where it ran).
    """
    import ray

    from prednet_keras.runtime import RuntimeConfig
    from prednet_keras.session import worker

    context = ray.get_runtime_context()
    node = {"kind": "ray", "node_id": context.get_node_id(), "node_ip": ray.util.get_node_ip_address(),
            "host": os.uname().nodename, "gpu_ids": [str(i) for i in ray.get_gpu_ids()], "attempt": attempt,
            "resources": dict(request), "worker_pid": os.getpid()}
    partial = Path(partial)
    for needed in (partial.parent, Path(manifest["options"]["init_weights"])):
        if not needed.exists():
            return {"error": f"{needed} is not visible on node {node['host']} ({node['node_ip']}): the study "
                             "folder must be on a file system every node mounts at the same path", "node": node}
    node = begin_attempt(partial, manifest, node, attempt)["study"]["executor"]
    for name in _environment_ray_added():
        os.environ.pop(name)
    started = time.perf_counter()
    with open(partial / one_run.LOG, "w", encoding="utf-8") as log:
        # SIGKILL when the Ray worker dies: Ray retries the task at once, remaking this partial
        # folder, which a process still recording its interruption must not write into.
        process = worker.start(partial, RuntimeConfig.from_dict(runtime), quiet=True, stdout=log,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, death_signal=signal.SIGKILL)
        try:
            # Polled, not process.wait(): Ray delivers a cancellation (KeyboardInterrupt) between
            # Python instructions, never inside a blocking wait.
            while (code := process.poll()) is None:
                time.sleep(0.2)
        except BaseException:  # cancelled: let the process record it, then go
            _stop(process)
            raise
    return {"code": code, "seconds": time.perf_counter() - started, "node": node}


def _stop(process, grace=30):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _killed(code):
    """A training process that did not fail by itself: killed by a signal, or interrupted (SIGTERM)."""
    from prednet_keras.session.worker import EXIT_INTERRUPTED

    return code < 0 or code == EXIT_INTERRUPTED


def _how(code):
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return "interrupted"


def _last_error_line(error):
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def execute(spec, study_dir, pending, records, command, progress, outcome, done_before, *, address=None,
            gpu_share=1.0, retries=DEFAULT_RETRIES, max_in_flight=None):
    """Runs `pending` on Ray; fills `outcome` as the local executor does (plus `unplaceable`).

    Args:
        spec, study_dir, pending, records, command, progress, outcome,
            done_before: as LocalExecutor.execute.
        address: the Ray cluster (None: a private one on this machine).
        gpu_share: fraction of a GPU per GPU run.
        retries: further attempts of a run whose worker died (Ray's and the driver's each).
        max_in_flight: runs submitted at once (None: all; Ray queues them).
    """
    ray, connected = connect(address)
    try:
        _execute(ray, spec, study_dir, pending, records, command, progress, outcome, done_before, gpu_share,
                 retries, max_in_flight)
    finally:
        if connected:
            ray.shutdown()


def _execute(ray, spec, study_dir, pending, records, command, progress, outcome, done_before, gpu_share, retries,
             max_in_flight):
    configurations = list({run.configuration.name: run.configuration for run in pending}.values())
    problems = placement_problems(configurations, gpu_share, ray.nodes())
    outcome["unplaceable"] = problems
    task = ray.remote(train_on_node)
    # (run, the driver's retries of it so far, the number of the attempt to submit)
    queue = [(run, 0, 1) for run in pending if run.configuration.name not in problems]
    in_flight = {}
    total = done_before + len(pending)
    done = done_before
    if progress:
        resources = ray.cluster_resources()
        progress.message(f"Ray: {len(ray.nodes())} node(s), {resources.get('CPU', 0):g} CPUs, "
                         f"{resources.get('GPU', 0):g} GPUs; {len(queue)} runs to place.")

    def submit(run, retried, attempt):
        partial = one_run.partial_folder(study_dir, run)
        # From scratch: whatever an earlier attempt left is gone (the task remakes it on its node).
        if partial.exists():
            shutil.rmtree(partial)
        manifest = one_run.run_manifest(spec, study_dir, run, records[run.seed], command)
        request = resource_request(run.configuration, gpu_share)
        ref = task.options(max_retries=retries, retry_exceptions=False, name=f"prednet-study:{run.key}",
                           **request).remote(os.fspath(partial.resolve()), manifest, run.configuration.runtime,
                                             attempt, request)
        in_flight[ref] = (run, retried, attempt, partial)
        if progress:
            progress.run_started(run)

    try:
        while queue or in_flight:
            while queue and (max_in_flight is None or len(in_flight) < max_in_flight):
                run, retried, attempt = queue.pop(0)
                if run.configuration.name in outcome["skipped"]:
                    continue
                submit(run, retried, attempt)
            if not in_flight:
                continue
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=1.0)
            for ref in ready:
                run, retried, attempt, partial = in_flight.pop(ref)
                try:
                    answer = ray.get(ref)
                except ray.exceptions.TaskCancelledError:
                    continue  # its configuration stopped after a failed run before it started
                except Exception as error:  # the task raised, or Ray gave up on its worker / node
                    result = one_run.RunOutcome(run.key, "failed", message=f"Ray: {_last_error_line(error)}")
                else:
                    if "error" in answer:
                        result = one_run.RunOutcome(run.key, "failed", message=answer["error"])
                    elif _killed(answer["code"]) and retried < retries:
                        # After Ray's own retries of the task the attempt that ran is a later one than submitted.
                        following = answer["node"].get("attempt", attempt) + 1
                        if progress:
                            progress.message(f"retry   {run.key}: training process {_how(answer['code'])} on "
                                             f"{answer['node']['host']} ({answer['node']['node_ip']}); attempt "
                                             f"{following} (retry {retried + 1} of {retries})")
                        queue.insert(0, (run, retried + 1, following))
                        continue
                    else:
                        result = one_run.finish_run(study_dir, run, partial, answer["code"], answer["seconds"])
                if result.status == "done":
                    done += 1
                    outcome["done"].append(result)
                else:
                    outcome["failed"].append(result)
                    name = run.configuration.name
                    if name not in outcome["skipped"]:
                        outcome["skipped"][name] = result.message
                        _cancel_unstarted(ray, in_flight, name)
                if progress:
                    progress.run_finished(result, done, total)
    except BaseException:
        _cancel(ray, study_dir, in_flight)
        raise
    outcome["pending"] = total - done


def _cancel_unstarted(ray, in_flight, configuration):
    """Cancels the submitted runs of `configuration` whose task has not started (no partial folder yet)."""
    for ref, (run, _, _, partial) in list(in_flight.items()):
        if run.configuration.name == configuration and not partial.exists():
            try:
                ray.cancel(ref)
            except Exception:
                pass


def _cancel(ray, study_dir, in_flight, grace=40):
    """Cancels the runs in flight: their training processes record the interruption and stop.

    A run that completed meanwhile still gets its final name.
    """
    refs = list(in_flight)
    for ref in refs:
        try:
            ray.cancel(ref)
        except Exception:
            pass
    if not refs:
        return
    try:
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=grace)
    except BaseException:
        ready = []
    for ref in refs:
        if ref in ready:
            try:
                answer = ray.get(ref, timeout=5)
                if answer.get("code") == 0:
                    run, _, _, partial = in_flight[ref]
                    one_run.finish_run(study_dir, run, partial, 0, answer["seconds"])
            except BaseException:
                pass
        else:
            try:
                ray.cancel(ref, force=True)
            except Exception:
                pass


class RayExecutor:
    """The study's runs as Ray tasks (see the module docstring): the interface runner.run_study calls.

    Args:
        address: the Ray cluster (None: a private one on this machine).
        gpu_share: fraction of a GPU per GPU run.
        max_in_flight: runs submitted at once (None: all).
        retries: further attempts of a run whose worker died (None: DEFAULT_RETRIES).
    """

    name = "ray"

    def __init__(self, address=None, gpu_share=1.0, max_in_flight=None, retries=None):
        self.address = address
        self.gpu_share = gpu_share
        self.max_in_flight = max_in_flight
        self.retries = DEFAULT_RETRIES if retries is None else retries

    def check(self, configurations):
        """Refuses, before anything is written: Ray not installed, a configuration no request can
        express, a cluster that cannot be reached."""
        require_ray()
        check_configurations(configurations, self.gpu_share)
        if self.address:
            check_address(self.address)

    def shared_cache(self, study_dir, configurations):
        """None: Ray's nodes compile each for itself (no cache folder is shared between machines)."""
        return None

    def execute(self, spec, study_dir, pending, points, command, progress, outcome, done_before):
        # Every seed's starting point first: a task's node reads its seed's files from the shared folder, and
        # Ray queues the tasks itself.
        execute(spec, study_dir, pending, points.wait(), command, progress, outcome, done_before,
                address=self.address, gpu_share=self.gpu_share, retries=self.retries,
                max_in_flight=self.max_in_flight)
