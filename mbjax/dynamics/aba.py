"""Articulated-body algorithm: forward dynamics qdd = M(q)^-1 (tau - h(q, qd) + J^T f_ext) in O(n).

Featherstone, RBDA Table 7.1, written in world coordinates (as Pinocchio does), where the
articulated inertias of children add to their parent's without a change of frame, and run
level by level over the tree (``model.tree``): one backward pass for the articulated
inertias, one forward pass for the accelerations. Joints with several coordinates are handled
with their full (w x w) ``D = S^T I^A S``; rows of shorter joints in a level are padded with
zero motion and ``D = 1`` so that they produce exactly zero.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import spatial
from ..checks import check_state
from ..kinematics import tree_kinematics
from ..model.model import Model
from ..model.tree import take
from .bodies import body_terms, external_forces_or_zero, gravity_acceleration
from .crba import mass_matrix_from
from .rnea import rnea_from


def _inverse(D):
    """Inverse of a batch of small SPD matrices (scalar division for one coordinate)."""
    if D.shape[-1] == 1:
        return 1.0 / D
    return jnp.linalg.inv(D)


def _project(IA, pA, S, tau, armature, pad):
    """Joint-space quantities of one level (RBDA Table 7.1, lines 11-14).

    U_a = I^A S_a,  D = S^T I^A S (+ armature),  u = tau - S^T p^A.
    Padding rows of S are zero and get D = 1, so they contribute nothing.
    """
    U = jnp.einsum("...ij,...aj->...ai", IA, S)
    D = jnp.einsum("...ai,...bi->...ab", S, U)
    D = D + jnp.eye(D.shape[-1], dtype=D.dtype) * (armature + pad)[..., :, None]
    u = tau - jnp.einsum("...ai,...i->...a", S, pA)
    return U, _inverse(D), u


def _articulated(IA, pA, c, U, Dinv, u):
    """What a body passes to its parent: I^a = I^A - U D^-1 U^T, p^a = p^A + I^a c + U D^-1 u."""
    W = jnp.einsum("...ab,...bi->...ai", Dinv, U)
    Ia = IA - jnp.einsum("...ai,...aj->...ij", U, W)
    # kept exactly symmetric: U = I^A S assumes it, and rounding asymmetry fed back into the
    # parent's I^A grows level by level (10^-1 relative error on a 48-body ball-joint chain)
    Ia = 0.5 * (Ia + jnp.swapaxes(Ia, -1, -2))
    pa = pA + spatial.matvec(Ia, c) + jnp.einsum("...ai,...a->...i", W, u)
    return Ia, pa


def _accelerate(a_parent, c, S, U, Dinv, u):
    """qdd = D^-1 (u - U^T a'),  a = a' + S qdd,  with a' = a_parent + c (RBDA Table 7.1)."""
    a1 = a_parent + c
    qdd = jnp.einsum("...ab,...b->...a", Dinv, u - jnp.einsum("...ai,...i->...a", U, a1))
    return qdd, a1 + jnp.einsum("...ai,...a->...i", S, qdd)


def _sweep(model: Model, tk, q, qd, tau, f_ext):
    """ABA on precomputed tree kinematics.

    The levels below the roots are swept with ``lax.scan`` (leaves to root, then root to
    leaves) over a padded layout; the root level, whose joints may be wider (a free base),
    is handled on its own.
    """
    sw = model.topology.sweep
    if sw is None:  # nothing moves
        return jnp.zeros(0, tau.dtype)
    t = body_terms(model, tk, q, qd, f_ext)
    pad_row = lambda x: jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)])  # noqa: E731
    IA0 = pad_row(spatial.inertia_matrix(*t.inertia))
    p0, c0, S, tau_p, arm = pad_row(t.p), pad_row(t.c), pad_row(tk.S), pad_row(tau), pad_row(model.armature)
    P = jnp.asarray(sw.parent, tau.dtype)
    W = P.shape[-1] if P.size else len(sw.root.bodies)

    # backward sweep, leaves to root: the carry holds what the children pass to each slot
    def backward(acc, x):
        body, dofs, pad, parent = x
        IA, pA, c = take(IA0, body) + acc[0], take(p0, body) + acc[1], take(c0, body)
        U, Dinv, u = _project(IA, pA, take(S, dofs), take(tau_p, dofs), take(arm, dofs), pad)
        Ia, pa = _articulated(IA, pA, c, U, Dinv, u)
        up = (jnp.einsum("kj,k...->j...", parent, Ia), jnp.einsum("kj,k...->j...", parent, pa))
        return up, (U, Dinv, u)

    zero = (jnp.zeros((W, 6, 6), tau.dtype), jnp.zeros((W, 6), tau.dtype))
    xs = (sw.body, sw.dofs, jnp.asarray(sw.pad, tau.dtype), P)
    acc, saved = jax.lax.scan(backward, zero, xs, reverse=True)

    # the root level
    root = sw.root
    n0, ib = len(root.bodies), root.body_index
    IA, pA, c = take(IA0, ib) + acc[0][:n0], take(p0, ib) + acc[1][:n0], take(c0, ib)
    Sr = take(S, root.dofs)
    U, Dinv, u = _project(IA, pA, Sr, take(tau_p, root.dofs), take(arm, root.dofs), jnp.asarray(root.pad, tau.dtype))
    qdd0, a0 = _accelerate(gravity_acceleration(model), c, Sr, U, Dinv, u)

    # forward sweep, root to leaves: the carry holds the accelerations of the level above
    def forward(a_prev, x):
        body, dofs, parent, (U, Dinv, u) = x
        qdd, a = _accelerate(parent @ a_prev, take(c0, body), take(S, dofs), U, Dinv, u)
        return a, qdd

    a_init = jnp.zeros((W, 6), tau.dtype).at[:n0].set(a0)
    _, qdds = jax.lax.scan(forward, a_init, (sw.body, sw.dofs, P, saved))
    return take(jnp.concatenate([qdd0.reshape(-1), qdds.reshape(-1)]), sw.dof_order)


