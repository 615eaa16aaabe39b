#!/bin/bash
# Bit identity, code before (8338451) and after: prednet-train's short training on this CPU; history (all but
# seconds), final weights and model.keras weights checksums compared.
set -u
out=/tmp/ident3; rm -rf $out; mkdir -p $out
common="--device cpu --threads 1 --size 16x16 --stack-sizes 3,4,8 --nt 4 --batch-size 2 --steps-per-epoch 5 --epochs 2 --val-sequences 2 --seed 0 --quiet"
configs=("torch float32" "torch mixed_bfloat16" "torch float32 --no-unroll")
for tree in before after; do
  src=/tmp/before; [ $tree = after ] && src=/work/main
  for cfg in "${configs[@]}"; do
    set -- $cfg; name="$1-$2${3:-}"
    (cd /tmp && PYTHONPATH=$src KERAS_BACKEND= /work/main/.venv/bin/python -m prednet_keras.cli.train --backend $1 --precision $2 ${3:-} $common -o $out/$tree/$name > $out/$tree-$name.log 2>&1)
  done
done
/work/main/.venv/bin/python - "${configs[@]}" <<'PY'
import csv, json, sys
print("prednet-train --backend B --precision P [--no-unroll] --device cpu --threads 1 --size 16x16 --stack-sizes 3,4,8 --nt 4 --batch-size 2 --steps-per-epoch 5 --epochs 2 --val-sequences 2 --seed 0; before = 8338451, after = this change")
for cfg in sys.argv[1:]:
    parts = cfg.split(); name = f"{parts[0]}-{parts[1]}{parts[2] if len(parts) > 2 else ''}"
    r = {}
    for t in ("before", "after"):
        d = f"/tmp/ident3/{t}/{name}"
        m = json.load(open(d + "/manifest.json"))["result"]
        h = [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(open(d + "/history.csv"))]
        r[t] = (m["weights_checksum"], m["model_weights_checksum"], h)
    same = [r["before"][i] == r["after"][i] for i in range(3)]
    print(f"{cfg}: history {'identical' if same[2] else 'DIFFERS'}, weights {'identical' if same[0] else 'DIFFER'} "
          f"({r['after'][0][:16]}), model.keras weights {'identical' if same[1] else 'DIFFER'}")
PY
