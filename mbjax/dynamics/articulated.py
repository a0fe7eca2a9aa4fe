"""Articulated-body algorithm (Featherstone, RBDA Table 7.1) for C states in the last axis.

Written in world coordinates (as Pinocchio does), where the articulated inertias of children
add to their parent's without a change of frame, and run level by level over the tree
(:mod:`.levels`): one backward pass for the articulated inertias, one forward pass for the
accelerations. Joints with several coordinates are handled with their full (w x w)
``D = S^T I^A S``; rows of shorter joints in a level are padded with zero motion and ``D = 1``
so that they produce exactly zero.
"""

from __future__ import annotations

import jax.numpy as jnp

from ..model.model import Model
from .bodies import gravity_acceleration
from .levels import (T, coordinates, dot, gather, inertia_matrix, joints, level_bodies, mv, parent_rows,
                     spd_inverse, sweep_down, sweep_up, symmetric_outer, to_parents)


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


def articulated_inertias(model: Model, b0, rest, tau):
    """The ABA's pass leaves to root over the body terms of :func:`.levels.level_bodies`:
    (U, D^-1, u) of the root level, and of the other levels stacked per segment."""
    sw = model.topology.sweep
    C, dtype = tau.shape[-1], tau.dtype
    tau, arm = jnp.pad(tau, ((0, 1), (0, 0))), jnp.pad(model.armature, (0, 1))[:, None]
    root = sw.root

    def diagonal(level):  # D's added diagonal (armature, 1 for padding), taken once per call
        return arm[level.dofs] + jnp.asarray(level.pad, dtype)[..., None]

    def backward(acc, inertia, pA, c, S, dofs, diagonal, P):  # the carry: what the children pass to each slot
        # the body's 6 x 6 inertia built here, where XLA fuses it into the sum (not stored per level)
        IA, pA = inertia_matrix(*inertia) + acc[0], pA + acc[1]
        U, Dinv, u = _project(IA, pA, S, gather(tau, dofs), diagonal)
        Ia, pa = _articulated(IA, pA, c, U, Dinv, u)
        return (to_parents(P, Ia), to_parents(P, pa)), (U, Dinv, u)

    zero = lambda W: (jnp.zeros((W, 6, 6, C), dtype), jnp.zeros((W, 6, C), dtype))  # noqa: E731
    xs = [(b.inertia, b.p_bias, b.c, b.S, seg.dofs, diagonal(seg)) for b, seg in zip(rest, sw.segments)]
    acc, saved = sweep_up(model, backward, zero, xs)
    IA0 = inertia_matrix(*b0.inertia) + (acc[0] if rest else 0.0)
    pA0 = b0.p_bias + (acc[1] if rest else 0.0)
    root_terms = _project(IA0, pA0, b0.S, gather(tau, root.dofs), diagonal(root))
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
