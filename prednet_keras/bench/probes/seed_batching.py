"""Can several seeds of the paper's protocol train in one JAX program and keep each seed's numbers?

Trains a tiny Chainer-lineage PredNet by the paper's protocol (batch 1, truncated BPTT windows) from
seeds 0..N-1 three ways on JAX and compares every logged loss and the final weights with the single run
(`ChainerPredNetTrainer.update`, Keras' own training step, one seed per model):
- "stateless": Keras' stateless_call and the optimizer's stateless_apply, jitted, one seed (the step the
  other two are made of; it should equal Keras' own step bit for bit);
- "vmap": that step batched over the seeds with jax.vmap (each convolution then carries a seed axis);
- "one program": the N steps side by side in one jitted function (no batching).
Prints one JSON object: for each way, whether every loss and weight is identical, the largest differences,
and the median seconds per update (all seeds together) after the first (compilation); "keras_step": the single
runs' own median seconds per update and first update, the protocol's step beside the stateless one. The single
runs are made for the first --compare seeds only (each compiles its own model).

    python -m prednet_keras.bench.probes.seed_batching [--seeds 3] [--size 16x16] [--device cpu]
    # the paper's model and window on a GPU, 30 seeds, 2 of them compared
    python -m prednet_keras.bench.probes.seed_batching --device gpu --seeds 30 --compare 2 --size 120x160 \
        --stack-sizes 3,48,96,192 --bprop 20 --updates 12 --program-seeds 4

A probe of the study's window model (docs/benchmarks.md, "Seeds in one program instead of one process
each?"; it was scripts/seed_batching_probe.py, last changed in a3da048, then prednet_keras.bench.seed_batching);
JAX only, whatever KERAS_BACKEND says.
"""

