"""The right-hand side of the equations of motion as a diffrax vector field, and the hook
through which any formulation of the dynamics plugs into :func:`mbjax.simulate`.

**The dynamics hook.** ``simulate(..., method=...)`` accepts

- a string: any ``method`` of :func:`mbjax.forward_dynamics` (``"aba"``, ``"crba"``, ...);
- a callable ``dynamics(model, q, qd, tau) -> qdd`` (nv,): another formulation (e.g. a
  free-floating momentum form, or constrained dynamics with stabilisation). It is called
  with a normalised q; when ``simulate`` is given ``f_ext`` it is passed on as the keyword
  ``f_ext=`` (nbodies, 6). Make it an ``eqx.Module`` (or a plain function) so that its
  array parameters are differentiated and batched like the model's.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from ..configuration import normalize
from ..dynamics.passive import passive_forces_from
from ..dynamics.rnea import rnea_from
from ..kinematics import tree_kinematics
from ..dynamics.terms import forward_dynamics, forward_dynamics_from
from ..configuration import configuration_rate


class ForwardDynamics(eqx.Module):
    """:func:`mbjax.forward_dynamics` with a fixed ``method``, as a dynamics hook; with
    ``checked=False`` non-finite states pass through as NaN instead of raising (for optimisers
    whose trial steps may diverge)."""

    method: str = eqx.field(static=True, default="aba")
    checked: bool = eqx.field(static=True, default=True)

    def __call__(self, model, q, qd, tau, f_ext=None):
        fn = forward_dynamics if self.checked else forward_dynamics_from
        return fn(model, q, qd, tau, f_ext, method=self.method)


def as_dynamics(method):
    """The dynamics hook for ``method`` (a forward-dynamics method name or a callable)."""
    if isinstance(method, str):
        return ForwardDynamics(method)
    if callable(method):
        return method
    raise TypeError(
        f"method must be a forward_dynamics method name such as 'aba' or 'crba', or a callable "
        f"dynamics(model, q, qd, tau) -> qdd; got {type(method).__name__}"
    )


def evaluate(fn, t, q, qd):
    """``fn(t, q, qd)`` for a callable (controller, external wrench), ``fn`` for a constant."""
    return fn(t, q, qd) if callable(fn) else fn


def vector_field(t, y, args):
    """d/dt (q, qd) = (G(q) qd, dynamics(model, normalize(q), qd, tau(t, q, qd) + tau_passive)),
    with ``tau_passive`` the model's joint springs and dampers (:func:`mbjax.passive_forces`).

    ``args = (model, dynamics, controller, f_ext)``; the controller and ``f_ext`` are arrays
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
    qdd = dynamics(model, qn, qd, tau, **({} if f is None else {"f_ext": f}))
    rates = (configuration_rate(model, q, qd), qdd)
    if len(y) == 2:
        return rates
    if f is not None:  # J^T f_ext = rnea without it - rnea with it
        tk, zero = tree_kinematics(model, qn), jnp.zeros_like(qd)
        tau = tau + rnea_from(model, tk, qn, qd, zero) - rnea_from(model, tk, qn, qd, zero, f)
    return rates + (qd @ tau,)
