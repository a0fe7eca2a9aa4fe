"""Constraint kinematics of loop closures: residual Phi(q), Jacobian Phi_q, bias gamma.

Everything is derived from the tree kinematics by automatic differentiation, for any joint
types in the tree and any cut joints (no hand-written Jacobians):

- ``Phi(q)``: per cut joint, the pose of joint frame B in joint frame A, ``(R, p)``, gives
  translation rows ``p`` (in A's axes) and rotation rows, all zero-safe and without spurious
  roots: ``log R`` (weld, prismatic), the rotation vector turning z_A onto z_B (revolute,
  cylindrical: ``(z_A x z_B) atan2(|z_A x z_B|, z_A . z_B) / |z_A x z_B|``) and the angle
  between x_A and the plane normal to y_B (universal).
- ``Phi_q`` (nc, nv): ``d/d delta Phi(q (+) delta)`` at delta = 0, in the velocity space
  (``nv != nq`` with quaternions), so that ``Phi_dot = Phi_q qd``.
- ``gamma = -(Phi_q qd)_q qd`` (seed 003 Eq. 1): along ``q(t) = q (+) t qd`` the velocity
  coordinates stay equal to qd (every joint's ``integrate`` is its group exponential with
  body-fixed velocity), so ``Phi_ddot = Phi_q qdd - gamma`` gives
  ``gamma = -d^2/dt^2 Phi(q (+) t qd)`` at t = 0.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..configuration import integrate_from
from ..kinematics import tree_kinematics
from ..model.model import Model
from ..model.tree import take
from .closures import JOINT_ROWS, LoopClosures


class LoopKinematics(NamedTuple):
    """Constraint quantities at a state (q, qd)."""

    phi: jax.Array  # (nc,) residual
    jacobian: jax.Array  # (nc, nv) Phi_q
    phi_dot: jax.Array  # (nc,) Phi_q qd
    gamma: jax.Array  # (nc,) -(Phi_q qd)_q qd


def joint_frame_poses(model: Model, closures: LoopClosures, q):
    """World poses of the joint frames: ``(R_a, p_a, R_b, p_b)``, each (nl, 3, 3) / (nl, 3)."""
    tk = tree_kinematics(model, q)
    nb = model.nbodies
    R = jnp.concatenate([tk.R, jnp.eye(3, dtype=tk.R.dtype)[None]])  # row nb: the world
    p = jnp.concatenate([tk.p, jnp.zeros((1, 3), tk.p.dtype)])

    def frames(which, Rj, pj):
        idx = np.asarray([pair[which] if pair[which] >= 0 else nb for pair in closures.bodies], np.int32)
        return spatial.compose(take(R, idx), take(p, idx), Rj, pj)

    return (*frames(0, closures.rotation_a, closures.translation_a),
            *frames(1, closures.rotation_b, closures.translation_b))


def relative_poses(model: Model, closures: LoopClosures, q):
    """Pose ``(R, p)`` of joint frame B in joint frame A for every closure."""
    Ra, pa, Rb, pb = joint_frame_poses(model, closures, q)
    Rat = spatial.transpose(Ra)
    return spatial.matmul(Rat, Rb), spatial.matvec(Rat, pb - pa)


def _align_z(R):
    """Rotation vector (x, y parts) turning z_A onto z_B = R[:, 2]; zero-safe at alignment."""
    a, b, c = R[..., 0, 2], R[..., 1, 2], R[..., 2, 2]
    s2 = a * a + b * b
    small = (s2 < 1e-12) & (c > 0)
    s = jnp.sqrt(jnp.where(small, 1.0, s2))
    # atan2(s, c) / s = atan(x) / (c x) with x = s / c -> (1 - x^2/3 + x^4/5) / c near s = 0
    x2 = s2 / jnp.where(small, c * c, 1.0)
    scale = jnp.where(small, (1.0 - x2 / 3.0 + x2 * x2 / 5.0) / jnp.where(small, c, 1.0), jnp.arctan2(s, c) / s)
    return jnp.stack([-b * scale, a * scale], -1)  # (z_A x z_B) scale, in A's axes


def _universal_angle(R):
    """Angle between x_A and the plane normal to y_B: atan2(x_A . y_B, |x_A x y_B|)."""
    n2 = R[..., 0, 0] ** 2 + R[..., 0, 2] ** 2  # |x_A x y_B|^2, the other components of x_A in B
    safe = n2 > 1e-30
    return jnp.arctan2(R[..., 0, 1], jnp.sqrt(jnp.where(safe, n2, 1.0)) * safe)[..., None]


_ROTATION_ROWS = {  # rotation rows of each joint type, from the relative rotation R
    "spherical": lambda R: R[..., :0, 0],
    "revolute": _align_z,
    "cylindrical": _align_z,
    "universal": _universal_angle,
    "prismatic": spatial.rotation_log,
    "weld": spatial.rotation_log,
}


def residual_from_relative(closures: LoopClosures, R, p):
    """Phi (nc,) from the relative poses ``(R, p)`` of B in A (one per closure)."""
    rows, order = [], []
    offset = 0
    for kind in dict.fromkeys(closures.joint_types):  # each joint type present, once
        idx = [i for i, t in enumerate(closures.joint_types) if t == kind]
        sel = np.asarray(idx, np.int32)
        Rg = take(R, sel)
        trans = take(p, sel) if "z" in JOINT_ROWS[kind] else take(p, sel)[:, :2]
        e = jnp.concatenate([trans, _ROTATION_ROWS[kind](Rg)], -1)  # (n_kind, rows of kind)
        width = len(JOINT_ROWS[kind])
        rows.append(e.reshape(-1))
        for k, i in enumerate(idx):
            order += [(i, offset + k * width + JOINT_ROWS[kind].index(d)) for d in closures.directions[i]]
        offset += len(idx) * width
    flat = jnp.concatenate(rows)
    perm = np.asarray([pos for _, pos in sorted(order, key=lambda t: t[0])], np.int32)  # stable sort
    return take(flat, perm)


def loop_residual(model: Model, closures: LoopClosures, q):
    """Position residual Phi(q) (nc,); zero when every loop is closed (no input checks)."""
    return residual_from_relative(closures, *relative_poses(model, closures, q))


def loop_jacobian(model: Model, closures: LoopClosures, q):
    """Phi_q (nc, nv): ``d/d delta Phi(q (+) delta)`` at ``delta = 0`` (no input checks)."""
    return jax.jacfwd(lambda d: loop_residual(model, closures, integrate_from(model, q, d)))(jnp.zeros(model.nv, q.dtype))


def loop_kinematics(model: Model, closures: LoopClosures, q, qd) -> LoopKinematics:
    """Phi, Phi_q, Phi_dot and gamma at (q, qd) (no input checks)."""

    def along(t):  # Phi on the curve q (+) t qd
        return loop_residual(model, closures, integrate_from(model, q, t * qd))

    def rate(t):
        return jax.jvp(along, (t,), (jnp.ones_like(t),))[1]

    zero = jnp.zeros((), q.dtype)
    phi_dot, phi_ddot = jax.jvp(rate, (zero,), (jnp.ones_like(zero),))
    return LoopKinematics(loop_residual(model, closures, q), loop_jacobian(model, closures, q), phi_dot, -phi_ddot)


def wrench_map(model: Model, closures: LoopClosures, q):
    """``W`` (nc, nl, 6): derivative of Phi with respect to the relative twist of each joint
    frame B (body twist, in B's axes) with respect to A.

    Multipliers ``lam`` (nc,) are then the wrenches ``w_i = W[:, i].T @ lam`` (force, moment
    about B's origin, in B's axes) that the cut joints exert on bodies b; bodies a receive
    the opposite wrenches, and ``Phi_q^T lam = sum_i J_rel,i^T w_i``.
    """
    R, p = relative_poses(model, closures, q)

    def perturbed(xi):  # (R, p) exp(xi_i) for every closure
        dR, dp = spatial.se3_exp(xi)
        return residual_from_relative(closures, *spatial.compose(R, p, dR, dp))

    return jax.jacfwd(perturbed)(jnp.zeros((closures.nloops, 6), q.dtype))
