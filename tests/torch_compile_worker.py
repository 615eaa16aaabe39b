"""Run with KERAS_BACKEND=torch: a tiny PredNet trained eagerly and with jit_compile=True, as
prednet-train builds it (recipe_training.build_model) and runs it (model.fit).

Usage: python -m tests.torch_compile_worker RESULT_JSON [STEPS]

torch.compile gets the "aot_eager" backend here: TorchDynamo traces, guards and recompiles
exactly as with Inductor, and AOT autograd builds the backward graph, but no C++ code is
generated (Inductor's compilation takes minutes on a 2-core CPU). Writes the losses of the eager
model, of the compiled one (models.torch_training_step.compile_training_step's two graphs) and of the same model
with Keras' own compiled step, the number of graphs TorchDynamo compiled after each step of the
compiled one, and the graph breaks and restarted analyses of each compiled step; then the same counts for
the study's dense MNIST autoencoder as its protocol compiles it (models.torch_training_step).
"""

import json
import sys


def main(result_path, steps=4):
    import torch

    compile_ = torch.compile
    torch.compile = lambda fn=None, **kwargs: compile_(fn, backend="aot_eager", **kwargs)

    import keras
    import numpy as np

    from prednet_keras.options.recipe import TrainConfig
    from prednet_keras.models import torch_training_step
    from prednet_keras.session import recipe_training, torch_compile

    config = TrainConfig(stack_sizes=(3, 4), nt=3, batch_size=2, val_sequences=0, unroll=True).resolved()
    frames = np.random.default_rng(0).random((2, 3, 8, 8, 3), dtype=np.float32)
    targets = np.zeros((2, 1), np.float32)
    keras.utils.set_random_seed(0)
    eager, _ = recipe_training.build_model(config, (8, 8, 3), False)
    compiled, _ = recipe_training.build_model(config, (8, 8, 3), True)
    compiled.set_weights(eager.get_weights())
    keras_step, _ = recipe_training.build_model(config, (8, 8, 3), True)
    keras_step.set_weights(eager.get_weights())
    keras_step.make_train_function(force=True)  # Keras' one compiled step instead of the two graphs
    torch_training_step.settle_gradients(keras_step)  # as build_model does where Keras' step stays

    result = {"eager": [], "compiled": [], "keras_step": [], "graphs": []}

    class Graphs(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            result["graphs"].append(torch_compile.compiled_graphs())

    for _ in range(steps):
        result["eager"].append(eager.fit(frames, targets, batch_size=2, verbose=0).history["loss"][0])
        result["compiled"].append(
            compiled.fit(frames, targets, batch_size=2, verbose=0, callbacks=[Graphs()]).history["loss"][0]
        )
    # train_on_batch hands the step NumPy arrays: converted before the compiled graphs, nothing compiles again.
    compiled.train_on_batch(frames, targets)
    result["graphs"].append(torch_compile.compiled_graphs())
    from torch._dynamo.utils import compilation_time_metrics, counters

    result["graph_breaks"] = sum(counters["graph_break"].values())
    result["restarted_analyses"] = len(compilation_time_metrics.get("compile_attempt_1", []))
    for _ in range(steps):
        result["keras_step"].append(keras_step.fit(frames, targets, batch_size=2, verbose=0).history["loss"][0])
    result["keras_step_graph_breaks"] = sum(counters["graph_break"].values()) - result["graph_breaks"]
    result["keras_step_restarted_analyses"] = (
        len(compilation_time_metrics.get("compile_attempt_1", [])) - result["restarted_analyses"])
    result.update(autoencoder_counts(steps))
    result.update(assigned_in_the_forward_pass(steps))
    with open(result_path, "w") as handle:
        json.dump(result, handle)


def autoencoder_counts(steps):
    """The dense autoencoder compiled as autoencoder_protocol compiles it: graphs after each step, graph breaks."""
    import numpy as np
    from torch._dynamo.utils import counters

    from prednet_keras.models import autoencoder, torch_training_step
    from prednet_keras.models.protocols import chainer_adam
    from prednet_keras.session import torch_compile

    breaks_before, graphs = sum(counters["graph_break"].values()), []
    model = autoencoder.build_autoencoder("dense")
    torch_training_step.compile_for_training(model, optimizer=chainer_adam(), loss="mean_squared_error",
                                             jit_compile=True)
    images = np.random.default_rng(1).random((steps + 1, 28, 28, 1), dtype=np.float32)
    graphs.append(torch_compile.compiled_graphs())
    for step in range(steps):
        model.fit(images[step:step + 1], images[step:step + 1], batch_size=1, verbose=0)
        graphs.append(torch_compile.compiled_graphs())
    return {"autoencoder_graphs": [count - graphs[0] for count in graphs[1:]],
            "autoencoder_graph_breaks": sum(counters["graph_break"].values()) - breaks_before}


def assigned_in_the_forward_pass(steps):
    """A model whose forward pass assigns variables (a layer's seed generator, and the global one of an unseeded
    random op), trained from the same weights and seeds by the two parts, which assign them after the backward
    pass, and by Keras' own compiled step, which assigns them in place: the losses and the layer's seed state
    after each step."""
    import keras
    import numpy as np

    from prednet_keras.models import torch_training_step

    class Noisy(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.seed_generator = keras.random.SeedGenerator(3)

        def call(self, x, training=False):
            if not training:
                return x
            own = keras.random.normal(keras.ops.shape(x), seed=self.seed_generator)
            return x + 0.1 * own + 0.1 * keras.random.normal(keras.ops.shape(x))

    x = np.random.default_rng(2).random((8, 4), dtype=np.float32)
    y = np.random.default_rng(3).random((8, 1), dtype=np.float32)
    result = {}
    for name in ("two_parts", "keras_step"):
        keras.utils.set_random_seed(5)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), Noisy(), keras.layers.Dense(1)])
        torch_training_step.compile_for_training(model, optimizer="adam", loss="mse", jit_compile=True)
        if name == "keras_step":
            model.make_train_function(force=True)
        noisy = model.layers[1]
        losses, seeds = [], []
        for _ in range(steps):
            losses.append(float(model.train_on_batch(x, y)))
            seeds.append(noisy.seed_generator.state.numpy().tolist())
        result[f"assigned_{name}_losses"], result[f"assigned_{name}_seeds"] = losses, seeds
    return result


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
