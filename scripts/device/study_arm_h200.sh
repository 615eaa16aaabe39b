#!/bin/bash
# Issue 25 on the GPU machine: one 30-seed arm of the paper study through the study runner, and the proof that
# runs sharing the GPU give each seed the numbers it gets alone.
#
#   bash scripts/device/study_arm_h200.sh OUT
#
# Run from the repository root after the set-up of ../shared/gpu/README.md (the wheels installed, PYTHONPATH
# holding them and the repository).
# 1. `prednet-study run paper --only ARM -j WORKERS`: the ready spec `paper` (the
#    Chainer-lineage PredNet at full size by the paper's protocol: 5000 frames of 120x160, updates every 20,
#    batch 1), one arm (STUDY_ARM, default gpu-jax-deterministic; gpu-jax is the same without deterministic GPU
#    ops), 30 seeds, WORKERS (default 8) training processes sharing the GPU
#    and the study's JAX compilation cache (the first run compiles alone, the others load its programs).
#    The wall time of the whole arm (initial weights, 30 runs, report) is the figure.
# 2. The same arm for seeds 0 and 1, one process at a time (-j 1) and each compiling its own programs
#    (--no-compile-cache), into another folder; then each seed's history (every column but the wall-clock
#    seconds) and final weights' sha256 are compared with the shared-GPU run's.
# STUDY_LIMIT_S (default 420) and STUDY_ALONE_LIMIT_S (default 150) cap the two study runs; STUDY_ALONE_LIMIT_S=0
# leaves step 2 out (for the nondeterministic arm the comparison proves nothing: its runs differ by nature).
# STUDY_RUN_EXTRA: options appended to the first `prednet-study run` (e.g. --no-compile-cache, to measure the arm
# without the shared cache).
# STUDY_UNROLL=1: the spec with `unroll = true` in [train] (the window's time loop unrolled; work folder's
# paper-unrolled.toml), for both study runs.
# STUDY_MPS=1: run step 1 under CUDA's Multi-Process Service (a daemon of this user, pipes under the work folder;
# the GPU's settings are not touched), so that the processes' kernels can run on the GPU at the same time instead
# of taking turns; the daemon is stopped before step 2, which so proves that MPS changes no number. Where
# nvidia-cuda-mps-control is missing or does not start, step 1 runs without it and summary.txt says so.
# Writes into OUT: summary.txt and study_arm.tar.xz (both study folders without model and initial-weight files, and the logs).
set -u
dest=${1:-${OUT:-}}
[ -n "$dest" ] || { echo "usage: bash scripts/device/study_arm_h200.sh OUT" >&2; exit 2; }
work=${STUDY_WORK:-/tmp/study-arm}
workers=${STUDY_WORKERS:-8}
arm=${STUDY_ARM:-gpu-jax-deterministic}
alone_limit=${STUDY_ALONE_LIMIT_S:-150}
limit=${STUDY_LIMIT_S:-420}
rm -rf "$work"; mkdir -p "$work/logs" "$dest"
pack() {
    cp "$work/summary.txt" "$dest/" 2>/dev/null
    tar cJf "$dest/study_arm.tar.xz" -C "$work" --exclude='*.keras' --exclude='*.h5' --exclude='checkpoints' \
        --exclude='.jax-compilation-cache' --exclude='loss.png' .
}
trap pack EXIT
export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$work/logs/nvidia-smi.txt" 2>&1
(nproc; free -g) > "$work/logs/host.txt" 2>&1

mps="off"
stop_mps() { [ "$mps" = on ] && echo quit | nvidia-cuda-mps-control; mps=stopped; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; }
if [ "${STUDY_MPS:-0}" = 1 ]; then
    export CUDA_MPS_PIPE_DIRECTORY=$work/mps/pipe CUDA_MPS_LOG_DIRECTORY=$work/mps/log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if ! command -v nvidia-cuda-mps-control > /dev/null; then
        mps="not available: no nvidia-cuda-mps-control"; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    elif nvidia-cuda-mps-control -d; then
        mps=on
    else
        mps="not available: nvidia-cuda-mps-control -d failed"; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fi
    # What the GPU runs a minute in (MPS clients show as type M+C).
    (sleep 60; nvidia-smi > "$work/logs/nvidia-smi-at-60s.txt" 2>&1) &
fi
trap 'stop_mps; pack' EXIT
echo "MPS: $mps" > "$work/logs/mps.txt"

# Byte-compiled first, as `pip install` leaves an installed package (the set-up installs with --no-compile):
# otherwise the arm's first processes would spend seconds compiling Keras' and our sources.
python3 -m compileall -q -j 0 "$PWD/prednet_keras" $(python3 -c "import keras, os; print(os.path.dirname(keras.__file__))" 2>/dev/null) > "$work/logs/compileall.txt" 2>&1
# The ready spec by its name, or its copy with the window unrolled; spec_file: the file either is.
spec=paper spec_file=prednet_keras/study/specs/paper.toml
if [ "${STUDY_UNROLL:-0}" = 1 ]; then
    spec=$work/paper-unrolled.toml
    sed 's/^protocol = "paper"$/protocol = "paper"\nunroll = true/' "$spec_file" > "$spec"
    spec_file=$spec
    grep -qx 'unroll = true' "$spec" || { echo "STUDY_UNROLL: could not set unroll in $spec" >&2; exit 2; }
