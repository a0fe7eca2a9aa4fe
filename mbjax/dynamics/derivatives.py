"""Derivatives of inverse and forward dynamics with respect to the state, in Pinocchio's
conventions (``computeRNEADerivatives``, ``computeABADerivatives``).

Derivatives with respect to q are taken along the tangent space: column k is
d/de f(q (+) e e_k) at e = 0, with (+) :func:`mbjax.integrate` (so a free joint's columns are
body-frame twists, as in Pinocchio).

Forward dynamics follows from inverse dynamics (Carpentier & Mansard, "Analytical derivatives
of rigid body dynamics algorithms", RSS 2018, Sec. IV): differentiating
ID(q, qd, FD(q, qd, tau)) = tau gives

    d qdd / d(q, qd) = -M^-1 d ID / d(q, qd) at qdd = FD(q, qd, tau),   d qdd / d tau = M^-1.

d ID / d(q, qd) comes from forward mode through RNEA, all 2 nv unit tangents at once. Vmapped,
everything runs on the batch-minor kernels (:mod:`.levels`): the tangents form one more
leading axis, the states stay in the last one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..checks import check_external_forces, check_state
from ..configuration import integrate_from
from ..kinematics import tree_kinematics
from ..model.model import Model
from .aba import aba_from, aba_kernel
from .crba import mass_matrix_from
from .levels import routed
from .rnea import rnea_from, rnea_kernel


def _state_jacobians(inverse_dynamics, integrate, model: Model, q, qd, qdd, f_ext):
    """d ID / d(q tangent) and d ID / d qd, each (nv, nv, ...), by ``jax.jvp`` along the 2 nv
    unit tangents (batched with ``jax.vmap``; ``...``: the states of a kernel, or none)."""
    nv = model.nv
    tail = qd.shape[1:]
    eye = jnp.broadcast_to(jnp.eye(nv, dtype=qd.dtype)[(...,) + (None,) * len(tail)], (nv, nv) + tail)
    zero = jnp.zeros_like(eye)
    tangents = (jnp.concatenate([eye, zero]), jnp.concatenate([zero, eye]))  # (2 nv, nv, ...)

    def f(e, v):
        return inverse_dynamics(model, integrate(q, e), v, qdd, f_ext)

    cols = jax.vmap(lambda de, dv: jax.jvp(f, (jnp.zeros_like(qd), qd), (de, dv))[1])(*tangents)
    cols = jnp.moveaxis(cols, 0, 1)  # (nv out, 2 nv tangents, ...)
    return cols[:, :nv], cols[:, nv:]


# ------------------------------------------------------------------- one state, plain
def _integrate_one(model):
    return lambda q, e: integrate_from(model, q, e)


def _rnea_one(model, q, qd, qdd, f_ext):
    return rnea_from(model, tree_kinematics(model, q), q, qd, qdd, f_ext)


def _rnea_derivatives_plain(model: Model, q, qd, qdd, f_ext=None):
    dq, dv = _state_jacobians(_rnea_one, _integrate_one(model), model, q, qd, qdd, f_ext)
    return jnp.stack([dq, dv, mass_matrix_from(model, tree_kinematics(model, q))])


def _aba_derivatives_plain(model: Model, q, qd, tau, f_ext=None):
    qdd = aba_from(model, q, qd, tau, f_ext)
    dq, dv = _state_jacobians(_rnea_one, _integrate_one(model), model, q, qd, qdd, f_ext)
    M = mass_matrix_from(model, tree_kinematics(model, q))
    return _forward_blocks(M, dq, dv)


def _forward_blocks(M, dq, dv):
    """(-M^-1 dID/dq, -M^-1 dID/dqd, M^-1) for M (nv, nv, ...) by Cholesky."""
    lead = lambda x: jnp.moveaxis(x, (0, 1), (-2, -1))  # noqa: E731  (..., nv, nv) for LAPACK
    back = lambda x: jnp.moveaxis(x, (-2, -1), (0, 1))  # noqa: E731
    chol = jax.scipy.linalg.cho_factor(lead(M), lower=True)
    Minv = jax.scipy.linalg.cho_solve(chol, jnp.broadcast_to(jnp.eye(M.shape[0], dtype=M.dtype), lead(M).shape))
    return jnp.stack([-back(Minv @ lead(dq)), -back(Minv @ lead(dv)), back(Minv)])


# ------------------------------------------------------------- batch-minor kernels
def _integrate_states(model):
    """``q (+) e`` for C states in the last axis (the joint types work on rows)."""
    return jax.vmap(lambda q, e: integrate_from(model, q, e), in_axes=(-1, -1), out_axes=-1)


def _mass_matrices(model, q):
    """M (nv, nv, C) for C states in the last axis of q."""
    return jax.vmap(lambda q: mass_matrix_from(model, tree_kinematics(model, q)), in_axes=-1, out_axes=-1)(q)


def _rnea_derivatives_kernel(model: Model, q, qd, qdd, f_ext=None):
    dq, dv = _state_jacobians(rnea_kernel, _integrate_states(model), model, q, qd, qdd, f_ext)
    return jnp.stack([dq, dv, _mass_matrices(model, q)])


def _aba_derivatives_kernel(model: Model, q, qd, tau, f_ext=None):
    qdd = aba_kernel(model, q, qd, tau, f_ext)
    dq, dv = _state_jacobians(rnea_kernel, _integrate_states(model), model, q, qd, qdd, f_ext)
    return _forward_blocks(_mass_matrices(model, q), dq, dv)


_rnea_derivatives = routed(_rnea_derivatives_kernel, _rnea_derivatives_plain)
_aba_derivatives = routed(_aba_derivatives_kernel, _aba_derivatives_plain)


def _call(fn, model, q, qd, x, f_ext):
    out = fn(model, q, qd, x, f_ext)
    return out[0], out[1], out[2]


@jax.jit
def rnea_derivatives(model: Model, q, qd, qdd, f_ext=None):
    """Partial derivatives of inverse dynamics tau = ID(q, qd, qdd, f_ext).

    **Arguments:** ``q`` (nq,), ``qd`` (nv,), ``qdd`` (nv,); ``f_ext`` (nbodies, 6) optional,
    as in :func:`mbjax.rnea`.

    **Returns:** ``(dtau_dq, dtau_dqd, dtau_dqdd)``, each (nv, nv); the q derivative along the
    tangent space, and ``dtau_dqdd = M(q)`` (Pinocchio's ``computeRNEADerivatives``).
    """
    q, qd, qdd = check_state(model, q, qd=qd, qdd=qdd)
    return _call(_rnea_derivatives, model, q, qd, qdd, check_external_forces(model, f_ext))


@jax.jit
def aba_derivatives(model: Model, q, qd, tau, f_ext=None):
    """Partial derivatives of forward dynamics qdd = FD(q, qd, tau, f_ext).

    **Arguments:** as :func:`mbjax.aba`.

    **Returns:** ``(dqdd_dq, dqdd_dqd, dqdd_dtau)``, each (nv, nv); the q derivative along the
    tangent space, and ``dqdd_dtau = M(q)^-1`` (Pinocchio's ``computeABADerivatives``).
    """
    q, qd, tau = check_state(model, q, qd=qd, tau=tau)
    return _call(_aba_derivatives, model, q, qd, tau, check_external_forces(model, f_ext))
