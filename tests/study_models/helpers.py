"""Test helpers shared by the study-model tests."""

import numpy as np

import keras


class GradientRecorder(keras.optimizers.Optimizer):
    """An optimizer that stores each gradient it is given and leaves the weights unchanged,
    so that the training step's gradients can be read back on any backend."""

    def __init__(self, **kwargs):
        super().__init__(learning_rate=0.0, name="gradient_recorder", **kwargs)

    def build(self, variables):
        if self.built:
            return
        super().build(variables)
        self.recorded = [self.add_variable_from_reference(v, name="gradient") for v in variables]
        self.paths = [v.path for v in variables]

    def update_step(self, gradient, variable, learning_rate):
        self.assign(self.recorded[self._get_variable_index(variable)], gradient)

    def gradients(self):
        """{variable path: last gradient as numpy}."""
        return {p: np.asarray(keras.ops.convert_to_numpy(g)) for p, g in zip(self.paths, self.recorded)}


def chainer_layout_gradients(layer, gradients):
    """Keras gradients of a ChainerPredNet's weights, as Chainer-layout arrays keyed like the npz files."""
    out = {}
    for sub in layer.cell.weight_layers:
        link = sub.name.replace("_", "/", 1) if sub.name.startswith("ConvLSTM") else sub.name
        kernel = gradients[sub.kernel.path]
        if not hasattr(sub, "filters"):
            out[f"{link}/W"] = np.transpose(kernel, (2, 0, 1))[np.newaxis]
            continue
        out[f"{link}/W"] = np.transpose(kernel, (3, 2, 0, 1))
        if sub.use_bias:
            out[f"{link}/b"] = gradients[sub.bias.path]
    return out
