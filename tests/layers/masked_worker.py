"""Run with KERAS_BACKEND set (or imported): PredNet and the Chainer PredNet given a mask, as Keras 2's masked RNN
runs them: a masked step keeps the output before it and the states. Writes, per output mode and rolled or unrolled
loop, the largest differences from what the mask means, as JSON."""

import json
import sys

import numpy as np

MODES = ("prediction", "error", "R1", "chainer")  # Lotter's output modes; the Chainer PredNet


def numpy(tensors):
    import keras

    return [keras.ops.convert_to_numpy(tensor) for tensor in tensors]


def masked_differences():
    from prednet_keras.layers.chainer import ChainerPredNet
    from prednet_keras.layers.lotter import PredNet

    frames = np.random.default_rng(0).random((2, 3, 8, 8, 3)).astype("float32")
    keep = np.array([[True, False, True], [True, True, True]])
    found = {}
    for mode in MODES:
        for unroll in (False, True):
            if mode == "chainer":
                layer = ChainerPredNet(stack_sizes=(3, 4), R_stack_sizes=(5, 6), frame_size=(8, 8),
                                       return_sequences=True, return_state=True, unroll=unroll)
            else:
                layer = PredNet(stack_sizes=(3, 4), R_stack_sizes=(5, 6), A_filt_sizes=(3,), Ahat_filt_sizes=(3, 3),
                                R_filt_sizes=(3, 3), output_mode=mode, return_sequences=True, return_state=True,
                                unroll=unroll)
            masked, *masked_states = numpy(layer(frames, mask=keep))
            # Sequence 0 without its masked step: its outputs are those of frames 0 and 2 alone.
            skipped, *skipped_states = numpy(layer(frames[:1, ::2]))
            unmasked = numpy(layer(frames[1:]))[0]
            found[f"{mode}-{'unrolled' if unroll else 'rolled'}"] = {
                "held_output": float(np.abs(masked[0, 1] - masked[0, 0]).max()),
                "after_held": float(np.abs(masked[0, 2] - skipped[0, 1]).max()),
                "states": max(float(np.abs(m[0] - s[0]).max()) for m, s in zip(masked_states, skipped_states)),
                "unmasked_sequence": float(np.abs(masked[1] - unmasked[0]).max()),
                "first_output": float(np.abs(masked[0, 0]).max()),
            }
    return found


if __name__ == "__main__":
    with open(sys.argv[1], "w") as out:
        json.dump(masked_differences(), out)