@jax.custom_jvp
def aba_from(model: Model, q, qd, tau, f_ext):
    """ABA without input checks (``f_ext`` an array, zeros for none), differentiated
    analytically: see :func:`_aba_jvp`."""
    return _sweep(model, tree_kinematics(model, q), q, qd, tau, f_ext)


@aba_from.defjvp
def _aba_jvp(primals, tangents):
    """Derivative of forward dynamics through inverse dynamics (Carpentier & Mansard 2018).

    tau = ID(model, q, qd, qdd(model, q, qd, tau)) holds identically, so
    d qdd = M^-1 (d tau - dID), where dID is the derivative of RNEA at fixed qdd along the
    tangents of (model, q, qd, f_ext). RNEA has no sequential sweep and M is factored once,
    so Jacobians of aba (jacfwd: nv tangents at once) are cheap to run and to compile.
    """
    model, q, qd, tau, f_ext = primals
    dmodel, dq, dqd, dtau, df = tangents
    tk = tree_kinematics(model, q)
    qdd = _sweep(model, tk, q, qd, tau, f_ext)

    def inverse_dynamics(m, q_, qd_, f_):
        return rnea_from(m, tree_kinematics(m, q_), q_, qd_, qdd, f_)

    _, dID = jax.jvp(inverse_dynamics, (model, q, qd, f_ext), (dmodel, dq, dqd, df))
    chol = jax.scipy.linalg.cho_factor(mass_matrix_from(model, tk))
    return qdd, jax.scipy.linalg.cho_solve(chol, dtau - dID)


@eqx.filter_jit
def aba(model: Model, q, qd, tau, f_ext=None):
    """Joint accelerations (nv,) under torques ``tau`` at state (q, qd).

    **Arguments:** ``q`` (nq,), ``qd`` (nv,), ``tau`` (nv,); ``f_ext`` (nbodies, 6): optional
    external wrench on each body, ``(force, moment about the body origin)`` in body axes.

    Derivatives (``jax.grad``, ``jax.jacfwd``, with respect to the state, the torques, the
    wrenches and every model parameter) are analytic: see :func:`_aba_jvp`.
    """
    q, qd, tau = check_state(model, q, qd=qd, tau=tau)
    return aba_from(model, q, qd, tau, external_forces_or_zero(model, f_ext, tau.dtype))
