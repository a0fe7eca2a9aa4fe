"""Joint-torque controllers ``tau(t, q, qd)`` as pytrees: their parameters (gains, set points,
knot values, the model inside a computed-torque law) are leaves, so ``jax.grad`` through
:func:`mbjax.simulate` differentiates with respect to them and ``jax.vmap`` batches them.

References ``reference(t) -> (q_ref, qd_ref, qdd_ref)`` drive the feedback laws: a constant
:class:`Setpoint`, or :class:`PathReference`, a diffrax path through joint-space knots.
"""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from ..configuration import difference
from ..dynamics.rnea import rnea
from ..model.model import Model


class Setpoint(eqx.Module):
    """A constant reference: ``q_ref`` (nq,), ``qd_ref`` (nv,), zero acceleration."""

    q: jax.Array
    qd: jax.Array

    def __init__(self, q, qd):
        self.q = jnp.asarray(q)
        self.qd = jnp.asarray(qd)

    def __call__(self, t):
        return self.q, self.qd, jnp.zeros_like(self.qd)


class PathReference(eqx.Module):
    """A time-varying reference from a diffrax path of joint positions (models with nq == nv).

    ``q_ref = path(t)``, ``qd_ref = path'(t)``, ``qdd_ref = path''(t)`` (forward-mode
    derivative of the path's derivative; use a ``diffrax.CubicInterpolation`` for a
    continuous velocity).
    """

    path: diffrax.AbstractPath

    @classmethod
    def from_knots(cls, ts, qs):
        """Cubic Hermite interpolation (backward differences) through ``qs`` (K, nv) at ``ts`` (K,)."""
        coeffs = diffrax.backward_hermite_coefficients(ts, qs)
        return cls(diffrax.CubicInterpolation(ts, coeffs))

    def __call__(self, t):
        qd, qdd = jax.jvp(self.path.derivative, (t,), (jnp.ones_like(t),))
        return self.path.evaluate(t), qd, qdd


class AbstractFeedback(eqx.Module):
    """Feedback on the error to a reference: a model (for errors on the configuration
    manifold, and dynamics), gains ``kp``, ``kd`` (scalars or (nv,)), a reference ``r(t)``."""

    model: Model
    kp: jax.Array
    kd: jax.Array
    reference: eqx.Module

    def __init__(self, model, kp, kd, reference):
        self.model = model
        self.kp = jnp.asarray(kp, model.dtype)
        self.kd = jnp.asarray(kd, model.dtype)
        self.reference = reference


class PD(AbstractFeedback):
    """Proportional-derivative control: ``tau = Kp (q_ref (-) q) + Kd (qd_ref - qd)``.

    The position error ``difference(q, q_ref)`` is taken on the configuration manifold (a
    rotation vector for quaternion joints). ``kp``, ``kd``: scalars or (nv,) gains (give zero
    gains on unactuated coordinates such as a floating base).
    """

    def __call__(self, t, q, qd):
        q_ref, qd_ref, _ = self.reference(t)
        return self.kp * difference(self.model, q, q_ref) + self.kd * (qd_ref - qd)


class ComputedTorque(AbstractFeedback):
    """Computed-torque (inverse-dynamics) control, with the model's own dynamics:

    ``tau = M(q) (qdd_ref + Kp e + Kd e') + h(q, qd) = rnea(q, qd, qdd_ref + Kp e + Kd e')``,
    ``e = q_ref (-) q``, ``e' = qd_ref - qd``. With an exact model the error obeys
    ``e'' + Kd e' + Kp e = 0``. ``model`` may differ from the simulated one (model error).
    """

    def __call__(self, t, q, qd):
        q_ref, qd_ref, qdd_ref = self.reference(t)
        e = difference(self.model, q, q_ref)
        return rnea(self.model, q, qd, qdd_ref + self.kp * e + self.kd * (qd_ref - qd))


class FeedForward(eqx.Module):
    """Open-loop torques from a diffrax path: ``tau = path(t)`` (nv,)."""

    path: diffrax.AbstractPath

    @classmethod
    def from_knots(cls, ts, taus, kind: str = "cubic"):
        """Interpolate knot torques ``taus`` (K, nv) at times ``ts`` (K,).

        ``kind="linear"`` (``diffrax.LinearInterpolation``: the knot values are the leaves) or
        ``"cubic"`` (``diffrax.CubicInterpolation`` with backward Hermite coefficients).
        """
        if kind == "linear":
            return cls(diffrax.LinearInterpolation(ts, taus))
        if kind == "cubic":
            return cls(diffrax.CubicInterpolation(ts, diffrax.backward_hermite_coefficients(ts, taus)))
        raise ValueError(f"unknown interpolation {kind!r}; use 'linear' or 'cubic'")

    def __call__(self, t, q, qd):
        return self.path.evaluate(t)
