"""Constraint kinematics of loop closures: residual Phi(q), Jacobian Phi_q, bias gamma.

Everything is derived from the tree kinematics, for any joint types in the tree and any cut
joints, with automatic differentiation only of the small map from a relative pose to the
residual (no hand-written Jacobians):

- ``Phi(q) = e(X_rel)``: per cut joint, the pose ``X_rel = (R, p)`` of joint frame B in joint
  frame A gives translation rows ``p`` (in A's axes) and rotation rows, all zero-safe and
  without spurious roots: ``log R`` (weld, prismatic), the rotation vector turning z_A onto
  z_B (revolute, cylindrical: ``(z_A x z_B) atan2(|z_A x z_B|, z_A . z_B) / |z_A x z_B|``) and
  the angle between x_A and the plane normal to y_B (universal).
- ``W = d e(X_rel exp(xi)) / d xi`` at xi = 0 (nc, 6): row c is the rate of residual row c
  per unit of the relative twist ``xi`` of B with respect to A (body twist, in B's axes) of
  its closure ``closures.row_loops[c]``. Its transpose maps multipliers to the wrenches of the
  cut joints. Each row depends on its own closure's twist only, so one 6-column forward
  Jacobian with the same twist given to every closure yields all of W.
- ``Phi_q = W J_xi`` (nc, nv), with ``J_xi = Ad(X_B)^-1 (J_b - J_a)`` from the world-frame
  motion subspaces of the tree: velocity space, so ``Phi_dot = Phi_q qd`` also where
  ``nv != nq``.
- ``gamma = -(Phi_q qd)_q qd`` (Huang et al. 2000 Eq. 1), the part of ``Phi_ddot`` not proportional
  to qdd. With ``X_rel_dot = X_rel xi^``, ``Phi_ddot = W xi_dot + d^2/ds^2 e(X_rel exp(s xi))``
  (the derivative of W along xi is the second derivative along the one-parameter subgroup),
  and ``xi_dot = Ad(X_B)^-1 (a_b - a_a - v_b x (v_b - v_a))`` with the bodies' world-frame
  spatial velocities v and velocity-product accelerations a (those of the RNEA).
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..checks import check_state
from ..dynamics.bodies import body_terms
from ..kinematics import TreeKinematics, tree_kinematics
from ..model.model import Model
from ..model.tree import take
from .closures import JOINT_ROWS, LoopClosures


class LoopKinematics(NamedTuple):
    """Constraint quantities at a state (q, qd)."""

    phi: jax.Array  # (nc,) residual
    jacobian: jax.Array  # (nc, nv) Phi_q
    phi_dot: jax.Array  # (nc,) Phi_q qd
    gamma: jax.Array  # (nc,) -(Phi_q qd)_q qd
    wrench_map: jax.Array  # (nc, 6) W: row c of Phi per unit relative twist of its closure


def _body_rows(model: Model, closures: LoopClosures, which: int):
    """Body index of side ``which`` (0: a, 1: b) of every closure; the world is row nbodies."""
    return np.asarray([pair[which] if pair[which] >= 0 else model.nbodies for pair in closures.bodies], np.int32)


def _with_world(x):
    """Per-body rows plus a last row of zeros (or the identity) standing for the world."""
    last = jnp.eye(3, dtype=x.dtype)[None] if x.ndim == 3 else jnp.zeros((1,) + x.shape[1:], x.dtype)
    return jnp.concatenate([x, last])


def joint_frame_poses(model: Model, closures: LoopClosures, tk: TreeKinematics):
    """World poses of the joint frames: ``(R_a, p_a, R_b, p_b)``, each (nl, 3, 3) / (nl, 3)."""
    R, p = _with_world(tk.R), _with_world(tk.p)
    a, b = _body_rows(model, closures, 0), _body_rows(model, closures, 1)
    return (*spatial.compose(take(R, a), take(p, a), closures.rotation_a, closures.translation_a),
            *spatial.compose(take(R, b), take(p, b), closures.rotation_b, closures.translation_b))


def relative_poses(Ra, pa, Rb, pb):
    """Pose ``(R, p)`` of joint frame B in joint frame A."""
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


def _moved(closures, R, p, xi):
    """Phi at the relative poses moved by the body twists ``xi`` (nl, 6): (R, p) exp(xi)."""
    dR, dp = spatial.se3_exp(xi)
    return residual_from_relative(closures, *spatial.compose(R, p, dR, dp))


def residual_from(model: Model, closures: LoopClosures, tk: TreeKinematics):
    """Phi (nc,) from tree kinematics."""
    return residual_from_relative(closures, *relative_poses(*joint_frame_poses(model, closures, tk)))


def _twist_jacobians(model, closures, tk, Rb, pb):
    """``J_xi`` (nl, nv, 6): relative twist of B w.r.t. A per unit qd, in B's axes at B."""
    masks = _with_world(jnp.asarray(model.topology.dof_ancestors, tk.S.dtype))  # (nb + 1, nv)
    rel = take(masks, _body_rows(model, closures, 1)) - take(masks, _body_rows(model, closures, 0))
    return spatial.inverse_transform_motion(Rb[:, None], pb[:, None], rel[..., None] * tk.S)


