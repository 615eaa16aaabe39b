"""Probes: measurements below the package's public faces, each a module users run with `python -m
prednet_keras.bench.probes.<probe>` (docs/benchmarks.md has each one's rounds and records).

- seed_batching: can several seeds of the study's window train in one JAX program and keep each seed's numbers?
- chainer_unroll: the study's window update (ChainerPredNetTrainer) with its time loop rolled or unrolled, timed,
  with every loss.
- torch_constants_ab: whole training steps on eager torch with layers/device_constants' tensors made once
  against the numbers made at every call, alternating in one process.
- torch_ops_per_step: the operations one eager torch training step of Lotter's PredNet, or one update of the
  study's Chainer window, dispatches, counted by name.
- torch_scalar_operands: the host cost per call of each Python number device_constants makes once, the old form
  against the new, alternating in one process.

Each parses its options (argparse) before it imports a framework, so `--help` imports none; none is imported
by the bench package's face.
"""
