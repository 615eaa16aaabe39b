"""Keras' JAX train_step of the study's Chainer window compiled with and without buffer donation: the median
time of an update (the loss read back) and XLA's cost analysis (FLOPs) of each program, from the same state and
windows. Run from the repository root: KERAS_BACKEND=jax python docs/benchmarks/cpu2-chainer-undonated-2026-12-07/donation_check.py"""

import json
import time

import jax
import numpy as np

from prednet_keras.models.chainer_protocol import ChainerPredNetTrainer
from prednet_keras.models.protocols import load_initial_weights_into

SIZE, STACK, BPROP, UPDATES = (32, 40), (3, 8, 16, 32), 10, 40
frames = np.random.default_rng(0).random((BPROP * UPDATES + 1,) + SIZE + (3,), dtype=np.float32)
trainer = ChainerPredNetTrainer(SIZE + (3,), {"stack_sizes": STACK, "R_stack_sizes": STACK}, bprop=BPROP)
load_initial_weights_into(trainer.layer, None, 0)
model = trainer.window_model
trainer.update(frames[:BPROP + 1], True)  # builds the optimizer's and the metrics' variables
result = {"frame_size": SIZE, "stack_sizes": STACK, "bprop": BPROP, "updates": UPDATES, "jax": jax.__version__}
for name, donate in (("donated", (0,)), ("not_donated", ())):
    state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True, optimizer_variables=True,
                                 metrics_variables=True, purge_model_variables=False)
    state = jax.tree_util.tree_map(lambda value: jax.numpy.array(value, copy=True), state)
    step = jax.jit(model.train_step, donate_argnums=donate)
    data = lambda u: (trainer.window_inputs(frames[u * BPROP:(u + 1) * BPROP + 1], u == 0), trainer._placeholder, None)  # noqa: E731
    flops = step.lower(state, data(0)).compile().cost_analysis()
    flops = (flops[0] if isinstance(flops, list) else flops)["flops"]
    times = []
    for u in range(UPDATES):
        started = time.perf_counter()
        logs, state = step(state, data(u))
        float(logs["loss"])
        times.append(time.perf_counter() - started)
    result[name] = {"median_update_ms": round(1000 * float(np.median(times[3:])), 2), "flops": flops}
print(json.dumps(result, indent=1))
