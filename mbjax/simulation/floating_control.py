"""Computed-torque control of the arm of a free-floating robot (Wilde et al. 2018), base unactuated."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ..configuration import difference
from ..formulations.free_floating import check_free_floating, floating_inverse_dynamics, to_floating
from ..model.model import Model


class FloatingComputedTorque(eqx.Module):
    """Joint torques that make the arm follow ``reference`` while the base floats freely.

    The commanded arm acceleration ``phidd_ref + Kp e + Kd e'`` (``e = phi_ref (-) phi``,
    ``e' = phid_ref - phid``) is imposed through :func:`mbjax.floating_inverse_dynamics`,
    which accounts for the base's reaction (Eq. 39 solved with the joint accelerations
    given), so with an exact model the error obeys ``e'' + Kd e' + Kp e = 0``. The base gets
    no torque: momentum is conserved.

    ``reference(t) -> (phi_ref (nq - 7,), phid_ref (n,), phidd_ref (n,))``: the arm's part of
    the configuration, velocity and acceleration (e.g. a
    :class:`mbjax.simulation.controllers.PathReference` through arm knots).
    """

    model: Model
    kp: jax.Array
    kd: jax.Array
    reference: eqx.Module

    def __init__(self, model, kp, kd, reference):
        check_free_floating(model)
        self.model = model
        self.kp = jnp.asarray(kp, model.dtype)
        self.kd = jnp.asarray(kd, model.dtype)
        self.reference = reference

    def __call__(self, t, q, qd):
        phi_ref, phid_ref, phidd_ref = self.reference(t)
        e = difference(self.model, q, jnp.concatenate([q[:7], phi_ref]))[6:]
        cmd = phidd_ref + self.kp * e + self.kd * (phid_ref - qd[6:])
        _, tau = floating_inverse_dynamics(self.model, q, to_floating(self.model, q, qd), cmd)
        return jnp.concatenate([jnp.zeros(6, tau.dtype), tau])
