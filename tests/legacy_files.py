"""Writers for small files in the layout of the authors' Keras 2 release, for tests."""

import json

import h5py
import numpy as np


def prednet_layer_config(stack, R_stack, filt, name="pred_net_1", legacy_ordering=False, **extra):
    L = len(stack)
    config = {
        "name": name,
        "trainable": True,
        "return_sequences": True,
        "go_backwards": False,
        "stateful": False,
        "unroll": False,
        "implementation": 0,
        "stack_sizes": list(stack),
        "R_stack_sizes": list(R_stack),
        "A_filt_sizes": [filt] * (L - 1),
        "Ahat_filt_sizes": [filt] * L,
        "R_filt_sizes": [filt] * L,
        "pixel_max": 1.0,
        "error_activation": "relu",
        "A_activation": "relu",
        "LSTM_activation": "tanh",
        "LSTM_inner_activation": "hard_sigmoid",
        "extrap_start_time": None,
        "output_mode": "error",
    }
    if legacy_ordering:
        config["dim_ordering"] = "tf"  # Keras 1 spelling
    else:
        config["data_format"] = "channels_last"
    config.update(extra)
    return config


def write_model_json(path, stack, R_stack, filt, nt, frame_hw, **kwargs):
    """A Keras 2 `model.to_json()` of kitti_train.py's training model."""
    L = len(stack)
    layers = [
        {
            "name": "input_1",
            "class_name": "InputLayer",
            "config": {
                "batch_input_shape": [None, nt, frame_hw[0], frame_hw[1], stack[0]],
                "dtype": "float32",
                "sparse": False,
                "name": "input_1",
            },
            "inbound_nodes": [],
        },
        {
            "name": "pred_net_1",
            "class_name": "PredNet",
            "config": prednet_layer_config(stack, R_stack, filt, **kwargs),
            "inbound_nodes": [[["input_1", 0, 0, {}]]],
        },
        {
            "name": "time_distributed_1",
            "class_name": "TimeDistributed",
            "config": {"name": "time_distributed_1", "trainable": False,
                       "layer": {"class_name": "Dense", "config": {"units": 1, "use_bias": False}}},
            "inbound_nodes": [[["pred_net_1", 0, 0, {}]]],
        },
        {"name": "flatten_1", "class_name": "Flatten", "config": {"name": "flatten_1"},
         "inbound_nodes": [[["time_distributed_1", 0, 0, {}]]]},
        {"name": "dense_2", "class_name": "Dense", "config": {"name": "dense_2", "units": 1, "use_bias": False},
         "inbound_nodes": [[["flatten_1", 0, 0, {}]]]},
    ]
    document = {
        "class_name": "Model",
        "config": {"name": "model_1", "layers": layers, "input_layers": [["input_1", 0, 0]],
                   "output_layers": [["dense_2", 0, 0]]},
        "keras_version": "2.0.6",
        "backend": "tensorflow",
    }
    assert L >= 1
    with open(path, "w") as handle:
        json.dump(document, handle)


def write_weights_h5(path, weights, full_model=True, backend="tensorflow", nt=10, nb_layers=None):
    """Writes `weights` ({"layer_{type}_{l}": (kernel, bias)}) like Keras 2's save:
    a full-model file (`model_weights/...`) or a weights-only file (groups at the root).
    Adds the training model's frozen Dense layers so the loader must skip them."""
    nb_layers = nb_layers or max(int(name.rsplit("_", 1)[1]) for name in weights) + 1
    extra = {
        "time_distributed_1": {"time_distributed_1/kernel:0": np.ones((nb_layers, 1), "float32")},
        "dense_2": {"dense_2/kernel:0": np.ones((nt, 1), "float32")},
    }
    with h5py.File(path, "w") as handle:
        handle.attrs["keras_version"] = b"2.0.6"
        handle.attrs["backend"] = backend.encode()
        root = handle.create_group("model_weights") if full_model else handle
        layer_names = [b"input_1", b"pred_net_1", b"time_distributed_1", b"flatten_1", b"dense_2"]
        root.attrs["layer_names"] = layer_names
        root.create_group("input_1").attrs["weight_names"] = np.array([], dtype="S1")
        group = root.create_group("pred_net_1")
        names = []
        for layer_name in sorted(weights):  # Keras 2 sorted its weights by name
            kernel, bias = weights[layer_name]
            for part, array in (("kernel:0", kernel), ("bias:0", bias)):
                name = f"pred_net_1/{layer_name}/{part}"
                group.create_dataset(name, data=array)
                names.append(name.encode())
        group.attrs["weight_names"] = names
        for layer_name, arrays in extra.items():
            g = root.create_group(layer_name)
            for name, array in arrays.items():
                g.create_dataset(name, data=array)
            g.attrs["weight_names"] = [n.encode() for n in arrays]
        root.create_group("flatten_1").attrs["weight_names"] = np.array([], dtype="S1")
