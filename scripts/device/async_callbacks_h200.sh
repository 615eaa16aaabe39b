#!/bin/bash
# Issue 40 on the GPU machine: does the GPU gain from the async-safe callbacks (on JAX, Keras reads each step's
# logs in its thread pool and the run recorder reads the step before the last dispatched one, so one step stays
# queued; before, fit's thread converted every step's logs as soon as the step was dispatched)? The same
# prednet-bench command (Lotter's KITTI configuration, 128x160, nt 10, JAX, training through fit, read as
# prednet-train reads it) with the code of BEFORE and of this working tree, alternating, the order reversed every
# other round, so that drift falls on both alike. On the GPU machine, after the set-up of
# ../shared/gpu/README.md, from the repository root:
#
#   PREDNET_SOURCE_COMMIT=$(git rev-parse HEAD) PREDNET_SOURCE_DIRTY=0 bash scripts/device/async_callbacks_h200.sh OUT [BEFORE]
#
# BEFORE: a checkout's directory (BEFORE_COMMIT then names its commit), or a commit of this repository's .git
# (default eaead9d, the main this change sits on), unpacked with git archive. CONFIGS (space-separated PRECISION:BATCH, default "float32:4 float32:16
# mixed_bfloat16:16"), ROUNDS (default 2), STEPS (default 100), WARMUP (default 5), BENCH_CAP_S (default 120,
# one benchmark's limit). About 16 minutes with the defaults (each process compiles its step). For a smoke test
# elsewhere: DEVICE=cpu BENCH_EXTRA="--stack-sizes 3,4,8 --size 16x16 --nt 4". Writes into OUT: summary.txt (the
# median frames/s of each side and after/before per round, per configuration), status.tsv, and
# async_callbacks.tgz (every prednet-bench JSON, the logs, both text files).
set -u
source "$(dirname "$0")/require_commit.sh"
dest=${1:?usage: bash scripts/device/async_callbacks_h200.sh OUT [BEFORE]}
before=${2:-eaead9d}
work=${ASYNC_WORK:-/tmp/async-callbacks}
rm -rf "$work"; mkdir -p "$work/logs" "$work/json" "$dest"
pack() {
    cp "$work/summary.txt" "$work/status.tsv" "$dest/" 2>/dev/null
    tar czf "$dest/async_callbacks.tgz" -C "$work" --exclude=before-code json logs summary.txt status.tsv 2>/dev/null
}
trap pack EXIT
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
if [ -d "$before" ]; then
    before_code=$(cd "$before" && pwd)
    before_commit=${BEFORE_COMMIT:?BEFORE_COMMIT: the commit the folder BEFORE holds, all 40 hex digits}
else
    before_commit=$(git rev-parse "$before^{commit}") || { echo "no commit $before here" >&2; exit 2; }
    before_code=$work/before-code
    mkdir -p "$before_code"
    git archive "$before" | tar -x -C "$before_code" || { echo "git archive $before failed" >&2; exit 2; }
fi
after_code=$(pwd)
for code in "$before_code" "$after_code"; do  # which package each side imports, as the runs below import it
    (cd "$code" && PYTHONPATH="$code${PYTHONPATH:+:$PYTHONPATH}" python3 -c 'import prednet_keras; print(prednet_keras.__file__)')
done > "$work/logs/packages.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$work/logs/nvidia-smi.txt" 2>&1
read -r -a extra <<< "${BENCH_EXTRA:-}"
printf 'name\tside\tround\texit\tseconds\n' > "$work/status.tsv"
for ((round=1; round<=${ROUNDS:-2}; round++)); do
    sides=(before after); [ $((round % 2)) = 0 ] && sides=(after before)
    for config in ${CONFIGS:-float32:4 float32:16 mixed_bfloat16:16}; do
        IFS=: read -r precision batch <<< "$config"
        name="jax-$precision-b$batch"
        for side in "${sides[@]}"; do
            code=$before_code commit=$before_commit
            [ "$side" = after ] && code=$after_code commit=$PREDNET_SOURCE_COMMIT
            started=$(date +%s)
            # From the code's folder: `python -m` puts the working directory first on sys.path, before PYTHONPATH.
            (cd "$code" && PREDNET_SOURCE_COMMIT=$commit PYTHONPATH="$code${PYTHONPATH:+:$PYTHONPATH}" timeout -k 10 "${BENCH_CAP_S:-120}" python3 -m prednet_keras.cli.bench \
                --backend jax --device "${DEVICE:-gpu}" --mode train --precision "$precision" --batch-size "$batch" \
                --steps "${STEPS:-100}" --warmup "${WARMUP:-5}" -q --json "$work/json/$name-$side-r$round.json" \
                --overwrite "${extra[@]}" > "$work/logs/$name-$side-r$round.log" 2>&1)
            printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$side" "$round" "$?" "$(( $(date +%s) - started ))" >> "$work/status.tsv"
        done
    done
done
python3 - "$work" <<'EOF' | tee "$work/summary.txt"
import glob, json, os, statistics, sys
work = sys.argv[1]
table = {}
for path in sorted(glob.glob(os.path.join(work, "json", "*.json"))):
    name, side, round_ = os.path.basename(path)[:-5].rsplit("-", 2)
    (result,) = json.load(open(path))["results"]
    table.setdefault(name, {}).setdefault(side, {})[int(round_[1:])] = result["train"]["fps"]
for name, sides in table.items():
    b, a = sides.get("before", {}), sides.get("after", {})
    line = f"{name}: before {statistics.median(b.values()):,.0f} frames/s" if b else f"{name}: before -"
    line += f", after {statistics.median(a.values()):,.0f} frames/s" if a else ", after -"
    rounds = sorted(set(a) & set(b))
    if rounds:
        ratios = [a[r] / b[r] for r in rounds]
        line += f"; after/before median {statistics.median(ratios):.3f}, per round " + ", ".join(f"{r:.3f}" for r in ratios)
    print(line)
EOF
