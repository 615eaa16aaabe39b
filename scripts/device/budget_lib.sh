# Shared by the GPU measurement scripts (perf_h200.sh, bf16_h200.sh): source it after setting
#   script (the script's name, e.g. perf_h200) and default_budget (seconds)
# with the script's arguments still in "$@". It makes the work folder PERF_WORK (default /tmp/<script with
# '-' for '_'>), records the GPU and library versions in its logs/, packs it into OUT/<script>.tgz (with status.tsv
# and summary.txt beside it) on exit, and defines
#   run NAME CAP_S MIN_S COMMAND...    COMMAND under timeout, at most CAP_S and at most what is left of
#                                      PERF_BUDGET_S; skipped when less than MIN_S is left; the outcome
#                                      goes to status.tsv
#   bench NAME CAP_S MIN_S OPTIONS...  run of prednet-bench training (20 timed steps after 3 warm-up steps)
#                                      with its JSON as NAME.json
#   tree_of_working_copy               prints the git tree hash of the files the command ran from (the GPU
#                                      machine's copy carries the working tree but not always its commits:
#                                      `git log` there can name an older commit); a commit ran unchanged when
#                                      `git rev-parse COMMIT^{tree}` prints the same hash
#   wanted NAME                        whether PERF_ONLY (names, space-separated) leaves NAME in
#   quality                            prednet-train on the embedded video, JAX, float32 and mixed_bfloat16 at
#                                      once from seed 0, 3 epochs (PERF_TRAIN_EXTRA appended); each run's
#                                      manifest.json and history.csv into quality-PRECISION/ (run it with
#                                      `run quality CAP MIN bash -c quality`; quality_summary.py prints them)
# PERF_DEVICE (default gpu) and PERF_BENCH_EXTRA (options appended to every prednet-bench) are for a smoke test
# elsewhere.
# The code the runs are made with: the command that starts a script on the GPU machine is written here, where
# `git rev-parse HEAD` works; a copy of the tree without .git can record its code only from the environment,
# so callers export, in that command,
#   PREDNET_SOURCE_COMMIT=$(git rev-parse HEAD)
#   PREDNET_SOURCE_DIRTY=$(git status --porcelain -- prednet_keras | grep -q . && echo 1 || echo 0)
# (prednet_keras/runtime/code_provenance.py; a copy that carries .git records what git says there instead).
set -u
dest=${1:-${OUT:-}}
[ -n "$dest" ] || { echo "usage: bash scripts/device/$script.sh OUT" >&2; exit 2; }
out=${PERF_WORK:-/tmp/${script//_/-}}
rm -rf "$out"; mkdir -p "$out/logs" "$dest"
pack() {
    cp "$out/status.tsv" "$dest/" 2>/dev/null; cp "$out/summary.txt" "$dest/" 2>/dev/null
    # runs/ holds a quality run cut off by its time limit: its weights and checkpoints are not needed back.
    tar czf "$dest/$script.tgz" -C "$out" --exclude=./runs .
}
trap pack EXIT
budget=${PERF_BUDGET_S:-$default_budget}
device=${PERF_DEVICE:-gpu}
read -r -a bench_extra <<< "${PERF_BENCH_EXTRA:-}"
started=$(date +%s)
status="$out/status.tsv"
printf 'name\tstatus\tseconds\tstarted_at\n' > "$status"
export TF_CPP_MIN_LOG_LEVEL=2 PYTHONUNBUFFERED=1
# What every figure depends on: the card and driver, the libraries (torch listed where installed).
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv > "$out/logs/nvidia-smi.csv" 2>&1
python3 -c "from importlib.metadata import version as v, PackageNotFoundError
def installed(n):
    try: return f'{n} {v(n)}'
    except PackageNotFoundError: return f'{n} not installed'
print(*map(installed, ('jax', 'jaxlib', 'torch', 'keras')))" > "$out/logs/versions.txt" 2>&1

tree_of_working_copy() {
    local index
    index=$(mktemp) && rm -f "$index"
    GIT_INDEX_FILE=$index git add -A . && echo "working tree $(GIT_INDEX_FILE=$index git write-tree)"
    rm -f "$index"
}

wanted() { [ -z "${PERF_ONLY:-}" ] || [[ " $PERF_ONLY " == *" $1 "* ]]; }

run() {
    local name=$1 cap=$2 least=$3; shift 3
    wanted "$name" || return 0
    local left=$(( budget - ($(date +%s) - started) ))
    if (( left < least )); then
        printf '%s\tskipped: %ss of the %ss budget left\t0\t-\n' "$name" "$left" "$budget" >> "$status"
        echo "== $name: skipped (${left}s left)"
        return 0
    fi
    local limit=$(( left < cap ? left : cap )) t0=$(date +%s) code
    echo "== $name (limit ${limit}s)"
    timeout -k 10 "$limit" "$@" > "$out/logs/$name.log" 2>&1
    code=$?
    local took=$(( $(date +%s) - t0 )) what=ok
    if (( code == 124 || code == 137 )); then what="timed out after ${took}s"
    elif (( code != 0 )); then what="failed (exit $code): $(grep -v '^\s*$' "$out/logs/$name.log" | tail -1 | cut -c1-200)"
    fi
    printf '%s\t%s\t%s\t%s\n' "$name" "$what" "$took" "$(( t0 - started ))" >> "$status"
    echo "== $name: $what (${took}s)"
}

bench() {
    local name=$1 cap=$2 least=$3; shift 3
    run "$name" "$cap" "$least" python3 -m prednet_keras.cli.bench --device "$device" --mode train --steps 20 --warmup 3 \
        --quiet --overwrite --json "$out/$name.json" "$@" "${bench_extra[@]}"
}

# Quality: both precisions at once (a comparison of losses, not of speed), from the same seed and batches.
# prednet-train's JAX child does not preallocate GPU memory, so the two share the GPU.
quality() {
    local pids=() p train_extra code=0
    read -r -a train_extra <<< "${PERF_TRAIN_EXTRA:-}"
    for p in float32 mixed_bfloat16; do
        rm -rf "$out/runs/$p"
        python3 -m prednet_keras.cli.train --backend jax --device "$device" --precision "$p" --epochs 3 --seed 0 \
            --quiet -o "$out/runs/$p" "${train_extra[@]}" > "$out/logs/quality-$p.log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || code=$?; done
    for p in float32 mixed_bfloat16; do
        mkdir -p "$out/quality-$p"
        cp "$out/runs/$p/manifest.json" "$out/runs/$p/history.csv" "$out/quality-$p/" 2>/dev/null
    done
    rm -rf "$out/runs"  # checkpoints and weights: not needed back
    return $code
}
export -f quality; export out device PERF_TRAIN_EXTRA
