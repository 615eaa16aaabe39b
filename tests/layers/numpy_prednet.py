"""An independent NumPy implementation of PredNet's equations, for testing the Keras layer.

Written from the published equations and the notes on the authors' code
(`shared/notes/lotter-prednet.md`), not from the layer: plain loops, float64,
no shared helpers with the package.
"""

import numpy as np


def hard_sigmoid(x):
    return np.clip(0.2 * x + 0.5, 0.0, 1.0)


def relu(x):
    return np.maximum(x, 0.0)


def conv2d_same(x, kernel, bias):
    """Cross-correlation with 'same' zero padding (extra row/column after, as in TF/Keras).

    x: (batch, H, W, Cin); kernel: (kh, kw, Cin, Cout); bias: (Cout,).
    """
    kh, kw = kernel.shape[:2]
    top, left = (kh - 1) // 2, (kw - 1) // 2
    padded = np.pad(x, ((0, 0), (top, kh - 1 - top), (left, kw - 1 - left), (0, 0)))
    height, width = x.shape[1:3]
    out = np.zeros(x.shape[:3] + (kernel.shape[3],))
    for dy in range(kh):
        for dx in range(kw):
            patch = padded[:, dy : dy + height, dx : dx + width, :]
            out += patch @ kernel[dy, dx]
    return out + bias


def maxpool2(x):
    b, h, w, c = x.shape
    return x.reshape(b, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def upsample2(x):
    return x.repeat(2, axis=1).repeat(2, axis=2)


def prednet_reference(frames, weights, stack_sizes, R_stack_sizes, output_mode="error",
                      extrap_start_time=None, pixel_max=1.0):
    """Runs PredNet over `frames` (batch, time, H, W, C) and returns the per-step outputs
    stacked on axis 1 (as return_sequences=True would).

    weights: {"layer_{type}_{l}": (kernel, bias)} for type in a, ahat, c, f, i, o.
    """
    frames = np.asarray(frames, dtype=np.float64)
    batch, steps, height, width, _ = frames.shape
    L = len(stack_sizes)
    W = {name: (np.asarray(k, np.float64), np.asarray(b, np.float64)) for name, (k, b) in weights.items()}

    def conv(kind, l, x):
        kernel, bias = W[f"layer_{kind}_{l}"]
        return conv2d_same(x, kernel, bias)

    def zeros(l, channels):
        return np.zeros((batch, height // 2**l, width // 2**l, channels))

    r = [zeros(l, R_stack_sizes[l]) for l in range(L)]
    c = [zeros(l, R_stack_sizes[l]) for l in range(L)]
    e = [zeros(l, 2 * stack_sizes[l]) for l in range(L)]
    previous_prediction = np.zeros((batch, height, width, stack_sizes[0]))
    outputs = []
    for t in range(steps):
        frame = frames[:, t]
        if extrap_start_time is not None and t >= extrap_start_time:
            frame = previous_prediction

        new_r, new_c = [None] * L, [None] * L
        for l in reversed(range(L)):
            parts = [r[l], e[l]]
            if l < L - 1:
                parts.append(upsample2(new_r[l + 1]))
            x = np.concatenate(parts, axis=-1)
            i = hard_sigmoid(conv("i", l, x))
            f = hard_sigmoid(conv("f", l, x))
            o = hard_sigmoid(conv("o", l, x))
            new_c[l] = f * c[l] + i * np.tanh(conv("c", l, x))
            new_r[l] = o * np.tanh(new_c[l])
        r, c = new_r, new_c

        layer_values = {}
        a = frame
        new_e = []
        for l in range(L):
            ahat = relu(conv("ahat", l, r[l]))
            if l == 0:
                ahat = np.minimum(ahat, pixel_max)
                prediction = ahat
            error = np.concatenate([relu(ahat - a), relu(a - ahat)], axis=-1)
            new_e.append(error)
            layer_values.update({f"A{l}": a, f"Ahat{l}": ahat, f"R{l}": r[l], f"E{l}": error})
            if l < L - 1:
                a = maxpool2(relu(conv("a", l, error)))
        e = new_e
        previous_prediction = prediction

        errors = np.stack([err.reshape(batch, -1).mean(axis=1) for err in e], axis=-1)
        if output_mode == "prediction":
            outputs.append(prediction)
        elif output_mode == "error":
            outputs.append(errors)
        elif output_mode == "all":
            outputs.append(np.concatenate([prediction.reshape(batch, -1), errors], axis=-1))
        else:
            outputs.append(layer_values[output_mode])
    return np.stack(outputs, axis=1)


def random_weights(stack_sizes, R_stack_sizes, filt, rng, scale=1.0):
    """Random kernels and biases for every conv of a PredNet, keyed like the released files."""
    L = len(stack_sizes)
    weights = {}

    def add(name, kh, cin, cout):
        weights[name] = (
            rng.normal(0.0, scale / np.sqrt(kh * kh * cin), (kh, kh, cin, cout)),
            rng.normal(0.0, 0.3, (cout,)),
        )

    for l in range(L):
        gate_in = R_stack_sizes[l] + 2 * stack_sizes[l] + (R_stack_sizes[l + 1] if l < L - 1 else 0)
        for kind in "cfio":
            add(f"layer_{kind}_{l}", filt, gate_in, R_stack_sizes[l])
        add(f"layer_ahat_{l}", filt, R_stack_sizes[l], stack_sizes[l])
        if l < L - 1:
            add(f"layer_a_{l}", filt, 2 * stack_sizes[l], stack_sizes[l + 1])
    return {k: (kern.astype(np.float32), b.astype(np.float32)) for k, (kern, b) in weights.items()}