def loop_kinematics_from(model: Model, closures: LoopClosures, tk: TreeKinematics, q, qd) -> LoopKinematics:
    """Phi, Phi_q, Phi_dot, gamma and W at (q, qd) from tree kinematics (no input checks)."""
    Ra, pa, Rb, pb = joint_frame_poses(model, closures, tk)
    R, p = relative_poses(Ra, pa, Rb, pb)
    phi = residual_from_relative(closures, R, p)
    shape = (closures.nloops, 6)
    W = jax.jacfwd(lambda y: _moved(closures, R, p, jnp.broadcast_to(y, shape)))(jnp.zeros(6, qd.dtype))
    rows = np.asarray(closures.row_loops, np.int32)
    J = jnp.einsum("ck,cvk->cv", W, take(_twist_jacobians(model, closures, tk, Rb, pb), rows))
    # relative twist xi and its velocity-product rate, from the bodies' spatial velocities
    # and accelerations at qdd = 0 (world frame, at the world origin)
    terms = body_terms(model, tk, q, qd)
    acc = jnp.asarray(model.topology.ancestors, qd.dtype) @ terms.c
    a, b = _body_rows(model, closures, 0), _body_rows(model, closures, 1)
    v, acc = _with_world(terms.v), _with_world(acc)
    v_rel = take(v, b) - take(v, a)
    xi = spatial.inverse_transform_motion(Rb, pb, v_rel)
    xi_dot = spatial.inverse_transform_motion(Rb, pb, take(acc, b) - take(acc, a) - spatial.cross_motion(take(v, b), v_rel))

    def along(s):  # Phi on the one-parameter subgroup X_rel exp(s xi)
        return _moved(closures, R, p, s * xi)

    def rate(s):
        return jax.jvp(along, (s,), (jnp.ones_like(s),))[1]

    s0 = jnp.zeros((), qd.dtype)
    phi_dot, curvature = jax.jvp(rate, (s0,), (jnp.ones_like(s0),))
    gamma = -(jnp.sum(W * take(xi_dot, rows), axis=-1) + curvature)
    return LoopKinematics(phi, J, phi_dot, gamma, W)


def jacobian_from(model: Model, closures: LoopClosures, tk: TreeKinematics):
    """Phi_q (nc, nv) from tree kinematics (the velocity terms are not computed under jit)."""
    zero = jnp.zeros(model.nv, tk.S.dtype)
    return loop_kinematics_from(model, closures, tk, jnp.zeros(model.nq, zero.dtype), zero).jacobian


@eqx.filter_jit
def loop_residual(model: Model, closures: LoopClosures, q):
    """Position residual Phi(q) (nc,); zero when every loop is closed.

    Rows in closure order, each closure's in :data:`~mbjax.constraints.JOINT_ROWS` order
    (``closures.row_names``): metres for translations, radians for rotations.
    """
    q = check_state(model, q)
    return residual_from(model, closures, tree_kinematics(model, q))


@eqx.filter_jit
def loop_jacobian(model: Model, closures: LoopClosures, q):
    """Phi_q (nc, nv): ``Phi_dot = Phi_q qd`` (velocity space, so nv columns)."""
    q = check_state(model, q)
    return jacobian_from(model, closures, tree_kinematics(model, q))


@eqx.filter_jit
def loop_kinematics(model: Model, closures: LoopClosures, q, qd) -> LoopKinematics:
    """:class:`LoopKinematics` (Phi, Phi_q, Phi_dot, gamma, W) at (q, qd)."""
    q, qd = check_state(model, q, qd=qd)
    return loop_kinematics_from(model, closures, tree_kinematics(model, q), q, qd)
