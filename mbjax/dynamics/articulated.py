"""Articulated-body algorithm (Featherstone, RBDA Table 7.1) for C states in the last axis.

Written in world coordinates (as Pinocchio does), where the articulated inertias of children
add to their parent's without a change of frame, and run level by level over the tree
(:mod:`.levels`): one backward pass for the articulated inertias, one forward pass for the
accelerations. Joints with several coordinates are handled with their full (w x w)
``D = S^T I^A S``; rows of shorter joints in a level are padded with zero motion and ``D = 1``
so that they produce exactly zero.

M^-1 is the ABA of the nv unit torques at zero velocity and without gravity (the recursion of
Carpentier, "Analytical inverse of the joint space inertia matrix", 2018, there restricted to one
triangle): with the same U and D, the unit torques' bias forces F (6 x nv per body) pass leaves
to root and their accelerations P root to leaves, all nv columns at once (:func:`unit_torques`,
:func:`unit_accelerations`).
"""

from __future__ import annotations

import jax.numpy as jnp

from ..model.model import Model
from .bodies import gravity_acceleration
from .levels import (T, coordinates, dot, gather, inertia_matrix, joints, level_bodies, mv, parent_rows,
                     spd_inverse, sweep_down, sweep_up, symmetric_outer, to_parents, total)


def _project(IA, pA, S, tau, diagonal):
    """Joint-space quantities of one level (RBDA Table 7.1, lines 11-14).

    U_a = I^A S_a,  D = S^T I^A S (+ armature),  u = tau - S^T p^A.
    ``diagonal`` (W, w, 1) is added to D's: the armature, and 1 for the padding rows of S, which
    are zero, so that they contribute nothing.
    """
    U = mv(IA[:, None], S)  # (W, w, 6, C)
    D = dot(S[:, :, None], U[:, None])  # (W, w, w, C)
    D = D + jnp.eye(D.shape[1], dtype=D.dtype)[:, :, None] * diagonal[:, :, None]
    u = tau - dot(S, pA[:, None])
    return U, spd_inverse(D), u


def _articulated(IA, pA, c, U, Dinv, u):
    """What a body passes to its parent: I^a = I^A - U D^-1 U^T, p^a = p^A + I^a c + U D^-1 u.

    U D^-1 U^T is formed exactly symmetric (:func:`.levels.symmetric_outer`), as U = I^A S
    assumes, without the transposed copy that symmetrising a plain product took (the largest
    kernel of talos_reduced's batched ABA). What asymmetry I^A has is the rounding of the body
    inertias, added level by level, not amplified (``tests/test_batched.py``: a 64-body chain)."""
    Ia = IA - symmetric_outer(U, Dinv)
    Du = mv(Dinv, u)  # (W, w, C)
    pa = pA + mv(Ia, c) + sum(U[:, a] * Du[:, a, None] for a in range(U.shape[1]))
    return Ia, pa


def accelerate(a_parent, c, S, U, Dinv, u):
    """qdd = D^-1 (u - U^T a'),  a = a' + S qdd,  with a' = a_parent + c (RBDA Table 7.1)."""
    a1 = a_parent + c
    qdd = mv(Dinv, u - dot(U, a1[:, None]))
    return qdd, a1 + mv(T(S), qdd)


def unit_torques(F, S, U, Dinv, dofs):
    """The unit torques' pass leaves to root at one level: with F (W, nv, 6, C) the bias forces
    that the children pass (column j: unit torque on coordinate j), u = E - S^T F (E: the
    level's own unit torques), the rows D^-1 u (W, w, nv, C) of M^-1 before the parents'
    accelerations, and what the body passes on, F + U D^-1 u."""
    nv = F.shape[1]
    E = (dofs[:, :, None] == jnp.arange(nv)).astype(F.dtype)[..., None]  # padding coordinates (nv): no row
    u = E - total(S[:, :, None] * F[:, None], -2)  # (W, w, nv, C)
    rows = total(Dinv[:, :, :, None] * u[:, None], 2)
    return F + total(U[:, :, None] * rows[..., None, :], 1), rows


