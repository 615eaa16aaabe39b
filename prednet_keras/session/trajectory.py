"""Weight trajectories: a fixed sample of a model's weights at evenly spaced steps -> trajectory.npz.

`prednet-study report` measures how far two runs drift apart over training
(docs/study-statistics.md, "Divergence"): every run of a protocol samples the
same positions (a fixed numpy seed over the weights sorted by name), so the
samples of two runs can be compared point by point.

    steps   (K,)    the global steps of the snapshots (0: the initial weights)
    values  (K, D)  the sampled weights, float64
"""

import numpy as np

from prednet_keras.files import diskwrite

__all__ = ["FILE", "Trajectory", "VALUES"]

FILE = "trajectory.npz"
# Weights sampled per snapshot: enough for a stable distance, small on disk.
VALUES = 4096


class Trajectory:
    """Snapshots of one run's weights.

    Args:
        path: the file to write.
        total: the steps the run will make.
        points: snapshots after the start (0: none).
    """

    def __init__(self, path, total, points):
        self.path = path
        self.points = int(points)
        self.due = set()
        if self.points > 0 and total > 0:
            self.due = {int(round(x)) for x in np.linspace(0, total, self.points + 1)}
        self.target = None
        self.positions = None
        self.steps, self.values = [], []

    @property
    def enabled(self):
        return bool(self.due)

    def resume(self, last_step):
        """Keeps the snapshots of an interrupted run up to `last_step` (its last completed step)."""
        if not self.enabled or not self.path.is_file():
            return
        with np.load(self.path) as data:
            steps, values = data["steps"], data["values"]
            self.positions = data["positions"] if "positions" in data else None
        keep = steps <= last_step
        self.steps = [int(s) for s in steps[keep]]
        self.values = list(values[keep])

    def start(self, target, step=0):
        """Follows `target` (a layer or model); snapshots it now when `step` is due."""
        if not self.enabled:
            return
        self.target = target
        if step in self.due and step not in self.steps:
            self._snapshot(step)

    def after_update(self, step):
        """Call after every step with its global number."""
        if self.target is not None and step in self.due and step not in self.steps:
            self._snapshot(step)

    def _snapshot(self, step):
        from prednet_keras.models import starting_point

        if hasattr(self.target, "jax_state_sync"):
            # JAX fit keeps the state outside the variables between syncs.
            self.target.jax_state_sync()
        weights = starting_point.current_weights(self.target)
        flat = np.concatenate([np.asarray(weights[k], dtype=np.float64).ravel() for k in sorted(weights)])
        if self.positions is None:
            count = min(VALUES, flat.size)
            self.positions = np.sort(np.random.default_rng(0).choice(flat.size, size=count, replace=False))
        self.steps.append(int(step))
        self.values.append(flat[self.positions])

    def save(self):
        """Writes every snapshot so far (atomically); False when there is none."""
        if not self.steps:
            return False
        order = np.argsort(self.steps, kind="stable")

        def write(path):
            with open(path, "wb") as handle:
                np.savez(handle, steps=np.asarray(self.steps, dtype=np.int64)[order],
                         values=np.stack(self.values)[order], positions=self.positions)

        diskwrite.write_through_temporary(self.path, write)
        return True

    def record(self):
        """The manifest's `trajectory` entry."""
        return {"file": self.path.name, "points": len(self.steps), "values": int(len(self.positions)),
                "what": "a fixed sample of the weights (sorted by name), float64"}
