"""Kane kinematics: angular velocities, partial angular velocities and angular-acceleration
remainders (Sayers 1991, Table 7, Eqs. 30-35), mass-centre partial velocities and acceleration
remainders (Table 9, Eqs. 36-39), and the kinematical equations S q' = v (Eqs. 1, 20-29).

Numerically, every vector is expressed in N's axes: the paper's changes of basis ("· A",
"· B") are identities then, and only joint axes and body axes are rotated into N. A
recursion "value(B) = value(A) + own terms(B)" that restarts at nonrecursive bodies is a sum
of own terms over B's chain (see :mod:`mbjax.kane.tree`), computed for all bodies by one
product with the chain matrix.

The point tracked for each body is the mass centre B* of its composite body (Eq. 16); for a
massless composite it is the body origin B0.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..model.tree import take
from .joints import BODY_ROTATION, BODY_TRANSLATION, ROTATION, TRANSLATION
from .system import check_system_state, composite_bodies, system_poses
from .tree import KaneTree


class KaneKinematics(NamedTuple):
    """Kinematic terms of every body, all in N's axes (nb bodies, nu speeds)."""

    R: jax.Array  # (nb, 3, 3) orientation of B in N
    p: jax.Array  # (nb, 3) position of B0
    point: jax.Array  # (nb, 3) position of the composite mass centre B*
    partial_omega: jax.Array  # (nb, nu, 3) omega_i^B, Eq. (5)/(31)
    omega: jax.Array  # (nb, 3) omega^B
    alpha_rem: jax.Array  # (nb, 3) angular acceleration remainder, Eq. (33)
    partial_v: jax.Array  # (nb, nu, 3) v_i^{B*}, Eq. (11)
    v: jax.Array  # (nb, 3) v^{B*}
    a_rem: jax.Array  # (nb, 3) acceleration remainder of B*, Eq. (37), with -g of Eq. (39)
    axes: jax.Array  # (nu, 3) direction of each speed's joint motion (rotation axis or translation)


def _cross(a, b):
    return jnp.cross(a, b)


def _acceleration_dyadic(alpha, omega, r):
    """R^B . r = alpha_rem^B x r + omega^B x (omega^B x r), Table 9's rotational dyadic."""
    return _cross(alpha, r) + _cross(omega, _cross(omega, r))


def _with_n(x):
    """Append N's row (zeros) to per-body data, for gathers by ``KaneTree.parent_index``."""
    return jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)])


def kane_kinematics_from(tree: KaneTree, R, p, axes, com, ref, u, gravity) -> KaneKinematics:
    """Tables 7 and 9, for all bodies at once.

    **Arguments:**

    - ``R`` (nb, 3, 3), ``p`` (nb, 3): orientation and origin of every body in N.
    - ``axes`` (nu, 3): N-axes direction of each recursive speed's joint motion: the axis
      of a rotation (``d_rot``, or the current axis of a later rotation of the same joint)
      or the direction of a translation. Rows of nonrecursive speeds are not used.
    - ``com`` (nb, 3): composite mass centre B* in body axes (from B0).
    - ``ref`` (nb, 3): point whose velocity components are the speeds of a three-translation
      joint (the composite mass centre, Table 2), body axes; unused for other bodies.
    - ``u`` (nu,): generalized speeds; ``gravity`` (3,): g in N.
    """
    body = np.asarray(tree.speed_body, dtype=np.int32)
    parent = tree.parent_index
    masks = {k: jnp.asarray(v, u.dtype)[:, None] for k, v in tree.masks.items()}
    # body axes b_j of the nonrecursive speeds, in N
    E = jnp.einsum("kij,kj->ki", take(R, body), jnp.asarray(tree.axis_selector, u.dtype))

    # ---- Table 7: own partial angular velocities are d_rot (1-DOF) or b_j (3-DOF)
    W, D = axes * masks[ROTATION], axes * masks[TRANSLATION]
    w_own = W + E * masks[BODY_ROTATION]
    chain_r = jnp.asarray(tree.rotation_chain[:, body], u.dtype)  # (nb, nu)
    partial_omega = chain_r[:, :, None] * w_own[None]
    omega = chain_r @ (w_own * u[:, None])  # Eq. (31)
    # alpha_rem^B = alpha_rem^A + omega^{A'} x ^A omega^B, where a joint's later rotation
    # axes also turn with its earlier rotations; zero for 3-DOF joints
    wu = W * u[:, None]
    before = take(_with_n(omega), parent[body]) + jnp.asarray(tree.preceding_rotations, u.dtype) @ wu
    alpha_rem = chain_r @ _cross(before, wu)

    # ---- Table 9: mass-centre partial velocities and acceleration remainders
    point = p + spatial.matvec(R, com)
    nonrec = jnp.asarray(tree.nonrecursive_translation, u.dtype)[:, None]
    base = jnp.where(nonrec > 0, p + spatial.matvec(R, ref), p)  # where B's own terms start
    r_parent = p - take(_with_n(point), parent)  # r^{A* B0}
    r_own = point - base  # r^{B0 B*} (recursive) or r^{X B*} (nonrecursive)
    t_own = D * masks[TRANSLATION] + E * masks[BODY_TRANSLATION]  # d_t or b_j
    own = jnp.asarray(tree.own, u.dtype)
    T = ((1.0 - nonrec)[:, :, None] * _cross(take(_with_n(partial_omega), parent), r_parent[:, None])
         + own[:, :, None] * t_own[None]
         + _cross(partial_omega, r_own[:, None]))
    chain_t = jnp.asarray(tree.translation_chain, u.dtype)
    partial_v = jnp.einsum("bc,ckx->bkx", chain_t, T)
    v = jnp.einsum("bkx,k->bx", partial_v, u)

    omega_a, alpha_a = take(_with_n(omega), parent), take(_with_n(alpha_rem), parent)
    recursive = _acceleration_dyadic(alpha_a, omega_a, r_parent) + 2.0 * _cross(omega_a, own @ (D * u[:, None]))
    nonrecursive = _cross(omega, own @ (E * masks[BODY_TRANSLATION] * u[:, None]))  # omega^B x v^{B*}
    root = jnp.asarray(tree.chain_root, u.dtype)[:, None]
    terms = (jnp.where(nonrec > 0, nonrecursive, recursive) + _acceleration_dyadic(alpha_rem, omega, r_own)
             - root * gravity)  # a_rem^N = -g, Eq. (39)
    a_rem = chain_t @ terms
    return KaneKinematics(R, p, point, partial_omega, omega, alpha_rem, partial_v, v, a_rem, axes)


