"""Articulated-body algorithm: forward dynamics qdd = M(q)^-1 (tau - h(q, qd) + J^T f_ext) in O(n).

Batches run the passes of :mod:`.articulated` (batch-minor level sweeps); a single state is
solved through the mass matrix (:func:`.crba.cholesky_dynamics`, fewer kernel launches). This
module adds the input checks and the derivative rule.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..checks import checked, singular_accelerations
from ..cholesky import cho_inverse, cholesky, spd_solve
from ..compilation import jit, loops_hoisted
from ..configuration import difference_tangent
from ..fused import fused
from ..kinematics import tree_kinematics
from ..model.model import Model
from ..tangents import instantiate, is_zero
from .articulated import aba_kernel
from .crba import cholesky_dynamics
from .derivatives import FUSED_BELOW_NV, forward_derivatives_kernel, state_derivatives
from .levels import batch_rule, routed
from .rnea import rnea_from


def _aba_one(model: Model, q, qd, tau, f_ext=None):
    """One state: through the mass matrix (fewer kernels than the sweeps with C = 1)."""
    if model.topology.sweep is None:  # nothing moves
        return jnp.zeros_like(tau)
    return cholesky_dynamics(model, q, qd, tau, f_ext)[0]


_aba = batch_rule(aba_kernel, _aba_one)


@jax.custom_jvp
def aba_from(model: Model, q, qd, tau, f_ext=None):
    """ABA without input checks (``f_ext`` (nb, 6) or None), differentiated analytically:
    see :func:`_aba_jvp`. Vmapped, it runs on the batch-minor layout (:mod:`.levels`)."""
    return _aba(model, q, qd, tau, f_ext)


def _accelerations_and_state_derivatives(model: Model, q, qd, tau, f_ext=None):
    """One state: qdd and M through the mass matrix, whose factor also gives M^-1 (not
    differentiated), and the state derivatives."""
    if model.topology.sweep is None:  # nothing moves
        dID_dq, dID_dqd, M = state_derivatives(model, q, qd, tau, f_ext)
        return jnp.zeros_like(tau), dID_dq, dID_dqd, M, M
    qdd, M = cholesky_dynamics(model, q, qd, tau, f_ext)
    M_inv = cho_inverse(cholesky(jax.lax.stop_gradient(M)))
    return (qdd,) + state_derivatives(model, q, qd, qdd, f_ext)[:2] + (M, M_inv)


#: (qdd, dID/dq, dID/dqd, M, M^-1) under torques tau: vmapped, one kernel whose derivative
#: sweeps also run the ABA's accelerations and M^-1 (:func:`.derivatives.forward_derivatives_kernel`)
#: instead of a batched ABA, the derivatives' kernel and a batched factorisation
_with_state_derivatives = routed(forward_derivatives_kernel, _accelerations_and_state_derivatives, derivatives=True)


def _aba_jvp(primals, tangents):
    """Derivative of forward dynamics through inverse dynamics (Carpentier & Mansard 2018).

    tau = ID(model, q, qd, qdd(model, q, qd, tau)) holds identically, so
    d qdd = M^-1 (d tau - dID), where dID is the derivative of RNEA at fixed qdd. Along the
    state it is the analytic d ID / d(q tangent, qd) of :func:`.derivatives.state_derivatives`
    (which also gives M): it depends on the primals only, so ``jax.jacfwd`` (nv tangents at
    once) computes it once and multiplies; vmapped, the accelerations come from the same kernel
    (:data:`_with_state_derivatives`); for one state of a model under ``FUSED_BELOW_NV``
    coordinates, with mbjax's flags, that part and M^-1 are one function (:func:`mbjax.fused.fused`),
    the solve a product with M^-1: ``jax.jacfwd`` of ur5's ``aba`` in a plain ``jax.jit`` 139 ->
    35 kernels and no LAPACK call, 49-54 -> 35 µs, a gradient through it 43-45 -> 29 µs (session
    45). Along the model and ``f_ext`` it is the forward mode
    of RNEA's matrix form. A q tangent is mapped to the tangent space by the derivative of
    :func:`mbjax.difference` (:func:`mbjax.configuration.difference_tangent`; quaternions: the
    body-frame angular velocity).
    """
    model, q, qd, tau, f_ext = primals
    dmodel, dq, dqd, dtau, df = tangents
    # loops_hoisted, not one_function: under jax.jacfwd the tangents are vmapped but the primals
    # are not; a vmap over the states reaches the plain function through fused's batching rule
    one_function = loops_hoisted() and model.nv < FUSED_BELOW_NV
    qdd, dID_dq, dID_dqd, M, M_inv = (fused(_with_state_derivatives) if one_function else _with_state_derivatives)(
        model, q, qd, tau, f_ext)
    rhs = jnp.zeros_like(qdd) if is_zero(dtau) else dtau
    if not is_zero(dq):
        rhs = rhs - dID_dq @ difference_tangent(model, q, dq)
    if not is_zero(dqd):
        rhs = rhs - dID_dqd @ dqd
    if not (is_zero(dmodel) and is_zero(df)):
        def inverse_dynamics(m, f):
            return rnea_from(m, tree_kinematics(m, q), q, qd, qdd, f)

        rhs = rhs - jax.jvp(inverse_dynamics, (model, f_ext), (instantiate(dmodel), instantiate(df)))[1]
    return qdd, spd_solve(M, rhs, inverse=M_inv, factorise=not one_function)


aba_from.defjvp(_aba_jvp, symbolic_zeros=True)


@jit(one_state=True)
def aba(model: Model, q, qd, tau, f_ext=None):
    """Joint accelerations (nv,) under torques ``tau`` at state (q, qd).

    **Arguments:** ``q`` (nq,), ``qd`` (nv,), ``tau`` (nv,); ``f_ext`` (nbodies, 6): optional
    external wrench on each body, ``(force, moment about the body origin)`` in body axes.

    Derivatives (``jax.grad``, ``jax.jacfwd``, with respect to the state, the torques, the
    wrenches and every model parameter) are analytic: see :func:`_aba_jvp`.
    """
    return checked(model, aba_from, q, {"qd": qd, "tau": tau}, f_ext,
                   lambda qdd: [singular_accelerations(qdd)])
