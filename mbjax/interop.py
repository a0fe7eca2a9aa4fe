"""Exchange configurations with Pinocchio.

mbjax and Pinocchio agree on everything in q except the storage order of quaternions:
mbjax writes them (w, x, y, z), Pinocchio (x, y, z, w). Velocities, accelerations and
torques are laid out identically (with ``joint_order="pinocchio"`` for URDFs).
"""

from __future__ import annotations

import numpy as np

from .model.model import Model


def _quaternion_starts(model: Model):
    for i, t in enumerate(model.joint_types):
        s = model.q_slice(i).start
        if t == "free":
            yield s + 3
        elif t == "spherical":
            yield s


def to_pinocchio_configuration(model: Model, q) -> np.ndarray:
    """mbjax q -> Pinocchio q: each quaternion (w, x, y, z) becomes (x, y, z, w)."""
    q = np.array(q, dtype=float)
    for s in _quaternion_starts(model):
        q[..., s : s + 4] = np.roll(q[..., s : s + 4], -1, axis=-1)
    return q


def from_pinocchio_configuration(model: Model, q) -> np.ndarray:
    """Pinocchio q -> mbjax q: each quaternion (x, y, z, w) becomes (w, x, y, z)."""
    q = np.array(q, dtype=float)
    for s in _quaternion_starts(model):
        q[..., s : s + 4] = np.roll(q[..., s : s + 4], 1, axis=-1)
    return q
