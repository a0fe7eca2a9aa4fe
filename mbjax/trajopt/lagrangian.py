"""Constraints by the augmented Lagrangian (or a quadratic penalty), kept in residual form.

For the objective ``J = |r|^2``, equality constraints ``c = 0`` and inequalities ``g <= 0``
the augmented Lagrangian (Powell–Hestenes–Rockafellar; Nocedal & Wright, Numerical
Optimization, 2nd ed., Ch. 17) is, up to terms free of the variables,

    L = |r|^2 + rho/2 |c + lambda/rho|^2 + rho/2 |max(0, g + mu/rho)|^2

— a sum of squares again, so a Gauss–Newton or Levenberg–Marquardt solver minimises it as it
would the unconstrained problem. After each inner minimisation the multipliers take the
first-order update ``lambda <- lambda + rho c``, ``mu <- max(0, mu + rho g)`` and
the penalty ``rho`` grows when the violation, still above the tolerance, fell by less than a
factor 4. Without multiplier updates (:func:`Penalty`) this is the quadratic penalty method.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ..checks import default_tolerance


class Multipliers(eqx.Module):
    """Multipliers of the equalities ``lam`` (E,), of the inequalities ``mu`` (I,), and ``rho``."""

    lam: jax.Array
    mu: jax.Array
    rho: jax.Array


def violation(equalities, inequalities):
    """Largest constraint violation: ``max(|c|, max(0, g))`` (0 without constraints)."""
    return jnp.max(jnp.concatenate([jnp.abs(equalities), jnp.maximum(inequalities, 0.0), jnp.zeros(1)]))


class AugmentedLagrangian(eqx.Module):
    """How constraints enter the objective, and the outer loop around the inner solver.

    **Fields:**

    - ``penalty``: initial rho; ``growth``: its factor when the violation stalls; ``max_penalty``.
    - ``iterations``: outer iterations at most; ``tolerance``: the largest constraint violation
      (in the residual's units: rad, rad/s, N m) that counts as feasible.
    - ``cost_tolerance``: a feasible iterate also counts as converged when its objective changed
      by at most this fraction over the last outer iteration, even if the inner solver used up
      its steps (an inexact inner solve is enough once the multipliers have settled).
    - ``tolerance`` and ``cost_tolerance`` default (``None``) to 1e-8 and 1e-6 for a float64
      problem and to 1000 units of roundoff (1.2e-4) for a float32 one, which float32
      simulations can reach (:meth:`tolerances`).
    - ``multipliers``: update the multipliers (augmented Lagrangian) or keep them zero
      (quadratic penalty).
    """

    penalty: float = 10.0
    growth: float = 10.0
    max_penalty: float = 1e10
    iterations: int = eqx.field(default=20, static=True)
    tolerance: float | None = None
    cost_tolerance: float | None = None
    multipliers: bool = eqx.field(default=True, static=True)

    def __check_init__(self):
        if not self.iterations >= 1:
            raise ValueError(f"iterations must be at least 1 (one inner solve); got {self.iterations}")

    def tolerances(self, dtype) -> tuple:
        """``(tolerance, cost_tolerance)`` for a problem computed in ``dtype``: the fields, or
        where ``None`` ``mbjax.checks.default_tolerance(dtype, 1e-8 / 1e-6, 1000)``."""
        return tuple(default_tolerance(dtype, default, 1000) if tol is None else tol
                     for tol, default in ((self.tolerance, 1e-8), (self.cost_tolerance, 1e-6)))

    def init(self, equalities, inequalities) -> Multipliers:
        dtype = equalities.dtype
        return Multipliers(jnp.zeros_like(equalities), jnp.zeros_like(inequalities), jnp.asarray(self.penalty, dtype))

    def residuals(self, cost, equalities, inequalities, m: Multipliers):
        """The residual vector whose squared norm is the augmented Lagrangian L."""
        s = jnp.sqrt(m.rho / 2)
        return jnp.concatenate([cost, s * (equalities + m.lam / m.rho),
                                s * jnp.maximum(inequalities + m.mu / m.rho, 0.0)])

    def update(self, m: Multipliers, equalities, inequalities, before, after) -> Multipliers:
        """Multipliers after an inner solve that took the violation from ``before`` to ``after``."""
        lam, mu = m.lam, m.mu
        if self.multipliers:
            lam = lam + m.rho * equalities
            mu = jnp.maximum(mu + m.rho * inequalities, 0.0)
        # grow rho only while infeasible: past the tolerance a larger one only makes the inner
        # problem ill-conditioned (the violation cannot keep falling 4x at round-off level)
        stalled = (after > 0.25 * before) & (after > self.tolerances(equalities.dtype)[0])
        rho = jnp.where(stalled, jnp.minimum(m.rho * self.growth, self.max_penalty), m.rho)
        return Multipliers(lam, mu, rho)


def Penalty(weight: float = 1e3, growth: float = 10.0, iterations: int = 20, tolerance: float | None = None,
            cost_tolerance: float | None = None):
    """The quadratic penalty method: ``J + weight/2 (|c|^2 + |max(0, g)|^2)``, the weight growing
    by ``growth`` while the constraints are violated by more than ``tolerance`` (defaults as in
    :class:`AugmentedLagrangian`)."""
    return AugmentedLagrangian(weight, growth, iterations=iterations, tolerance=tolerance,
                               cost_tolerance=cost_tolerance, multipliers=False)
