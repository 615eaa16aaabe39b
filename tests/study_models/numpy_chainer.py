"""An independent NumPy implementation of the Chainer-lineage PredNet, for testing the Keras layer.

Written from `shared/notes/study.md` in the original's own terms: one sample,
NCHW arrays (C, H, W), float64, weights in the Chainer file layout (conv W
(out, in, kh, kw), peepholes (1, C, H, W)) under the keys of
`serializers.save_npz` without the "predictor/" prefix. Separate convolutions
per input, summed, as Chainer's ConvLSTM does. Nothing is shared with the package.
"""

import numpy as np


def relu(x):
    return np.maximum(x, 0.0)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def conv(x, W, b=None):
    """Cross-correlation of x (Cin, H, W) with W (Cout, Cin, k, k), zero padding (k-1)/2."""
    k = W.shape[2]
    pad = (k - 1) // 2
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    height, width = x.shape[1:]
    out = np.zeros((W.shape[0], height, width))
    for dy in range(k):
        for dx in range(k):
            out += np.einsum("oc,chw->ohw", W[:, :, dy, dx], xp[:, dy : dy + height, dx : dx + width])
    if b is not None:
        out += b[:, None, None]
    return out


def maxpool2(x):
    c, h, w = x.shape
    return x.reshape(c, h // 2, 2, w // 2, 2).max(axis=(2, 4))


def up2(x):
    return x.repeat(2, axis=1).repeat(2, axis=2)


def zero_state(stack, R_stack, height, width):
    L = len(stack)
    h = [np.zeros((R_stack[l], height >> l, width >> l)) for l in range(L)]
    c = [np.zeros((R_stack[l], height >> l, width >> l)) for l in range(L)]
    p = [np.zeros((stack[l], height >> l, width >> l)) for l in range(L)]
    return h, c, p


def step(x, state, w, new_c_in_output_gate=False):
    """One time step. x: (C, H, W); state: (h, c, p) lists; returns (new state, e).

    new_c_in_output_gate: a deliberately wrong variant (the output gate's
    peephole reading the new cell), to show the tests can tell the difference.
    """
    h, c, p = state
    L = len(p)
    e = []
    for l in range(L):
        if l == 0:
            a = x
        else:
            a = maxpool2(relu(conv(e[l - 1], w[f"ConvA{l}/W"], w[f"ConvA{l}/b"])))
        e.append(np.concatenate([relu(a - p[l]), relu(p[l] - a)], axis=0))
    new_h, new_c, new_p = [None] * L, [None] * L, [None] * L
    for l in reversed(range(L)):
        inputs = [e[l]] + ([up2(new_h[l + 1])] if l < L - 1 else [])

        def gate(g):
            total = conv(h[l], w[f"ConvLSTM{l}/h_{g}/W"], w[f"ConvLSTM{l}/h_{g}/b"])
            for k, inp in enumerate(inputs):
                total = total + conv(inp, w[f"ConvLSTM{l}/x_{g}{k}/W"])
            return total

        def peep(g, cell):
            return w[f"ConvLSTM{l}/c_{g}/W"][0] * cell

        i = sigmoid(gate("i") + peep("i", c[l]))
        f = sigmoid(gate("f") + peep("f", c[l]))
        candidate = np.tanh(gate("c"))
        new_c[l] = f * c[l] + i * candidate
        o = sigmoid(gate("o") + peep("o", new_c[l] if new_c_in_output_gate else c[l]))
        new_h[l] = o * np.tanh(new_c[l])
        z = conv(new_h[l], w[f"ConvP{l}/W"], w[f"ConvP{l}/b"])
        new_p[l] = np.clip(z, 0.0, 1.0) if l == 0 else relu(z)
    return (new_h, new_c, new_p), e


def run(frames, w, stack, R_stack, state=None, **kwargs):
    """Runs one sequence. frames: (T, H, W, C) channels-last (converted here).

    Returns (predictions (T, H, W, C): step t's p_0, i.e. the prediction of
    frame t+1; aligned (T, H, W, C): the p_0 used at step t; errors (T, L):
    mean of each e_l; the final state).
    """
    frames = np.asarray(frames, np.float64)
    T, height, width, _ = frames.shape
    if state is None:
        state = zero_state(stack, R_stack, height, width)
    predictions, aligned, errors = [], [], []
    for t in range(T):
        aligned.append(state[2][0].transpose(1, 2, 0))
        state, e = step(frames[t].transpose(2, 0, 1), state, w, **kwargs)
        predictions.append(state[2][0].transpose(1, 2, 0))
        errors.append([e_l.mean() for e_l in e])
    return np.stack(predictions), np.stack(aligned), np.array(errors), state


def mse(a, b):
    return float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))


def random_weights(stack, R_stack, k, height, width, rng, scale=1.0):
    """Random weights in the Chainer layout (keys without "predictor/"), float32."""
    L = len(stack)
    w = {}

    def conv_w(name, cout, cin, bias=True):
        w[f"{name}/W"] = rng.normal(0.0, scale / np.sqrt(cin * k * k), (cout, cin, k, k))
        if bias:
            w[f"{name}/b"] = rng.normal(0.0, 0.3, (cout,))

    for l in range(L):
        if l > 0:
            conv_w(f"ConvA{l}", stack[l], 2 * stack[l - 1])
        conv_w(f"ConvP{l}", stack[l], R_stack[l])
        if l == 0:  # predictions mostly inside (0, 1), where the clip lets gradients through
            w["ConvP0/b"] = 0.5 + 0.1 * rng.standard_normal(stack[0])
        inputs = [2 * stack[l]] + ([R_stack[l + 1]] if l < L - 1 else [])
        for g in "ifco":
            for n, cin in enumerate(inputs):
                conv_w(f"ConvLSTM{l}/x_{g}{n}", R_stack[l], cin, bias=False)
            conv_w(f"ConvLSTM{l}/h_{g}", R_stack[l], R_stack[l])
        for g in "ifo":
            w[f"ConvLSTM{l}/c_{g}/W"] = rng.normal(0.0, 0.5, (1, R_stack[l], height >> l, width >> l))
    return {key: value.astype(np.float32) for key, value in w.items()}


def assign_to_layer(layer, w):
    """Sets a Keras ChainerPredNet's weights from Chainer-layout arrays (written here, not
    with the package's importer, so that the importer is tested separately)."""
    for sub in layer.cell.weight_layers:
        link = sub.name.replace("_", "/", 1) if sub.name.startswith("ConvLSTM") else sub.name
        if not hasattr(sub, "filters"):  # a peephole
            sub.kernel.assign(np.transpose(w[f"{link}/W"][0], (1, 2, 0)))
            continue
        sub.kernel.assign(np.transpose(w[f"{link}/W"], (2, 3, 1, 0)))
        if f"{link}/b" in w:
            sub.bias.assign(w[f"{link}/b"])
