"""Articulated-body algorithm: forward dynamics qdd = M(q)^-1 (tau - h(q, qd) + J^T f_ext) in O(n).

Featherstone, RBDA Table 7.1, written in world coordinates (as Pinocchio does), where the
articulated inertias of children add to their parent's without a change of frame, and run
level by level over the tree (``model.tree``): one backward pass for the articulated
inertias, one forward pass for the accelerations. Joints with several coordinates are handled
with their full (w x w) ``D = S^T I^A S``; rows of shorter joints in a level are padded with
zero motion and ``D = 1`` so that they produce exactly zero.
"""

from __future__ import annotations

import jax.numpy as jnp

from .. import spatial
from ..checks import check_configuration, check_vector
from ..kinematics import tree_kinematics
from ..model.model import Model
from ..model.tree import add_to_parents, gather_level, parent_rows
from .bodies import body_terms, gravity_acceleration


def _inverse(D):
    """Inverse of a batch of small SPD matrices (scalar division for one coordinate)."""
    if D.shape[-1] == 1:
        return 1.0 / D
    return jnp.linalg.inv(D)


def aba_from(model: Model, tk, q, qd, tau, f_ext=None):
    """ABA on precomputed tree kinematics (no input checks)."""
    topo = model.topology
    t = body_terms(model, tk, q, qd, f_ext)
    IA0 = spatial.inertia_matrix(*t.inertia)
    zero = jnp.zeros((1,), tau.dtype)
    S_pad = jnp.concatenate([tk.S, jnp.zeros((1, 6), tk.S.dtype)])
    tau_pad = jnp.concatenate([tau, zero])
    arm_pad = jnp.concatenate([model.armature, zero])
    levels = topo.levels

    # backward pass, leaves to root
    saved = [None] * len(levels)
    acc = None
    for d in range(len(levels) - 1, -1, -1):
        lv = levels[d]
        IA, pA, c = gather_level(lv, (IA0, t.p, t.c))
        if acc is not None:
            IA, pA = IA + acc[0], pA + acc[1]
        S = S_pad[lv.dofs]  # (n, w, 6)
        U = jnp.sum(IA[:, None, :, :] * S[:, :, None, :], axis=-1)  # U_a = I^A S_a
        D = jnp.sum(S[:, :, None, :] * U[:, None, :, :], axis=-1)  # D_ab = S_a . U_b
        D = D + jnp.eye(D.shape[-1], dtype=D.dtype) * (arm_pad[lv.dofs] + lv.pad)[:, :, None]
        u = tau_pad[lv.dofs] - jnp.sum(S * pA[:, None, :], axis=-1)  # u = tau - S^T p^A
        Dinv = _inverse(D)
        saved[d] = (S, U, Dinv, u, c)
        if d > 0:
            W = jnp.sum(Dinv[:, :, :, None] * U[:, None, :, :], axis=2)  # D^-1 U^T
            Ia = IA - jnp.sum(U[:, :, :, None] * W[:, :, None, :], axis=1)  # I^A - U D^-1 U^T
            Dinv_u = jnp.sum(Dinv * u[:, None, :], axis=-1)
            pa = pA + spatial.matvec(Ia, c) + jnp.sum(U * Dinv_u[:, :, None], axis=1)
            acc = add_to_parents(lv, len(levels[d - 1].bodies), (Ia, pa))
        else:
            acc = None

    # forward pass, root to leaves
    qdds, a_prev = [], None
    for d, lv in enumerate(levels):
        S, U, Dinv, u, c = saved[d]
        a_par = gravity_acceleration(model)[None, :] if d == 0 else parent_rows(lv, a_prev)
        a1 = a_par + c
        qdd = jnp.sum(Dinv * (u - jnp.sum(U * a1[:, None, :], axis=-1))[:, None, :], axis=-1)
        a_prev = a1 + jnp.sum(S * qdd[:, :, None], axis=1)
        qdds.append(qdd.reshape(-1))
    return jnp.concatenate(qdds)[topo.level_dof_order]


def aba(model: Model, q, qd, tau, f_ext=None):
    """Joint accelerations (nv,) under torques ``tau`` at state (q, qd).

    **Arguments:** ``q`` (nq,), ``qd`` (nv,), ``tau`` (nv,); ``f_ext`` (nbodies, 6): optional
    external wrench on each body, ``(force, moment about the body origin)`` in body axes.
    """
    q = check_configuration(model, q)
    qd, tau = check_vector(model, qd, "qd"), check_vector(model, tau, "tau")
    return aba_from(model, tree_kinematics(model, q), q, qd, tau, f_ext)
