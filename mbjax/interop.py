"""Exchange states with Pinocchio and MuJoCo.

mbjax and Pinocchio agree on everything in q except the storage order of quaternions:
mbjax writes them (w, x, y, z), Pinocchio (x, y, z, w). Velocities, accelerations and
torques are laid out identically (with ``joint_order="pinocchio"`` for URDFs).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from . import spatial
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


# ------------------------------------------------------------------------------ MuJoCo
# For models loaded with mbjax.load_mjcf, q is MuJoCo's qpos unchanged (both store quaternions
# (w, x, y, z), and a hinge's or slide's `ref` is built into its placement), and hinge, slide
# and ball coordinates of qvel, qacc and forces agree too. Only free joints differ: MuJoCo's
# free-joint velocity is (world-frame linear velocity of the body origin, body-frame angular
# velocity), mbjax's (like Pinocchio's) is the body-frame spatial velocity (linear, angular).
# With R the body's orientation, v its mbjax linear velocity and w its angular velocity:
#   qvel_lin = R v,   qacc_lin = R (dv/dt + w x v),   qfrc_lin = R tau_lin   (equal power).


def _free_joints(model: Model):
    """(q start, v start) of every free joint."""
    return [(model.q_slice(i).start, model.v_slice(i).start)
            for i, t in enumerate(model.joint_types) if t == "free"]


def _map_free(model: Model, q, x, linear):
    """x with each free joint's linear part replaced by ``linear(R, x_lin, w)``."""
    x = jnp.asarray(x)
    for qs, vs in _free_joints(model):
        R = spatial.quat_to_rotation(q[..., qs + 3 : qs + 7])
        x = x.at[..., vs : vs + 3].set(linear(R, x[..., vs : vs + 3], vs))
    return x


def from_mujoco_velocity(model: Model, q, qvel):
    """MuJoCo qvel -> mbjax qd (nv,): free joints' linear velocity to the body frame, R^T v.

    Works on batches (leading axes) and inside ``jax.jit``.
    """
    q = jnp.asarray(q)
    return _map_free(model, q, qvel, lambda R, v, _: spatial.matvec(spatial.transpose(R), v))


def to_mujoco_velocity(model: Model, q, qd):
    """mbjax qd -> MuJoCo qvel (nv,): free joints' linear velocity to the world frame, R v."""
    q = jnp.asarray(q)
    return _map_free(model, q, qd, lambda R, v, _: spatial.matvec(R, v))


def from_mujoco_acceleration(model: Model, q, qvel, qacc):
    """MuJoCo qacc -> mbjax qdd (nv,), given MuJoCo's qvel: dv/dt = R^T qacc_lin - w x v."""
    q, qd = jnp.asarray(q), from_mujoco_velocity(model, q, qvel)

    def linear(R, a, vs):
        return spatial.matvec(spatial.transpose(R), a) - jnp.cross(qd[..., vs + 3 : vs + 6], qd[..., vs : vs + 3])

    return _map_free(model, q, qacc, linear)


def to_mujoco_acceleration(model: Model, q, qd, qdd):
    """mbjax qdd -> MuJoCo qacc (nv,), given mbjax's qd: qacc_lin = R (dv/dt + w x v)."""
    q, qd = jnp.asarray(q), jnp.asarray(qd)

    def linear(R, a, vs):
        return spatial.matvec(R, a + jnp.cross(qd[..., vs + 3 : vs + 6], qd[..., vs : vs + 3]))

    return _map_free(model, q, qdd, linear)


def from_mujoco_force(model: Model, q, qfrc):
    """MuJoCo generalized force (e.g. qfrc_applied) -> mbjax tau: free joints' force R^T f."""
    return from_mujoco_velocity(model, q, qfrc)


def to_mujoco_force(model: Model, q, tau):
    """mbjax tau -> MuJoCo generalized force: free joints' force to the world frame, R f."""
    return to_mujoco_velocity(model, q, tau)