# ------------------------------------------------------------ building-block systems
def system_kinematics(system, q, u, lump: bool = True, bodies=None) -> KaneKinematics:
    """:func:`kane_kinematics_from` for a :class:`~mbjax.kane.KaneSystem` at (q, u);
    ``bodies``: its :func:`~mbjax.kane.composite_bodies` when already computed."""
    R, p, axes = system_poses(system, q)
    bodies = composite_bodies(system, lump) if bodies is None else bodies
    return kane_kinematics_from(system.tree, R, p, axes, bodies.com, bodies.ref, u, system.gravity)


def _inverse_columns(a, b, c):
    """Rows of the inverse of the 3x3 matrix with columns a, b, c: (b x c, c x a, a x b) / det."""
    rows = jnp.stack([_cross(b, c), _cross(c, a), _cross(a, b)])
    return rows / jnp.dot(a, rows[0])


def kinematical_blocks(system, kin: KaneKinematics, u):
    """Per joint, the pieces of S q' = v (Eq. 1) that are not the identity, from the
    kinematics ``kin`` at (q, u).

    **Returns:** a list of ``(slice, D, rhs)``: for a nonrecursive 3-translation or
    3-rotation joint, ``D`` (3, 3) has the N-axes joint directions d_j as columns and
    ``sum_j q'_j d_j = rhs`` (Eqs. 21-22, 26-27), so that Eq. (23)/(28) reads
    ``(D^T D) q' = D^T rhs``. Other speeds have ``q' = u`` (Eqs. 20, 25).
    """
    axes = kin.axes
    blocks = []
    for b, joint in enumerate(system.joints):
        sl = system.q_slice(b)
        a = system.parents[b]
        zero = jnp.zeros(3, u.dtype)
        wA = zero if a < 0 else kin.omega[a]
        nt = joint.n_translations
        if nt == 3:
            # ^A v^{B0} = v^{B0} - (velocity of the point of A at B0)          (Eq. 22)
            v_b0 = kin.v[b] + _cross(kin.omega[b], kin.p[b] - kin.point[b])
            v_a = zero if a < 0 else kin.v[a] + _cross(wA, kin.p[b] - kin.point[a])
            blocks.append((slice(sl.start, sl.start + 3), axes[sl.start:sl.start + 3].T, v_b0 - v_a))
        if joint.n_rotations == 3:
            # ^A omega^B = sum_j u_{o+j} b_j - omega^A                          (Eq. 27)
            r = slice(sl.start + nt, sl.stop)
            blocks.append((r, axes[r].T, kin.omega[b] - wA))
    return blocks


@eqx.filter_jit
def kinematical_equations(system, q, u):
    """The kinematical equations S q' = v (Eq. 1) in the paper's form.

    Rows of recursive speeds are ``q'_i = u_i`` (Eqs. 20, 25); a nonrecursive joint's rows are
    Eq. (23) (translations) or Eq. (28) (rotations): ``(d_i . d_j) q'_j = d_i . rhs``.

    **Returns:** ``(S (nq, nq), v (nq,))``.
    """
    q, u = check_system_state(system, q=q, u=u)
    S = jnp.eye(system.nq, dtype=u.dtype)
    v = u
    for sl, D, rhs in kinematical_blocks(system, system_kinematics(system, q, u), u):
        S = S.at[sl, sl].set(D.T @ D)
        v = v.at[sl].set(D.T @ rhs)
    return S, v


def coordinate_rates_from(system, kin: KaneKinematics, u):
    """q' (nq,) from the kinematical equations: ``q' = u`` for recursive speeds and
    ``q' = D^{-1} rhs`` for nonrecursive joints (explicit 3x3 inverse; singular where the
    joint's directions are coplanar, e.g. at cos q5 = 0 for the bus's 1-2-3 angles, Eq. 29)."""
    qd = u
    for sl, D, rhs in kinematical_blocks(system, kin, u):
        qd = qd.at[sl].set(_inverse_columns(D[:, 0], D[:, 1], D[:, 2]) @ rhs)
    return qd


@eqx.filter_jit
def coordinate_rates(system, q, u):
    """q' (nq,) at (q, u): :func:`coordinate_rates_from` the system's kinematics."""
    q, u = check_system_state(system, q=q, u=u)
    return coordinate_rates_from(system, system_kinematics(system, q, u), u)
