#!/bin/bash
# Bit identity of two versions of the code: prednet-train's short training on this CPU with each, compared.
#
#   bash scripts/train_identity.sh BEFORE_CHECKOUT AFTER_CHECKOUT OUT_DIR "BACKEND PRECISION [--no-unroll]" ...
#
# Each configuration trains once per checkout (PYTHONPATH=CHECKOUT, KERAS_BACKEND unset, run from /tmp so that the
# working directory shadows neither): 3 layers (3,4,8) at 16x16, nt 4, batch 2, 2 epochs of 5 steps, seed 0, one
# thread. Prints, per configuration, whether the two histories (every column but the seconds), the final weights'
# checksums and model.keras' weights are identical. PYTHON (default python) runs prednet-train.
set -u
before=${1:?usage: train_identity.sh BEFORE AFTER OUT_DIR CONFIG...}
after=${2:?usage: train_identity.sh BEFORE AFTER OUT_DIR CONFIG...}
out=${3:?usage: train_identity.sh BEFORE AFTER OUT_DIR CONFIG...}
shift 3
python=${PYTHON:-python}
configs=("$@")
rm -rf "$out"; mkdir -p "$out"
common="--device cpu --threads 1 --size 16x16 --stack-sizes 3,4,8 --nt 4 --batch-size 2 --steps-per-epoch 5 --epochs 2 --val-sequences 2 --seed 0 --quiet"
for tree in before after; do
  src=$before; [ $tree = after ] && src=$after
  src=$(cd "$src" && pwd)
  for cfg in "${configs[@]}"; do
    set -- $cfg; name="$1-$2${3:-}"
    (cd /tmp && PYTHONPATH=$src KERAS_BACKEND= "$python" -m prednet_keras.cli.train --backend "$1" --precision "$2" ${3:-} \
        $common -o "$out/$tree/$name" > "$out/$tree-$name.log" 2>&1)
  done
done
"$python" - "$out" "$before" "$after" "${configs[@]}" <<'PY'
import csv, json, sys

out, before, after, configs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
print("prednet-train --backend B --precision P [--no-unroll] --device cpu --threads 1 --size 16x16 --stack-sizes 3,4,8 "
      f"--nt 4 --batch-size 2 --steps-per-epoch 5 --epochs 2 --val-sequences 2 --seed 0; before = {before}, after = {after}")
for cfg in configs:
    parts = cfg.split()
    name = f"{parts[0]}-{parts[1]}{parts[2] if len(parts) > 2 else ''}"
    found = {}
    for tree in ("before", "after"):
        folder = f"{out}/{tree}/{name}"
        result = json.load(open(folder + "/manifest.json"))["result"]
        history = [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(open(folder + "/history.csv"))]
        found[tree] = (result["weights_checksum"], result["model_weights_checksum"], history)
    same = [found["before"][i] == found["after"][i] for i in range(3)]
    print(f"{cfg}: history {'identical' if same[2] else 'DIFFERS'}, weights {'identical' if same[0] else 'DIFFER'} "
          f"({found['after'][0][:16]}), model.keras weights {'identical' if same[1] else 'DIFFER'}")
PY