def unit_accelerations(P_parent, S, U, Dinv, rows):
    """The unit torques' pass root to leaves at one level: the rows of M^-1, D^-1 u - D^-1 U^T
    P' (RBDA Table 7.1's qdd with a' = P', the parents' accelerations (W, nv, 6, C)), and the
    bodies' accelerations P = P' + S qdd."""
    rows = rows - total(Dinv[:, :, :, None] * total(U[:, :, None] * P_parent[:, None], -2)[:, None], 2)
    return rows, P_parent + total(S[:, :, None] * rows[..., None, :], 1)


def articulated_inertias(model: Model, b0, rest, tau, inverse: bool = False):
    """The ABA's pass leaves to root over the body terms of :func:`.levels.level_bodies`:
    (U, D^-1, u) of the root level, and of the other levels stacked per segment; with
    ``inverse``, each with the rows of M^-1 of :func:`unit_torques` after them."""
    sw = model.topology.sweep
    C, dtype = tau.shape[-1], tau.dtype
    tau, arm = jnp.pad(tau, ((0, 1), (0, 0))), jnp.pad(model.armature, (0, 1))[:, None]
    root = sw.root

    def diagonal(level):  # D's added diagonal (armature, 1 for padding), taken once per call
        return arm[level.dofs] + jnp.asarray(level.pad, dtype)[..., None]

    def level(acc, inertia, pA, c, S, dofs, diagonal):
        # the body's 6 x 6 inertia built here, where XLA fuses it into the sum (not stored per level)
        IA, pA = inertia_matrix(*inertia) + acc[0], pA + acc[1]
        U, Dinv, u = _project(IA, pA, S, gather(tau, dofs), diagonal)
        if not inverse:
            return _articulated(IA, pA, c, U, Dinv, u), (U, Dinv, u)
        F, rows = unit_torques(acc[2], S, U, Dinv, dofs)
        return _articulated(IA, pA, c, U, Dinv, u) + (F,), (U, Dinv, u, rows)

    def backward(acc, *inputs):  # the carry: what the children pass to each slot
        passed, terms = level(acc, *inputs[:-1])
        return tuple(to_parents(inputs[-1], x) for x in passed), terms

    def zero(W):
        z = (jnp.zeros((W, 6, 6, C), dtype), jnp.zeros((W, 6, C), dtype))
        return z + (jnp.zeros((W, model.nv, 6, C), dtype),) if inverse else z

    xs = [(b.inertia, b.p_bias, b.c, b.S, seg.dofs, diagonal(seg)) for b, seg in zip(rest, sw.segments)]
    acc, saved = sweep_up(model, backward, zero, xs)
    acc = acc if rest else zero(len(root.bodies))
    root_terms = level(acc, b0.inertia, b0.p_bias, b0.c, b0.S, jnp.asarray(root.dofs), diagonal(root))[1]
    return root_terms, saved


def aba_kernel(model: Model, q, qd, tau, f_ext=None):
    """ABA for C states in the last axis (q (nq, C), qd and tau (nv, C), f_ext (nb, 6, C)).

    Three passes over the levels (:mod:`.levels`): body terms root to leaves, articulated
    inertias leaves to root, accelerations root to leaves.
    """
    if model.topology.sweep is None:  # nothing moves
        return jnp.zeros((0,) + tau.shape[1:], tau.dtype)
    b0, rest = level_bodies(model, joints(model, q, qd, f_ext), qd)
    root_terms, saved = articulated_inertias(model, b0, rest, tau)
    qdd0, a0 = accelerate(gravity_acceleration(model)[None, :, None], b0.c, b0.S, *root_terms)

    def forward(a_prev, c, S, terms, P):  # the carry: accelerations of the level above
        qdd, a = accelerate(parent_rows(P, a_prev), c, S, *terms)
        return a, qdd

    qdds = sweep_down(model, forward, a0, [(b.c, b.S, t) for b, t in zip(rest, saved)])
    return coordinates(model, qdd0, qdds)
