"""Wall seconds of a tiny prednet-train on torch and JAX, code before and after keep_tensorflow_out_of_keras,
alternating, and whether the training process imported TensorFlow (PYTHONPROFILEIMPORTTIME's report).

Usage: python measure.py BEFORE_CHECKOUT AFTER_CHECKOUT ROUNDS OUT.json   (run from an empty folder)
"""
import json
import os
import shutil
import subprocess
import sys
import time

before, after, rounds, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
command = ["-m", "prednet_keras.cli.train", "--model", "prednet-chainer", "--protocol", "quick", "--size", "16x16",
           "--stack-sizes", "3,4", "--bprop", "4", "--period", "10", "--device", "cpu", "-q", "-o", "run"]
results = []
for round_ in range(rounds):
    for backend in ("torch", "jax"):
        for code, checkout in (("before", before), ("after", after)):
            shutil.rmtree("run", ignore_errors=True)
            env = dict(os.environ, PYTHONPATH=checkout, PYTHONPROFILEIMPORTTIME="1")
            env.pop("KERAS_BACKEND", None)
            start = time.perf_counter()
            done = subprocess.run([sys.executable, *command, "--backend", backend], env=env,
                                  capture_output=True, text=True)
            seconds = time.perf_counter() - start
            assert done.returncode == 0, done.stderr[-2000:]
            imported = [line for line in done.stderr.splitlines() if line.rstrip().endswith("| tensorflow.python")]
            results.append({"round": round_, "backend": backend, "code": code, "wall_seconds": round(seconds, 2),
                            "tensorflow_imported": bool(imported)})
            print(results[-1], flush=True)
json.dump({"command": " ".join(["python", *command, "--backend", "BACKEND"]), "results": results},
          open(out, "w"), indent=1)