import argparse
import json
import os


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m prednet_keras.bench.probes.seed_batching",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--compare", type=int, help="seeds trained alone to compare with [default: all]")
    parser.add_argument("--size", default="16x16", help="frames HxW")
    parser.add_argument("--stack-sizes", default="3,8,16")
    parser.add_argument("--bprop", type=int, default=5)
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument("--program-seeds", type=int, help="seeds in the 'one program' way [default: all]; "
                        "its compilation grows with them")
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    args = parser.parse_args(argv)
    os.environ["KERAS_BACKEND"] = "jax"
    if args.device == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"

    import jax
    import jax.numpy as jnp
    import keras
    import numpy as np

    from prednet_keras.models.chainer_protocol import ChainerPredNetTrainer, chainer_sequences, plan_windows
    from prednet_keras.models.protocols import load_initial_weights_into

    import time

    height, width = (int(n) for n in args.size.split("x"))
    bprop = args.bprop
    stack_sizes = [int(n) for n in args.stack_sizes.split(",")]
    model_config = {"stack_sizes": stack_sizes, "R_stack_sizes": stack_sizes}
    length = bprop * (args.updates + 1)
    frames = np.random.default_rng(0).random((length, height, width, 3), dtype=np.float32)
    sequence = chainer_sequences([frames])[0]
    windows, _ = plan_windows([len(frames)], length - 1, bprop)
    windows = windows[: args.updates]
    seeds = list(range(args.seeds))
    compared = seeds[: args.compare or len(seeds)]
    shape = (height, width, 3)

    def window_inputs(trainer, window):
        return trainer.window_inputs(sequence.read(window.frame_slice), window.starts_sequence)

    # The single runs: Keras' own training step (the protocol's `train_on_batch`), one model per seed, each
    # update timed as the stateless way's are (the loss read back included).
    single_losses, single_weights, single_times = [], [], []
    for seed in compared:
        trainer = ChainerPredNetTrainer(shape, model_config, bprop=bprop)
        load_initial_weights_into(trainer.layer, None, seed)
        run, times = [], []
        for w in windows:
            started = time.perf_counter()
            run.append(trainer.update(sequence.read(w.frame_slice), w.starts_sequence)[0])
            times.append(time.perf_counter() - started)
        single_losses.append(run)
        single_times.append(times)
        single_weights.append({v.path: np.array(v.value) for v in trainer.window_model.trainable_variables})

    trainer = ChainerPredNetTrainer(shape, model_config, bprop=bprop)
    model, optimizer = trainer.window_model, trainer.window_model.optimizer
    model(window_inputs(trainer, windows[0]))
    optimizer.build(model.trainable_variables)
    names = [v.path for v in model.trainable_variables]
    initial = []
    for seed in seeds:
        load_initial_weights_into(trainer.layer, None, seed)
        initial.append([jnp.asarray(np.array(v.value)) for v in model.trainable_variables])
    zero_state = [jnp.zeros_like(jnp.asarray(np.array(v.value))) for v in model.non_trainable_variables]
    optimizer_start = [jnp.asarray(np.array(v.value)) for v in optimizer.variables]

    def step(trainable, state, optimizer_state, inputs):
        def objective(trainable, state):
            outputs, state = model.stateless_call(trainable, state, inputs, training=True)
            return jnp.sum(outputs[:, 0]), (outputs, state)

        (_, (outputs, state)), grads = jax.value_and_grad(objective, has_aux=True)(trainable, state)
        trainable, optimizer_state = optimizer.stateless_apply(optimizer_state, grads, trainable)
        return trainable, state, optimizer_state, jnp.mean(outputs[:, 1, -1])

    def compare(losses, weights, times, trained=None):
        """Every loss and weight identical?, the largest differences, the median update time (the first left out)."""
        n = min(len(compared), trained or len(seeds))
        losses = np.asarray(losses, dtype=np.float64)[:n]
        reference = np.asarray(single_losses, dtype=np.float64)[:n]
        weight_gap = max(float(np.max(np.abs(weights[i][k] - single_weights[i][name])))
                         for i in range(n) for k, name in enumerate(names))
        return {"identical": bool(np.array_equal(losses, reference) and weight_gap == 0.0),
                "max_relative_loss_difference": float(np.max(np.abs(losses - reference) / np.abs(reference))),
                "max_weight_difference": weight_gap,
                "seeds": trained or len(seeds),
                "first_update_seconds": round(times[0], 3),
                "median_update_seconds_all_seeds": round(float(np.median(times[1:])), 5),
                "seconds_per_seed_update": round(float(np.median(times[1:])) / (trained or len(seeds)), 6)}

    results = {"seeds": len(seeds), "compared": len(compared), "frame_size": [height, width],
               "stack_sizes": stack_sizes, "bprop": bprop, "updates": len(windows), "device": args.device}
    # The versions, keyed by package name (as keyword arguments: no backend's name is compared here).
    results.update(jax=jax.__version__, keras=keras.__version__, devices=[str(d) for d in jax.devices()])
    # What the protocol's step costs beside the stateless one (issue 40's lead): the same updates, one seed at a time.
    results["keras_step"] = {"seeds": len(compared),
                             "first_update_seconds": round(float(np.median([t[0] for t in single_times])), 3),
                             "seconds_per_seed_update": round(float(np.median([t[1:] for t in single_times])), 6)}

    one_step = jax.jit(step)
    losses, weights, times = [], [], []
    for i in range(len(seeds)):
        state = (initial[i], zero_state, optimizer_start)
        run = []
        for u, window in enumerate(windows):
            started = time.perf_counter()
            *state, loss = one_step(*state, window_inputs(trainer, window))
            run.append(float(loss))
            if i == 0:
                times.append(time.perf_counter() - started)
            else:
                times[u] += time.perf_counter() - started
        losses.append(run)
        weights.append([np.array(w) for w in state[0]])
    results["stateless"] = compare(losses, weights, times)

    batched_step = jax.jit(jax.vmap(step, in_axes=(0, 0, 0, None)))
    stack = lambda arrays: [jnp.stack([a[k] for a in arrays]) for k in range(len(arrays[0]))]  # noqa: E731
    state = (stack(initial), stack([zero_state] * len(seeds)), stack([optimizer_start] * len(seeds)))
    batched, times = [], []
    for window in windows:
        started = time.perf_counter()
        *state, loss = batched_step(*state, window_inputs(trainer, window))
        batched.append(np.asarray(loss))
        times.append(time.perf_counter() - started)
    results["vmap"] = compare(np.asarray(batched).T, [[np.array(w[i]) for w in state[0]] for i in range(len(seeds))],
                              times)

    side_by_side = jax.jit(lambda states, inputs: [step(*s, inputs) for s in states])
    in_program = min(args.program_seeds or len(seeds), len(seeds))
    states = [(initial[i], zero_state, optimizer_start) for i in range(in_program)]
    program, times = [], []
    for window in windows:
        started = time.perf_counter()
        out = side_by_side(states, window_inputs(trainer, window))
        states = [o[:3] for o in out]
        program.append([float(o[3]) for o in out])
        times.append(time.perf_counter() - started)
    results["one program"] = compare(np.asarray(program).T, [[np.array(w) for w in s[0]] for s in states], times,
                                     in_program)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
