"""Lotter's training model as prednet-train and prednet-bench build it, for the scripts that time or count its
eager torch step (torch_step_by_shape.py, torch_step_overhead.py, torch_host_split.py; each imports this file from
beside it): `build_training_model` with 3x3 filters everywhere, the time loop unrolled and the loss on layer 0,
compiled with Adam at 1e-3 and the mean absolute error of the weighted error."""


def compiled_training_model(stack_sizes, nt, height, width, metrics=None):
    """The compiled model for frames of `height` x `width` with `stack_sizes[0]` channels; `metrics` as Keras'
    compile takes them (torch_step_overhead.py adds prednet-train's last-batch metric)."""
    import keras

    import prednet_keras

    stack = tuple(stack_sizes)
    layers = len(stack)
    model = prednet_keras.build_training_model(
        nt=nt, frame_shape=(height, width, stack[0]), layer_loss_weights="L_0", stack_sizes=stack, R_stack_sizes=stack,
        A_filt_sizes=(3,) * (layers - 1), Ahat_filt_sizes=(3,) * layers, R_filt_sizes=(3,) * layers, unroll=True)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3), loss="mean_absolute_error", metrics=metrics)
    return model
