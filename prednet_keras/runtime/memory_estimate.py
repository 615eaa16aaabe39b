"""Whether a PredNet training step can fit in this machine's memory, asked before the model is built.
No framework at import.

A frame size or batch far beyond the machine used to run until the kernel killed the process (signal 9, no
message). Back-propagation through time keeps every layer's tensors of every time step of the batch; their
sum is a lower bound on what a training step needs, whatever the backend (which adds workspace, gradients and
the frames themselves on top). A run whose lower bound exceeds the memory available is refused with the
numbers; one below it may still fail, but then with the framework's own out-of-memory error.
"""

__all__ = ["available_bytes", "kept_activation_bytes", "memory_problem"]


def kept_activation_bytes(frame_shape, stack_sizes, r_stack_sizes, nt, batch_size, bytes_per_value=4):
    """A lower bound on the bytes a PredNet training step keeps for its backward pass.

    Per layer l, time step and sequence, at the layer's resolution (H / 2**l by W / 2**l): the ConvLSTM's
    input (E_l, R_l and the upsampled R_l+1), its four gates, its cell and R_l; A_l, Ahat_l and E_l (two
    halves of a_l channels each).
    """
    height, width = frame_shape[0], frame_shape[1]
    values = 0
    for layer, (a, r) in enumerate(zip(stack_sizes, r_stack_sizes)):
        above = r_stack_sizes[layer + 1] if layer + 1 < len(r_stack_sizes) else 0
        lstm = (2 * a + r + above) + 4 * r + 2 * r
        pixels = (height >> layer) * (width >> layer)
        values += pixels * (lstm + 4 * a)
    return values * nt * batch_size * bytes_per_value


def available_bytes():
    """The memory the kernel says is available for a new process (MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_problem(frame_shape, prednet_kwargs, nt, batch_size, available=None):
    """A sentence refusing the run when its lower bound exceeds the available memory, else None."""
    available = available_bytes() if available is None else available
    if not available:
        return None
    needed = kept_activation_bytes(frame_shape, prednet_kwargs["stack_sizes"], prednet_kwargs["R_stack_sizes"],
                                   nt, batch_size)
    if needed <= available:
        return None
    shape = "x".join(str(n) for n in frame_shape[:2])
    return (f"Training {shape} frames, {nt} per sequence, {batch_size} sequences per batch keeps at least "
            f"{needed / 2**30:.1f} GiB of activations for the backward pass; this machine has "
            f"{available / 2**30:.1f} GiB available. Use a smaller --size, --batch-size or --nt.")