fi
t0=$(date +%s.%N)
timeout -k 10 "$limit" python3 -m prednet_keras.cli.study run "$spec" -o "$work/shared" --only "$arm" \
    -j "$workers" --quiet ${STUDY_RUN_EXTRA:-} > "$work/logs/shared.log" 2>&1
shared_code=$?
[ "$mps" = on ] && { echo get_server_list | nvidia-cuda-mps-control >> "$work/logs/mps.txt" 2>&1; stop_mps; }
t1=$(date +%s.%N)
sed 's/^seeds = 30$/seeds = 2/' "$spec_file" > "$work/paper-2-seeds.toml"
if (( alone_limit > 0 )); then
    timeout -k 10 "$alone_limit" python3 -m prednet_keras.cli.study run "$work/paper-2-seeds.toml" -o "$work/alone" \
        --only "$arm" -j 1 --quiet --no-report --no-compile-cache > "$work/logs/alone.log" 2>&1
    alone_code=$?
else
    alone_code="not run"
fi
t2=$(date +%s.%N)

python3 - "$work" "$shared_code" "$alone_code" "$t0" "$t1" "$t2" "$workers" "$(head -1 "$work/logs/mps.txt")" "$arm" <<'PY' | tee "$work/summary.txt"
import json, pathlib, sys
work, shared_code, alone_code = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
t0, t1, t2 = map(float, sys.argv[4:7])
arm = sys.argv[9]
shared = sorted((work / "shared" / "runs" / arm).glob("seed-*"))
done = [r for r in shared if json.loads((r / "manifest.json").read_text()).get("status") == "complete"]
spec = json.loads((work / "shared" / "study.json").read_text())["spec"] if (work / "shared" / "study.json").exists() else {}
unroll = spec.get("train", {}).get("unroll")
print(f"shared GPU ({sys.argv[8]}): prednet-study run paper --only {arm} -j {sys.argv[7]} (window "
      f"{'unrolled' if unroll else 'rolled'}): exit {shared_code}, "
      f"{t1 - t0:.0f} s wall, {len(done)} of 30 runs complete")
for r in done[:3]:
    m = json.loads((r / "manifest.json").read_text())
    print(f"  {r.name}: {m.get('result', {}).get('train_seconds')} s training")
if done:
    secs = [json.loads((r / "manifest.json").read_text()).get("result", {}).get("train_seconds") or 0 for r in done]
    print(f"  training seconds per run: min {min(secs):.1f}, median {sorted(secs)[len(secs)//2]:.1f}, max {max(secs):.1f}")
    import csv
    firsts = sorted(float(next(csv.DictReader(open(r / "history.csv")))["seconds"]) for r in done)
    print(f"  first update (compilation or a cache load) seconds: min {firsts[0]:.1f}, "
          f"median {firsts[len(firsts)//2]:.1f}, max {firsts[-1]:.1f}")
    from datetime import datetime
    stamp = lambda text: datetime.strptime(text, "%Y-%m-%dT%H:%M:%S%z").timestamp()  # noqa: E731
    sessions = sorted((stamp(s["started"]), stamp(s["ended"])) for r in done
                      for s in json.loads((r / "manifest.json").read_text())["sessions"][:1])
    print(f"  timeline from the command's start (s, whole seconds): first run's training process started "
          f"{sessions[0][0] - t0:.0f}, second's {sessions[1][0] - t0:.0f}, last run ended "
          f"{max(e for _, e in sessions) - t0:.0f}" if len(sessions) > 1 else "")
    invoked = stamp(json.loads((work / "shared" / "study.json").read_text())["invocations"][0]["time"])
    seeds = sorted(p.stat().st_mtime for p in (work / "shared" / "seeds").glob("*/seed.json"))
    folders = sorted(json.loads((r / "manifest.json").read_text())["created"] for r in done)
    print(f"  start (s): study.json {invoked - t0:.0f}, first seed.json {seeds[0] - t0:.1f}, last {seeds[-1] - t0:.1f}, "
          f"first run folder {stamp(folders[0]) - t0:.0f}" if seeds else "")
cache = work / "shared" / ".jax-compilation-cache"
entries = sorted(p.name.rsplit("-", 2)[0] for p in cache.glob("*-cache")) if cache.is_dir() else []
print(f"  compilation cache: {len(entries)} programs ({', '.join(sorted(set(entries)))})" if entries
      else "  compilation cache: none")
print(f"alone: seeds 0 and 1, -j 1: exit {alone_code}, {t2 - t1:.0f} s wall")
for seed in ("seed-0000-r1", "seed-0001-r1") if alone_code != "not run" else ():
    a, b = work / "shared" / "runs" / arm / seed, work / "alone" / "runs" / arm / seed
    if not (a / "history.csv").exists() or not (b / "history.csv").exists():
        print(f"  {seed}: missing in one of the two folders")
        continue
    def losses(run):  # every column but the wall-clock one
        import csv
        rows = list(csv.DictReader(open(run / "history.csv")))
        return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]
    same = losses(a) == losses(b)
    ra = json.loads((a / "manifest.json").read_text()).get("result", {})
    rb = json.loads((b / "manifest.json").read_text()).get("result", {})
    weights = ra.get("weights_checksum") == rb.get("weights_checksum") is not None
    print(f"  {seed}: {len(losses(a))} updates, history (all but seconds) {'identical' if same else 'DIFFERS'}; "
          f"final weights {'identical' if weights else 'DIFFER'} (sha256 {ra.get('weights_checksum', '?')[:12]})")
PY
