"""Articulated-body algorithm (Featherstone, RBDA Table 7.1) for C states in the last axis.

Written in world coordinates (as Pinocchio does), where the articulated inertias of children
add to their parent's without a change of frame, and run level by level over the tree
(:mod:`.levels`): one backward pass for the articulated inertias, one forward pass for the
accelerations. Joints with several coordinates are handled with their full (w x w)
``D = S^T I^A S``; rows of shorter joints in a level are padded with zero motion and ``D = 1``
so that they produce exactly zero.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..model.model import Model
from .bodies import gravity_acceleration
from .levels import (T, coordinates, dot, gather, inertia_matrix, joints, level_bodies, mm, mv, parent_rows,
                     spd_inverse, to_parents)


def _project(IA, pA, S, tau, armature, pad):
    """Joint-space quantities of one level (RBDA Table 7.1, lines 11-14).

    U_a = I^A S_a,  D = S^T I^A S (+ armature),  u = tau - S^T p^A.
    Padding rows of S are zero and get D = 1, so they contribute nothing.
    """
    U = mv(IA[:, None], S)  # (W, w, 6, C)
    D = dot(S[:, :, None], U[:, None])  # (W, w, w, C)
    D = D + jnp.eye(D.shape[1], dtype=D.dtype)[:, :, None] * (armature + pad)[:, :, None]
    u = tau - dot(S, pA[:, None])
    return U, spd_inverse(D), u


def _articulated(IA, pA, c, U, Dinv, u):
    """What a body passes to its parent: I^a = I^A - U D^-1 U^T, p^a = p^A + I^a c + U D^-1 u."""
    W = mm(Dinv, U)  # D^-1 U^T, (W, w, 6, C)
    Ia = IA - mm(T(U), W)
    # kept exactly symmetric: U = I^A S assumes it, and rounding asymmetry fed back into the
    # parent's I^A grows level by level (10^-1 relative error on a 48-body ball-joint chain)
    Ia = 0.5 * (Ia + T(Ia))
    pa = pA + mv(Ia, c) + mv(T(W), u)
    return Ia, pa


def accelerate(a_parent, c, S, U, Dinv, u):
    """qdd = D^-1 (u - U^T a'),  a = a' + S qdd,  with a' = a_parent + c (RBDA Table 7.1)."""
    a1 = a_parent + c
    qdd = mv(Dinv, u - dot(U, a1[:, None]))
    return qdd, a1 + mv(T(S), qdd)


def articulated_inertias(model: Model, b0, rest, tau):
    """The ABA's pass leaves to root over the body terms of :func:`.levels.level_bodies`:
    (U, D^-1, u) of the root level, and of the other levels stacked (None without them)."""
    sw = model.topology.sweep
    C, dtype = tau.shape[-1], tau.dtype
    tau, arm = jnp.pad(tau, ((0, 1), (0, 0))), jnp.pad(model.armature, (0, 1))[:, None]
    root = sw.root
    n0 = len(root.bodies)
    IA0, pA0 = inertia_matrix(*b0.inertia), b0.p_bias
    saved = None
    if rest is not None:
        P = jnp.asarray(sw.parent, dtype)
        W = P.shape[-1]

        def backward(acc, xs):  # leaves to root; the carry: what the children pass to each slot
            IA, pA, c, S, dofs, pad, P = xs
            IA, pA = IA + acc[0], pA + acc[1]
            U, Dinv, u = _project(IA, pA, S, gather(tau, dofs), gather(arm, dofs), pad[..., None])
            Ia, pa = _articulated(IA, pA, c, U, Dinv, u)
            return (to_parents(P, Ia), to_parents(P, pa)), (U, Dinv, u)

        zero = (jnp.zeros((W, 6, 6, C), dtype), jnp.zeros((W, 6, C), dtype))
        xs = (inertia_matrix(*rest.inertia), rest.p_bias, rest.c, rest.S, sw.dofs, jnp.asarray(sw.pad, dtype), P)
        acc, saved = jax.lax.scan(backward, zero, xs, reverse=True)
        IA0, pA0 = IA0 + acc[0][:n0], pA0 + acc[1][:n0]
    root_terms = _project(IA0, pA0, b0.S, gather(tau, root.dofs), gather(arm, root.dofs),
                          jnp.asarray(root.pad, dtype)[..., None])
    return root_terms, saved


def aba_kernel(model: Model, q, qd, tau, f_ext=None):
    """ABA for C states in the last axis (q (nq, C), qd and tau (nv, C), f_ext (nb, 6, C)).

    Three passes over the levels (:mod:`.levels`): body terms root to leaves, articulated
    inertias leaves to root, accelerations root to leaves.
    """
    sw = model.topology.sweep
    if sw is None:  # nothing moves
        return jnp.zeros((0,) + tau.shape[1:], tau.dtype)
    b0, rest = level_bodies(model, joints(model, q, qd, f_ext), qd)
    root_terms, saved = articulated_inertias(model, b0, rest, tau)
    qdd0, a0 = accelerate(gravity_acceleration(model)[None, :, None], b0.c, b0.S, *root_terms)
    if rest is None:
        return coordinates(model, qdd0, None)
    P = jnp.asarray(sw.parent, tau.dtype)

    def forward(a_prev, xs):  # root to leaves; the carry: accelerations of the level above
        c, S, P, terms = xs
        qdd, a = accelerate(parent_rows(P, a_prev), c, S, *terms)
        return a, qdd

    a_init = jnp.zeros((P.shape[-1],) + a0.shape[1:], a0.dtype).at[:len(sw.root.bodies)].set(a0)
    _, qdds = jax.lax.scan(forward, a_init, (rest.c, rest.S, P, saved))
    return coordinates(model, qdd0, qdds)
