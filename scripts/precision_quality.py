"""bfloat16 against float32 training on the CPU: the same initial weights and batches, one precision per process.

    python scripts/precision_quality.py float32 f32.json
    python scripts/precision_quality.py mixed_bfloat16 bf16.json [--steps 400] [--seed 0]

Trains a small PredNet (channels 3,16,32,64; 64x80 frames of the embedded video; nt 10; batch 4; Adam 1e-3)
and writes every step's loss and the validation loss (20 sequences) every 100 steps. The initial weights come
from starting_point with the seed, so every precision starts alike. Run it with PYTHONPATH pointing at another
checkout to compare code versions (docs/runtime.md compares Keras' plain mixed policy, the code before PredNet
kept its state in float32, this way).
"""

import argparse
import json
import os
import tempfile
import time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("precision", choices=("float32", "mixed_bfloat16"))
    parser.add_argument("output")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import keras
    import numpy as np

    keras.config.set_dtype_policy(args.precision)
    import prednet_keras
    from prednet_keras import SequenceGenerator, datasets
    from prednet_keras.models import LastBatchLoss, data_order, load_initial_weights, save_initial_weights

    size, nt, batch_size, stack_sizes = (64, 80), 10, 4, (3, 16, 32, 64)
    frames = prednet_keras.load_frames(datasets.embedded_video_path("train"), size=size)
    val_frames = prednet_keras.load_frames(datasets.embedded_video_path("val"), size=size)
    sequences = SequenceGenerator(frames, nt, batch_size=1, sequence_start_mode="all", shuffle=False)
    validation = SequenceGenerator(val_frames, nt, batch_size=4, sequence_start_mode="all", N_seq=20,
                                   shuffle=False, output_mode="error")
    keras.utils.set_random_seed(args.seed)
    # The model prednet-train builds for these options: Lotter's recipe (loss on layer 0, mean absolute error,
    # Adam 1e-3), 3x3 filters, the time loop rolled.
    model = prednet_keras.build_training_model(
        nt=nt, frame_shape=frames.frame_shape, layer_loss_weights="L_0",
        **prednet_keras.kitti_prednet_kwargs(stack_sizes=stack_sizes, R_stack_sizes=stack_sizes, unroll=False))
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3), loss="mean_absolute_error",
                  metrics=[LastBatchLoss()], jit_compile=False)
    with tempfile.TemporaryDirectory() as scratch:
        # Drawn with NumPy from the seed: the same weights under every precision and code version.
        path = os.path.join(scratch, "initial.h5")
        save_initial_weights(model, path, args.seed)
        load_initial_weights(model, path)

    def batch(index):
        """prednet-train's batch `index`: an unbroken stream of passes over the sequences, pass k in the
        seed's order for epoch k (data_order, as prednet-train's batches)."""
        count = len(sequences)
        positions = range(index * batch_size, (index + 1) * batch_size)
        chosen = [data_order(count, args.seed, epoch=p // count or None)[p % count] for p in positions]
        return np.concatenate([sequences[int(j)][0] for j in chosen]), np.zeros((batch_size, 1), np.float32)

    val_x = np.concatenate([validation[i][0] for i in range(len(validation))])
    val_y = np.zeros((len(val_x), 1), "float32")
    losses, val_losses = [], []
    started = time.time()
    for step in range(args.steps):
        x, y = batch(step)
        losses.append(float(model.train_on_batch(x, y)[0]))
        if (step + 1) % 100 == 0:
            val_losses.append([step + 1, float(model.evaluate(val_x, val_y, batch_size=4, verbose=0)[0])])
            print(f"{args.precision} step {step + 1}: mean loss of the last 50 {np.mean(losses[-50:]):.6f}, "
                  f"validation {val_losses[-1][1]:.6f}", flush=True)
    with open(args.output, "w") as handle:
        json.dump({"precision": args.precision, "backend": keras.backend.backend(), "seed": args.seed,
                   "steps": args.steps, "losses": losses, "val_losses": val_losses,
                   "seconds": round(time.time() - started, 1)}, handle)


if __name__ == "__main__":
    main()
