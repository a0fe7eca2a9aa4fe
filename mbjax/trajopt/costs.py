"""Costs and constraints of a trajectory problem, all in residual form.

Every term maps a :class:`Rollout` (knot torques and the simulated trajectory) to a residual
vector ``r``:

- listed in ``costs``, it adds ``weight * |r|^2`` to the objective (an inequality term adds
  ``weight * |max(0, r)|^2``, a soft limit);
- listed in ``constraints``, it asks ``r = 0`` (equality terms) or ``r <= 0`` (inequality
  terms: :class:`TorqueLimits`, :class:`VelocityLimits`, :class:`PositionLimits`).

Because the objective is a sum of squares, Gauss–Newton and Levenberg–Marquardt apply to it
directly, augmented-Lagrangian terms included (see :mod:`mbjax.trajopt.lagrangian`).
"""

from __future__ import annotations

from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..configuration import difference_from
from ..simulation.trajectory import Trajectory


class Rollout(eqx.Module):
    """What the terms see: the knot values ``u`` (K, nu) and the trajectory on the integration
    grid (``trajectory.ts`` (N+1,), ``q`` (N+1, nq), ``qd`` (N+1, nv)); ``defects`` (D,) are the
    multiple-shooting continuity residuals (empty for single shooting)."""

    u: jax.Array
    trajectory: Trajectory
    defects: jax.Array


class Term(eqx.Module):
    """A residual ``r(problem, rollout)`` (1-D); ``weight`` scales it as a cost."""

    weight: float = eqx.field(default=1.0, kw_only=True)
    inequality: ClassVar[bool] = False

    def residual(self, problem, rollout: Rollout) -> jax.Array:
        raise NotImplementedError


class Effort(Term):
    """Control effort ``weight * integral_0^T |u(t)|^2 dt`` over the actuated torques, exact for
    linear and cubic knot interpolation (4-point Gauss–Legendre per knot interval)."""

    def residual(self, problem, rollout):
        w, u = problem.controls.quadrature(rollout.u)
        return (jnp.sqrt(w)[:, None] * u).reshape(-1)


class TerminalState(Term):
    """The final state's error to a target: ``(q_target (-) q(T), qd(T) - qd_target)`` on the
    velocity coordinates ``dofs`` (default all).

    ``q``: target configuration (nq,) or ``None`` (no position error); ``qd``: target velocity
    (nv,) or ``None``. The position error is the manifold difference (a rotation vector for a
    quaternion), so ``dofs`` can pick e.g. the attitude of a floating base but not its position.
    """

    q: jax.Array | None = None
    qd: jax.Array | None = None
    dofs: tuple | None = eqx.field(default=None, static=True, converter=lambda d: None if d is None else tuple(
        int(i) for i in d))

    def __check_init__(self):
        if self.q is None and self.qd is None:
            raise ValueError("TerminalState needs a target q, qd or both")

    def residual(self, problem, rollout):
        q_end, qd_end = rollout.trajectory.q[-1], rollout.trajectory.qd[-1]
        parts = []
        if self.q is not None:
            parts.append(difference_from(problem.model, self.q, q_end))
        if self.qd is not None:
            parts.append(qd_end - self.qd)
        dofs = slice(None) if self.dofs is None else np.asarray(self.dofs)
        return jnp.concatenate([p[dofs] for p in parts])


class PathCost(Term):
    """``weight * integral_0^T |f(t, q, qd)|^2 dt`` for a residual function ``f`` (e.g. joint
    velocities, or the distance of a frame to a target), by the trapezoidal rule on the
    integration grid."""

    fn: Callable = eqx.field(static=True)

    def residual(self, problem, rollout):
        traj = rollout.trajectory
        h = jnp.diff(traj.ts)
        w = jnp.concatenate([h[:1], h[1:] + h[:-1], h[-1:]]) / 2
        f = jax.vmap(self.fn)(traj.ts, traj.q, traj.qd)
        return (jnp.sqrt(w)[:, None] * f.reshape(f.shape[0], -1)).reshape(-1)


class Limits(Term):
    """``lower <= x <= upper`` elementwise, as residuals ``(x - upper, lower - x) <= 0``; a
    coordinate whose bound is infinite is unlimited on that side (its residual is the constant
    -1, never active)."""

    lower: jax.Array | float | None = None
    upper: jax.Array | float | None = None
    inequality: ClassVar[bool] = True

    def model_limits(self, problem):
        """The model's (lower, upper) bounds, used where ``lower`` or ``upper`` is ``None``."""
        raise NotImplementedError

    def values(self, problem, rollout: Rollout) -> jax.Array:
        """The bounded quantity, (..., n)."""
        raise NotImplementedError

    def bounds(self, problem):
        """(lower, upper), each (n,)."""
        lower, upper = self.model_limits(problem)
        lower = lower if self.lower is None else jnp.broadcast_to(jnp.asarray(self.lower), lower.shape)
        upper = upper if self.upper is None else jnp.broadcast_to(jnp.asarray(self.upper), upper.shape)
        return lower, upper

    def residual(self, problem, rollout):
        lower, upper = self.bounds(problem)
        x = self.values(problem, rollout)
        above = jnp.where(jnp.isfinite(upper), x - upper, -1.0)
        below = jnp.where(jnp.isfinite(lower), lower - x, -1.0)
        return jnp.concatenate([above.reshape(-1), below.reshape(-1)])


class TorqueLimits(Limits):
    """``lower <= u <= upper`` at every knot.

    ``lower``, ``upper``: (nu,) bounds on the actuated torques or scalars; default
    ``-/+ model.effort_limit`` of the actuated joints. With linear interpolation the bounds then
    hold at every time; cubic interpolation can overshoot between knots.
    """

    def model_limits(self, problem):
        limit = problem.model.effort_limit[np.asarray(problem.controls.dofs)]
        return -limit, limit

    def values(self, problem, rollout):
        return rollout.u


class VelocityLimits(Limits):
    """``lower <= qd(t) <= upper`` at every step of the integration grid (between steps the
    speed can exceed a bound by the step's curvature; keep a margin or refine ``substeps``).

    ``lower``, ``upper``: (nv,) or scalars; default ``-/+ model.velocity_limit`` (joints without
    a finite limit are unlimited).
    """

    def model_limits(self, problem):
        return -problem.model.velocity_limit, problem.model.velocity_limit

    def values(self, problem, rollout):
        return rollout.trajectory.qd


class PositionLimits(Limits):
    """``lower <= q(t) <= upper`` at every step of the integration grid.

    ``lower``, ``upper``: (nq,) or scalars; default the model's joint limits ``model.lower``,
    ``model.upper`` (infinite for continuous joints, quaternions and free bases: unlimited).
    """

    def model_limits(self, problem):
        return problem.model.lower, problem.model.upper

    def values(self, problem, rollout):
        return rollout.trajectory.q
