"""Levenberg–Marquardt for the shooting transcriptions' sums of squares, with one Jacobian per
trial point.

Minimises ``F(z) = 1/2 |r(z)|^2`` (Madsen, Nielsen & Tingleff, *Methods for non-linear least
squares problems*, 2nd ed., 2004, Sec. 3.2 and Alg. 3.16): from the Jacobian ``J`` and residual ``r`` at
``z``, the step ``h`` solves ``(J^T J + mu I) h = -J^T r`` (by a Cholesky factor of these damped
normal equations); the gain ratio ``rho = (F(z) - F(z + h)) / (L(0) - L(h))``, with
``L(0) - L(h) = 1/2 h^T (mu h - J^T r)`` the decrease the linear model predicts,
accepts the step when positive and sets the damping: ``mu *= max(1/10, 1 - (2 rho - 1)^3)``
after an accepted step, ``mu *= nu, nu *= 2`` after a rejected one (Nielsen's rule, with 1/10
for the book's 1/3: the penalised problems of the augmented Lagrangian need the damping to fall
fast; on panda's point-to-point motion 1/3 stopped 4 % costlier). It starts at ``mu = 1``, as
optimistix's trust region does (the book's ``1e-3 max diag(J^T J)`` started the penalised
problems far too damped) and ends where the gradient ``J^T r`` vanishes.

Each trial point is evaluated together with its Jacobian (forward mode, ``jax.jacfwd``), so
the compiled loop holds the residual function once, differentiated; the first trial is the
starting point itself (``h = 0``). A rejected trial then costs a Jacobian where a residual
would do, which the damping keeps rare; in exchange the program is about half the size of
one that evaluates residuals and Jacobians separately (and compiles about twice as fast).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree


class LevenbergMarquardt(eqx.Module):
    """Levenberg–Marquardt (module docstring) for :func:`mbjax.trajopt.solve`'s shooting
    transcriptions.

    **Fields:** ``rtol``, ``atol``: the solve ends at a point where the gradient ``J^T r`` is at
    most ``atol + rtol max(F, 1)`` in every component; ``damping``: the initial ``mu``.
    """

    rtol: float
    atol: float
    damping: float = 1.0

    def minimise(self, fn, z, args, max_steps: int, has_aux: bool = False):
        """Minimise ``1/2 |fn(z, args)|^2`` from ``z`` (any pytree of arrays) in at most
        ``max_steps`` steps. Returns ``(z, steps, converged)``; with ``has_aux``, ``fn`` returns
        ``(residuals, aux)`` and the result ends with the ``aux`` of the returned ``z`` and of
        the starting ``z`` (the first trial; e.g. the simulations behind the residuals, which
        then need not be run again)."""
        x0, unravel = ravel_pytree(z)
        evaluate = (lambda x: fn(unravel(x), args)) if has_aux else (lambda x: (fn(unravel(x), args), None))

        def residual(x):
            r, aux = evaluate(x)
            return r, (r, aux)

        def linearise(x):
            J, (r, aux) = jax.jacfwd(residual, has_aux=True)(x)
            return r, aux, J, 0.5 * (r @ r)

        r_shape, aux_shape = jax.eval_shape(evaluate, x0)
        m = r_shape.shape[0]
        dtype = x0.dtype
        zero = jnp.zeros((), dtype)
        inf = jnp.asarray(jnp.inf, dtype)
        eye = jnp.eye(x0.shape[0], dtype=dtype)

        def step(s):
            x, r, aux, J, F, mu, nu, k, _, aux0 = s
            g = J.T @ r
            h = -jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(J.T @ J + mu * eye), g)
            h = jnp.where(k == 0, zero, h)  # the first trial: the starting point
            r_new, aux_new, J_new, F_new = linearise(x + h)
            predicted = 0.5 * h @ (mu * h - g)
            rho = jnp.where(k == 0, inf, (F - F_new) / jnp.where(predicted > 0, predicted, 1.0))
            accept = (rho > 0) & jnp.isfinite(F_new)
            stationary = jnp.max(jnp.abs(J_new.T @ r_new)) <= self.atol + self.rtol * jnp.maximum(F_new, 1.0)
            mu_next = jnp.where(k == 0, mu, mu * jnp.maximum(0.1, 1 - (2 * rho - 1) ** 3))
            keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(accept, a, b), new, old)  # noqa: E731
            return (keep(x + h, x), keep(r_new, r), keep(aux_new, aux), keep(J_new, J), keep(F_new, F),
                    jnp.where(accept, mu_next, mu * nu), jnp.where(accept, 2.0, 2.0 * nu).astype(dtype), k + 1,
                    accept & stationary, jax.tree.map(lambda a, b: jnp.where(k == 0, a, b), aux_new, aux0))

        def running(s):
            return (s[7] <= max_steps) & ~s[8]

        no_aux = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), aux_shape)
        init = (x0, jnp.zeros(m, dtype), no_aux, jnp.zeros((m, x0.shape[0]), dtype), inf,
                jnp.asarray(self.damping, dtype), jnp.asarray(2.0, dtype), jnp.zeros((), jnp.int32),
                jnp.zeros((), bool), no_aux)
        x, _, aux, *_, k, converged, aux0 = jax.lax.while_loop(running, step, init)
        return (unravel(x), k - 1, converged) + ((aux, aux0) if has_aux else ())
