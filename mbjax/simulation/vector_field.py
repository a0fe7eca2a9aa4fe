"""The right-hand side of the equations of motion as a diffrax vector field.

Any formulation plugs in through the dynamics protocol (:mod:`mbjax.dynamics.protocol`):
``simulate(..., method=...)`` takes a name of :data:`mbjax.methods.METHODS`, an
:class:`mbjax.Dynamics` (e.g. :class:`mbjax.ClosedChainDynamics`) or a plain function
``fn(model, q, qd, tau) -> qdd`` (see :func:`mbjax.methods.as_dynamics`). It is called with a
normalised q and, when ``simulate`` is given ``f_ext``, with those wrenches (nbodies, 6).
"""

from __future__ import annotations

import jax.numpy as jnp

from ..configuration import normalize
from ..dynamics.passive import passive_forces_from
from ..dynamics.rnea import rnea_from
from ..kinematics import tree_kinematics
from ..configuration import configuration_rate


def evaluate(fn, t, q, qd):
    """``fn(t, q, qd)`` for a callable (controller, external wrench), ``fn`` for a constant."""
    return fn(t, q, qd) if callable(fn) else fn


def vector_field(t, y, args):
    """d/dt (q, qd) = (G(q) qd, dynamics(model, normalize(q), qd, tau(t, q, qd) + tau_passive)),
    with ``tau_passive`` the model's joint springs and dampers (:func:`mbjax.passive_forces`).

    ``args = (model, dynamics, controller, f_ext)``, ``dynamics`` an :class:`mbjax.Dynamics`; the controller and ``f_ext`` are arrays
    or callables of ``(t, q, qd)`` (``None`` for no external wrench). ``y = (q, qd, work)``
    also integrates the work of those forces: d work / dt = qd . (tau + tau_passive + J^T f_ext).
    """
    model, dynamics, controller, f_ext = args
    q, qd = y[:2]
    qn = normalize(model, q)
    # the joints' springs and dampers (from MJCF or URDF <dynamics>) act in every simulation
    tau = evaluate(controller, t, qn, qd)
    if jnp.shape(tau) != (model.nv,):
        raise ValueError(
            f"tau has shape {jnp.shape(tau)}; model {model.name!r} expects ({model.nv},), one torque per velocity "
            "coordinate (a controller tau(t, q, qd) must return that shape too)"
        )
    tau = tau + passive_forces_from(model, qn, qd)
    f = None if f_ext is None else evaluate(f_ext, t, qn, qd)
    qdd = dynamics(model, qn, qd, tau, f)
    rates = (configuration_rate(model, q, qd), qdd)
    if len(y) == 2:
        return rates
    if f is not None:  # J^T f_ext = rnea without it - rnea with it
        tk, zero = tree_kinematics(model, qn), jnp.zeros_like(qd)
        tau = tau + rnea_from(model, tk, qn, qd, zero) - rnea_from(model, tk, qn, qd, zero, f)
    return rates + (qd @ tau,)
