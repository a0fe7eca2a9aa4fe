"""Composite-rigid-body algorithm: the joint-space mass matrix M(q), and momentum matrices."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..checks import checked
from ..cholesky import spd_solve
from ..compilation import jit
from ..kinematics import TreeKinematics, tree_kinematics
from ..model.model import Model
from ..model.tree import take
from .bodies import world_inertias
from .levels import coordinates, gather, inertia_apply, joints, level_bodies, pad, routed, sweep_up, to_parents
from .rnea import rnea_from


def composite_momentum(model: Model, tk: TreeKinematics):
    """``F_k = I^C_{body(k)} S_k`` (nv, 6): momentum of the subtree moved by coordinate k.

    World inertias add, so the composite inertias are one product with the ancestor matrix:
    I^C = A^T I (Featherstone RBDA Sec. 6.2 in absolute form; Mufti's T_2, Mufti 1983 Eq. 25).
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
    topo = model.topology
    F = composite_momentum(model, tk)
    P = F @ tk.S.T
    body = topo.dof_body
    same = body[:, None] == body[None, :]
    strict = (topo.ancestors[body][:, body] > 0) & ~same  # body(l) a proper ancestor of body(k)
    L = jnp.where(strict, P, 0.0)
    return L + L.T + jnp.where(same, 0.5 * (P + P.T), 0.0) + jnp.diag(model.armature)


def cholesky_dynamics(model: Model, q, qd, tau, f_ext=None):
    """Forward dynamics of one state through the mass matrix: qdd = M^-1 (tau - h), with
    h = RNEA(q, qd, 0, f_ext) and M by CRBA, both in matrix form: (qdd, M).

    O(nv^3) instead of the ABA's O(nv), but on XLA:CPU, for one state, a few large products
    and one factorisation launch far fewer kernels than the ABA's three level sweeps: 2-2.6x
    faster on ur5 to talos_reduced (benchmarks/README.md). Batches use the sweeps.
    """
    tk = tree_kinematics(model, q)
    h = rnea_from(model, tk, q, qd, jnp.zeros_like(qd), f_ext)
    M = mass_matrix_from(model, tk)
    return spd_solve(M, tau - h), M


def crba_kernel(model: Model, q):
    """The mass matrix's structurally nonzero entries, each once (``Topology.mass_entries``),
    then a zero: (E + 1, C) for C states in the last axis (q (nq, C)); :func:`unpack` makes
    M of them. From the level sweep's poses and subspaces (:mod:`.levels`), in world
    coordinates (RBDA Table 6.2, absolute form):

      I^C_i = I_i + sum over the children j of I^C_j                      (leaves to root)
      F_k = I^C_{body(k)} S_k,   M[k, l] = M[l, k] = S_l . F_k   (body(l) body(k) or an ancestor)

    World inertias add as they are, (m, h, I_O), and the composite masses do not depend on q.
    """
    topo = model.topology
    C, dtype = q.shape[-1], q.dtype
    if topo.sweep is None:  # nothing moves
        return jnp.zeros((1, C), dtype)
    b0, rest = level_bodies(model, joints(model, q))
    mC = pad(jnp.asarray(topo.ancestors.T, dtype) @ model.mass)  # composite masses (nb + 1,), independent of q

    def momentum(body, h, IO, S):  # F = I^C S for each coordinate of a level's bodies: (W, w, 6, C)
        return inertia_apply(gather(mC, body)[:, None, None, None], h[:, None], IO[:, None], S)

    def composite(acc, h, IO, S, body, P):
        hC, IOC = h + acc[0], IO + acc[1]
        return (to_parents(P, hC), to_parents(P, IOC)), momentum(body, hC, IOC, S)

    zero = lambda W: (jnp.zeros((W, 3, C), dtype), jnp.zeros((W, 3, 3, C), dtype))  # noqa: E731
    acc, F = sweep_up(model, composite, zero, [(b.inertia[1], b.inertia[2], b.S, seg.body)
                                               for b, seg in zip(rest, topo.sweep.segments)])
    h0, IO0 = b0.inertia[1:]
    F0 = momentum(np.asarray(topo.sweep.root.bodies), *((h0, IO0) if not rest else (h0 + acc[0], IO0 + acc[1])), b0.S)
    F, S = coordinates(model, F0, F), coordinates(model, b0.S, [b.S for b in rest])
    k, l, _ = topo.mass_entries
    # S_l . F_k as a chain of six products, not a reduction: XLA fuses it with the gathers, where
    # its reduction was left to a YNNPACK call (1.4-1.7x slower without YNNPACK's reductions)
    Fk, Sl = gather(F, k), gather(S, l)
    M = sum(Fk[:, i] * Sl[:, i] for i in range(6)) + jnp.where(k == l, gather(model.armature, k), 0.0)[:, None]
    return jnp.concatenate([M, jnp.zeros((1, C), dtype)])


def unpack(model: Model, entries, axis: int = -1):
    """M (..., nv, nv) of :func:`crba_kernel`'s entries (..., E + 1), states first; with
    ``axis=0``, M (nv, nv, C) of the kernel's own layout (E + 1, C), states last.

    Outside the chunks' loop, where XLA writes M in its own order: a chunk's kernel that wrote
    its M itself gathered twelve scattered numbers for each of its nv^2 entries, in the
    states-first order of the batch (talos_reduced: 16-19 -> 10-12 us per state)."""
    return jnp.take(entries, model.topology.mass_entries[2], axis=axis)


#: the mass matrix without input checks: the matrix form for one state (fewer kernels), the
#: batch-minor :func:`crba_kernel` when vmapped
crba_fast = routed(crba_kernel, lambda model, q: mass_matrix_from(model, tree_kinematics(model, q)), unpack)


@jit(one_state=True)
def crba(model: Model, q):
    """The joint-space mass matrix M(q) (nv, nv), symmetric positive definite.

    Includes the joint armature on its diagonal.
    """
    return checked(model, lambda model, q, f_ext: crba_fast(model, q), q, {})
