"""A primal-dual interior-point method for a :class:`StagewiseNLP`, in the manner of IPOPT
(Wächter & Biegler, "On the implementation of an interior-point filter line-search algorithm
for large-scale nonlinear programming", Math. Program. 106, 2006), whose Newton steps cost time
linear in the number of knots.

- **Barrier.** The bounds enter as ``-mu sum log(slack)``; ``mu`` falls by IPOPT's monotone
  rule ``mu <- max(tol/10, min(0.2 mu, mu^1.5))`` (their Eq. 7), applied again within an iteration
  while the barrier problem's KKT error stays below ``10 mu``.
- **Newton step.** With the bound multipliers eliminated (``Sigma = Z / S``), the primal-dual
  system in the order (knot step, node multipliers, next interval's multipliers) is symmetric
  block-tridiagonal and is factored by :mod:`.block_tridiagonal`. Its inertia must be
  (K nt positive, the rest negative); otherwise a multiple ``delta`` of the identity is added to
  the Hessian (their Sec. 3.1, with the same growth and memory of ``delta``), and one step of
  iterative refinement cleans the solve.
- **Line search.** Fraction to the boundary (``tau = max(0.99, 1 - mu)``) for slacks and bound
  multipliers, then backtracking until a filter-type condition holds (sufficient decrease of
  the infeasibility or of the barrier objective, or an Armijo condition in the switching
  regime; their Eqs. 18–20, without the filter's memory).
- **Stop** when the scaled KKT error (their Eq. 5) is at most ``tol``, or after ``max_iter``.
- **Warm start** (:meth:`InteriorPoint.warm`): from a neighbouring problem's solution, its
  multipliers and a small barrier parameter, as IPOPT's ``warm_start_init_point`` (bounds pushed
  by 1e-3 instead of 1e-2, bound multipliers at least ``warm_mu``, ``mu = warm_mu``).

Everything is one ``lax.while_loop``: jit-able and vmappable over problems.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from . import block_tridiagonal
from .stagewise import StagewiseNLP


class InteriorPointState(eqx.Module):
    """The iterate: knots ``w``, multipliers of the interval (``lam``) and node (``nu``)
    equalities and of the lower and upper bounds (``zl``, ``zu``), the barrier parameter ``mu``,
    the largest infeasibility allowed (``theta_max``), the iteration count, the KKT error at
    the start of the last iteration (the loop stops once it is at most ``tol``, after one more
    step), the last step length and Hessian regularisation."""

    w: jax.Array
    lam: jax.Array
    nu: jax.Array
    zl: jax.Array
    zu: jax.Array
    mu: jax.Array
    theta_max: jax.Array
    iterations: jax.Array
    error: jax.Array
    step: jax.Array
    regularisation: jax.Array


class InteriorPointStart(eqx.Module):
    """Where a solve starts besides its knots: the multipliers of the interval and node
    equalities (``lam``, ``nu``) and of the bounds (``zl``, ``zu``), the barrier parameter
    ``mu``, ``push``: how far inside its bounds a knot is moved first (relative to the bound's
    size and span, IPOPT's ``bound_push`` and ``bound_frac``), and the most iterations."""

    lam: jax.Array
    nu: jax.Array
    zl: jax.Array
    zu: jax.Array
    mu: jax.Array
    push: jax.Array
    max_iter: jax.Array


class InteriorPoint(eqx.Module):
    """Options: stop at a KKT error of ``tol`` or after ``max_iter`` iterations; ``mu0``: the
    first barrier parameter; ``warm_mu``: the barrier parameter (and least bound multiplier) of
    a warm start, and ``warm_max_iter`` its most iterations (a warm start that needs more is
    better restarted cold: where the neighbour's optimum does not continue to this problem, the
    iterates creep)."""

    tol: float = 1e-8
    max_iter: int = eqx.field(default=300, static=True)
    mu0: float = 0.1
    warm_mu: float = 1e-6
    warm_max_iter: int = 30

    def solve(self, nlp: StagewiseNLP, w0, start: InteriorPointStart | None = None) -> InteriorPointState:
        """Solve from the knots ``w0`` (K, nw), pushed inside the bounds first, and ``start``
        (default :meth:`cold`)."""
        state = self.init(nlp, w0, self.cold(nlp, w0) if start is None else start)
        limit = jnp.minimum(self.max_iter, start.max_iter)
        return jax.lax.while_loop(lambda s: (s.error > self.tol) & (s.iterations < limit),
                                  lambda s: self.iteration(nlp, s), state)

    def cold(self, nlp: StagewiseNLP, w0) -> InteriorPointStart:
        """The start of a problem on its own: zero equality multipliers, unit bound multipliers,
        ``mu0``, knots pushed 1e-2 inside their bounds."""
        _, d, e = jax.eval_shape(nlp.values, w0)
        _, _, has_lo, has_hi = _bounds(nlp)
        dtype = w0.dtype
        return InteriorPointStart(jnp.zeros(d.shape, dtype), jnp.zeros(e.shape, dtype), has_lo.astype(dtype),
                     has_hi.astype(dtype), jnp.asarray(self.mu0, dtype), jnp.asarray(1e-2, dtype),
                     jnp.asarray(self.max_iter))

    def warm(self, solved: InteriorPointState) -> InteriorPointStart:
        """The start from a neighbouring problem's solution (start from its knots too): its
        multipliers, the bound multipliers at least ``warm_mu``, ``mu = warm_mu`` (at least
        ``tol / 10``), knots pushed 1e-3 inside their bounds, at most ``warm_max_iter`` iterations."""
        mu = jnp.maximum(jnp.asarray(self.warm_mu, solved.mu.dtype), self.tol / 10)
        return InteriorPointStart(solved.lam, solved.nu, jnp.maximum(solved.zl, mu), jnp.maximum(solved.zu, mu), mu,
                     jnp.asarray(1e-3, solved.mu.dtype), jnp.asarray(self.warm_max_iter))

    # ------------------------------------------------------------------ pieces
    def init(self, nlp: StagewiseNLP, w0, start: InteriorPointStart) -> InteriorPointState:
        lo, hi, has_lo, has_hi = _bounds(nlp)
        x = jax.vmap(nlp.coords)(w0)
        span = jnp.where(has_lo & has_hi, hi - lo, jnp.inf)
        push_lo = start.push * jnp.minimum(jnp.maximum(1.0, jnp.abs(lo)), span)
        push_hi = start.push * jnp.minimum(jnp.maximum(1.0, jnp.abs(hi)), span)
        inside = jnp.where(has_lo, jnp.maximum(x, lo + push_lo), x)
        inside = jnp.where(has_hi, jnp.minimum(inside, hi - push_hi), inside)
        w = jax.vmap(nlp.retract)(w0, inside - x)
        scalar = lambda v: jnp.asarray(v, w.dtype)  # noqa: E731
        return InteriorPointState(w, start.lam, start.nu, jnp.where(has_lo, start.zl, 0.0),
                                  jnp.where(has_hi, start.zu, 0.0), start.mu, scalar(jnp.inf), jnp.asarray(0),
                                  scalar(jnp.inf), scalar(1.0), scalar(0.0))

    def iteration(self, nlp: StagewiseNLP, s: InteriorPointState) -> InteriorPointState:
        lo, hi, has_lo, has_hi = _bounds(nlp)
        w, lam, nu, zl, zu = s.w, s.lam, s.nu, s.zl, s.zu
        K, nt = nlp.lower.shape
        ne, nc = nu.shape[1], lam.shape[1]
        dtype = w.dtype
        gi, J, Hi, gn, E, Hn = nlp.derivatives(w, lam, nu)
        f0, d, e = nlp.values(w)
        sl, su = _slacks(nlp, w)
        g = gn.at[:-1].add(gi[:, :nt]).at[1:].add(gi[:, nt:])  # cost gradient per knot
        Jt_lam = (jnp.zeros((K, nt), dtype).at[:-1].add(jnp.einsum("kij,ki->kj", J[:, :, :nt], lam))
                  .at[1:].add(jnp.einsum("kij,ki->kj", J[:, :, nt:], lam)))
        Et_nu = jnp.einsum("kij,ki->kj", E, nu)

        def kkt_error(mu):  # IPOPT's Eq. 5 with s_max = 100
            grad_L = g + Jt_lam + Et_nu - zl + zu
            comp = jnp.maximum(jnp.abs(jnp.where(has_lo, sl * zl - mu, 0.0)).max(),
                               jnp.abs(jnp.where(has_hi, su * zu - mu, 0.0)).max())
            primal = jnp.maximum(jnp.abs(d).max(), jnp.abs(e).max())
            duals = jnp.abs(lam).sum() + jnp.abs(nu).sum() + jnp.abs(zl).sum() + jnp.abs(zu).sum()
            scale = jnp.maximum(100.0, duals / (lam.size + nu.size + zl.size + zu.size)) / 100.0
            return jnp.maximum(jnp.maximum(jnp.abs(grad_L).max() / scale, primal), comp / scale)

        error = kkt_error(0.0)
        mu = jax.lax.while_loop(lambda m: (kkt_error(m) <= 10 * m) & (m > self.tol / 10),
                                lambda m: jnp.maximum(self.tol / 10, jnp.minimum(0.2 * m, m**1.5)), s.mu)

        # the primal-dual system, block k: (knot k's step, its node multipliers, interval k's multipliers)
        sigma = jnp.where(has_lo, zl / sl, 0.0) + jnp.where(has_hi, zu / su, 0.0)
        Hkk = Hn.at[:-1].add(Hi[:, :nt, :nt]).at[1:].add(Hi[:, nt:, nt:]) + jax.vmap(jnp.diag)(sigma)
        m = nt + ne + nc
        tiny = 1e-9  # the equality blocks' regularisation (IPOPT's delta_c for rank-deficient Jacobians)
        D = jnp.zeros((K, m, m), dtype).at[:, :nt, :nt].set(Hkk)
        D = D.at[:, nt:nt + ne, :nt].set(E).at[:, :nt, nt:nt + ne].set(jnp.swapaxes(E, 1, 2))
        D = D.at[:, nt:nt + ne, nt:nt + ne].set(jax.vmap(jnp.diag)(jnp.where(nlp.node_mask, -tiny, -1.0)))
        D = D.at[:-1, nt + ne:, :nt].set(J[:, :, :nt]).at[:-1, :nt, nt + ne:].set(jnp.swapaxes(J[:, :, :nt], 1, 2))
        D = D.at[:-1, nt + ne:, nt + ne:].set(-tiny * jnp.eye(nc, dtype=dtype))
        D = D.at[-1, nt + ne:, nt + ne:].set(-jnp.eye(nc, dtype=dtype))  # no interval after the last knot
        # the coupling of knot k+1 to block k, through knot k+1's step only (its first nt columns)
        U = jnp.zeros((K - 1, m, nt), dtype).at[:, :nt].set(Hi[:, :nt, nt:]).at[:, nt + ne:].set(J[:, :, nt:])
        identity_w = jnp.zeros((m, m), dtype).at[:nt, :nt].set(jnp.eye(nt, dtype=dtype))
        negative_wanted = K * (ne + nc)

        # inertia correction (IPOPT Sec. 3.1) with one call site of the factorisation: the loop's
        # first pass factors with delta = 0
        def factor(carry):
            delta, _, _, _, first = carry
            grown = jnp.where(delta == 0, jnp.where(s.regularisation == 0, 1e-4, jnp.maximum(1e-20, s.regularisation / 3)),
                              8 * delta)
            delta = jnp.where(first, 0.0, grown)
            Dd = D + delta * identity_w
            lus, negative = block_tridiagonal.factor(Dd, U)
            return delta, Dd, lus, negative, jnp.asarray(False)

        shapes = jax.eval_shape(lambda: factor((jnp.zeros((), dtype), D, None, 0, jnp.asarray(True))))
        start = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)
        start = (start[0], start[1], start[2], jnp.asarray(-1, shapes[3].dtype), jnp.asarray(True))
        delta, Dd, lus, _, _ = jax.lax.while_loop(lambda c: (c[3] != negative_wanted) & (c[0] < 1e20), factor, start)

        grad_phi = g - jnp.where(has_lo, mu / sl, 0.0) + jnp.where(has_hi, mu / su, 0.0)
        r = jnp.concatenate([-(grad_phi + Jt_lam + Et_nu), -e, jnp.concatenate([-d, jnp.zeros((1, nc), dtype)])], axis=1)
        # the solve and one step of iterative refinement, at one call site
        sol = jax.lax.fori_loop(0, 2, lambda i, x: x + block_tridiagonal.solve(
            lus, U, r - block_tridiagonal.matvec(Dd, U, x)), jnp.zeros_like(r))
        dx, dnu, dlam = sol[:, :nt], sol[:, nt:nt + ne], sol[:-1, nt + ne:]
        dzl = jnp.where(has_lo, mu / sl - zl - zl / sl * dx, 0.0)
        dzu = jnp.where(has_hi, mu / su - zu + zu / su * dx, 0.0)

        tau = jnp.maximum(0.99, 1 - mu)  # fraction to the boundary

        def max_step(v, dv):
            ratio = jnp.where(dv < 0, -tau * v / jnp.where(dv < 0, dv, -1.0), jnp.inf)
            return jnp.minimum(1.0, ratio.min())

        a_max = jnp.minimum(max_step(jnp.where(has_lo, sl, 1.0), jnp.where(has_lo, dx, 0.0)),
                            max_step(jnp.where(has_hi, su, 1.0), jnp.where(has_hi, -dx, 0.0)))
        a_z = jnp.minimum(max_step(jnp.where(has_lo, zl, 1.0), dzl), max_step(jnp.where(has_hi, zu, 1.0), dzu))

        def barrier(w, f, d, e):  # (barrier objective, infeasibility); inf where not finite
            sl, su = _slacks(nlp, w)
            phi = f - mu * (jnp.sum(jnp.where(has_lo, jnp.log(sl), 0.0)) + jnp.sum(jnp.where(has_hi, jnp.log(su), 0.0)))
            theta = jnp.abs(d).sum() + jnp.abs(e).sum()
            return jnp.where(jnp.isfinite(phi) & jnp.isfinite(theta), phi, jnp.inf), jnp.where(jnp.isfinite(theta), theta, jnp.inf)

        phi0, theta0 = barrier(w, f0, d, e)
        theta_max = jnp.where(s.iterations == 0, 1e4 * jnp.maximum(1.0, theta0), s.theta_max)
        theta_min = 1e-4 * jnp.maximum(1.0, theta_max / 1e4)
        slope = jnp.sum(grad_phi * dx)

        def moved(a):
            return jax.vmap(nlp.retract)(w, a * dx)

        def rejected(carry):
            a, phi, theta = carry
            switching = (slope < 0) & (a * (-slope) ** 2.3 > theta0**1.1) & (theta0 <= theta_min)
            armijo = phi <= phi0 + 1e-4 * a * slope
            decrease = ((theta <= (1 - 1e-5) * theta0) | (phi <= phi0 - 1e-5 * theta0)) & (theta <= theta_max)
            return ~jnp.where(switching, armijo, decrease) & (a > 1e-10)

        def halve(carry):
            a = 0.5 * carry[0]
            w_a = moved(a)
            return (a, *barrier(w_a, *nlp.values(w_a)))

        # one call site of the objective: the first pass halves 2 a_max (inf is never accepted)
        inf = jnp.asarray(jnp.inf, dtype)
        a, _, _ = jax.lax.while_loop(rejected, halve, (2 * a_max, inf, inf))
        return InteriorPointState(moved(a), lam + a * dlam, nu + a * dnu, zl + a_z * dzl, zu + a_z * dzu, mu, theta_max,
                                  s.iterations + 1, error, a, delta)


def _bounds(nlp):
    has_lo, has_hi = jnp.isfinite(nlp.lower), jnp.isfinite(nlp.upper)
    return jnp.where(has_lo, nlp.lower, 0.0), jnp.where(has_hi, nlp.upper, 0.0), has_lo, has_hi


def _slacks(nlp, w):
    lo, hi, has_lo, has_hi = _bounds(nlp)
    x = jax.vmap(nlp.coords)(w)
    return jnp.where(has_lo, x - lo, 1.0), jnp.where(has_hi, hi - x, 1.0)
