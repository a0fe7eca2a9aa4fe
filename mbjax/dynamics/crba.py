"""Composite-rigid-body algorithm: the joint-space mass matrix M(q), and momentum matrices."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import spatial
from ..checks import check_state
from ..kinematics import TreeKinematics, tree_kinematics
from ..model.model import Model
from ..model.tree import take
from .bodies import world_inertias
from .levels import coordinates, dot, joints, level_bodies, mv, routed, to_parents


def composite_momentum(model: Model, tk: TreeKinematics):
    """``F_k = I^C_{body(k)} S_k`` (nv, 6): momentum of the subtree moved by coordinate k.

    World inertias add, so the composite inertias are one product with the ancestor matrix:
    I^C = A^T I (Featherstone RBDA Sec. 6.2 in absolute form; Mufti's T_2, seed 000 Eq. 25).
    """
    topo = model.topology
    m, h, IO = world_inertias(model, tk)
    flat = jnp.concatenate([m[:, None], h, IO.reshape(-1, 9)], axis=-1)
    IC = jnp.asarray(topo.ancestors.T, flat.dtype) @ flat
    body = topo.dof_body
    ICk = take(IC, body)
    return spatial.inertia_apply(ICk[:, 0], ICk[:, 1:4], ICk[:, 4:].reshape(-1, 3, 3), tk.S)


def momentum_matrix_from(model: Model, tk: TreeKinematics):
    """(6, nv) map from qd to the system's spatial momentum about the world origin."""
    return composite_momentum(model, tk).T


def mass_matrix_from(model: Model, tk: TreeKinematics):
    """M[k, l] = S_l . F_k when body(l) is body(k) or one of its ancestors; symmetric."""
    return _from_products(model, composite_momentum(model, tk) @ tk.S.T)


def _from_products(model: Model, P):
    """M from all products ``P[k, l] = S_l . F_k`` (nv, nv, ...): the entries whose body(l) is
    body(k) or one of its ancestors, mirrored (symmetrised within a joint), plus armature."""
    topo = model.topology
    body = topo.dof_body
    extra = (None,) * (P.ndim - 2)
    same = (body[:, None] == body[None, :])
    strict = (topo.ancestors[body][:, body] > 0) & ~same  # body(l) a proper ancestor of body(k)
    same, strict = same[(...,) + extra], strict[(...,) + extra]
    PT = jnp.swapaxes(P, 0, 1)
    L = jnp.where(strict, P, 0.0)
    arm = jnp.diag(model.armature)[(...,) + extra]
    return L + jnp.swapaxes(L, 0, 1) + jnp.where(same, 0.5 * (P + PT), 0.0) + arm


def crba_kernel(model: Model, q):
    """M(q) (nv, nv, C) for C states in the last axis of q (nq, C): composite inertias
    I^C_i = I_i + sum_{children} I^C_j leaves to root (:mod:`.levels`, RBDA Table 6.2 in world
    coordinates), F_k = I^C_{body(k)} S_k, and M[k, l] = S_l . F_k."""
    sw = model.topology.sweep
    if sw is None:
        return jnp.zeros((0, 0) + q.shape[1:], q.dtype)
    b0, rest = level_bodies(model, joints(model, q))
    n0 = len(sw.root.bodies)
    IC0, Fs, S = b0.inertia, None, b0.S
    if rest is not None:
        P = jnp.asarray(sw.parent, q.dtype)

        def backward(acc, xs):
            inertia, S, P = xs
            IC = inertia + acc
            return to_parents(P, IC), mv(IC[:, None], S)

        acc, Fs = jax.lax.scan(backward, jnp.zeros_like(rest.inertia[0]), (rest.inertia, rest.S, P), reverse=True)
        IC0 = IC0 + acc[:n0]
        S = coordinates(model, b0.S, rest.S)
    else:
        S = coordinates(model, b0.S, None)
    F = coordinates(model, mv(IC0[:, None], b0.S), Fs)  # (nv, 6, C)
    return _from_products(model, dot(F[:, None], S[None]))


#: the mass matrix without input checks: batch-minor kernel for values, derivatives through
#: ``mass_matrix_from``
crba_fast = routed(crba_kernel, lambda model, q: mass_matrix_from(model, tree_kinematics(model, q)))


@jax.jit
def crba(model: Model, q):
    """The joint-space mass matrix M(q) (nv, nv), symmetric positive definite.

    Includes the joint armature on its diagonal.
    """
    q = check_state(model, q)
    return crba_fast(model, q)
