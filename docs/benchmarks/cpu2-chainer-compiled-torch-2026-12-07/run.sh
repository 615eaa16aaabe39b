set -x
cd RECORD
for name in eager compiled; do
  x=""; [ $name = compiled ] && x="--xla"
  PYTHONPATH=CHECKOUT CHECKOUT/.venv/bin/python -m prednet_keras.cli.train --model prednet-chainer --protocol quick \
    --size 64x80 --period 120 --backend torch $x --device cpu --threads 2 -o $name > $name.log 2>&1
done
PYTHONPATH=CHECKOUT CHECKOUT/.venv/bin/python -m prednet_keras.cli.train --model autoencoder --autoencoder dense \
  --protocol quick --backend torch --xla --device cpu --threads 2 -o ae > ae.log 2>&1
echo done
