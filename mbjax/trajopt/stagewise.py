"""A stagewise nonlinear program, the form direct collocation takes: knots w_0 .. w_N (points
of a manifold, moved by a retraction along tangent steps), and

    min   sum_k c_k(w_k, w_{k+1}) + sum_k c'_k(w_k)
    s.t.  d_k(w_k, w_{k+1}) = 0   (interval equalities: the defects),
          e_k(w_k) = 0            (node equalities, masked: boundary conditions, pointwise dynamics),
          lower_k <= coords(w_k) <= upper_k.

Each stage's equalities are ``concat(base, r(z))``: polynomial or kinematic ``base`` terms and
the dynamics residual ``r`` at one point ``z`` (e.g. ``rnea(q, v, a) - tau`` at a knot or an
interval's midpoint). The exact Hessian of a stage's Lagrangian then follows by the chain rule
(Gauss–Newton term plus curvature of the point map):

    H = J_z^T hess(mu . r)(z) J_z + hess_x(c + lam . base + g . z(x)),   g = mu . dr/dz,

so the dynamics are differentiated twice only at the points, all in one vmapped program, and
never through the rest of a stage (whose second derivatives are cheap). Where ``r`` is affine in
part of ``z`` (e.g. the accelerations and torques of ``rnea(q, v, a) - tau(u)``), hess(mu . r)
vanishes outside the rows and columns of the rest (:meth:`StagewiseNLP.curved`), which alone
are differentiated: one forward-mode tangent per curved coordinate.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


class StagewiseNLP(eqx.Module):
    """The program of the module docstring. A subclass writes the stage functions
    :meth:`interval`, :meth:`node`, :meth:`residual`, :meth:`retract` and :meth:`coords`, and
    holds what they need as fields (so that a jitted solve is compiled once per problem shape).

    **Fields:** ``node_mask`` (K, ne): which node equalities are constraints (the others are
    ignored); ``lower``, ``upper`` (K, nt): bounds on ``coords`` (infinite where unbounded).
    """

    node_mask: eqx.AbstractVar[jax.Array]
    lower: eqx.AbstractVar[jax.Array]
    upper: eqx.AbstractVar[jax.Array]

    @abc.abstractmethod
    def interval(self, wa, wb, k):
        """``(cost, base, z)`` of interval k, ``z = None`` where it has no dynamics point."""

    @abc.abstractmethod
    def node(self, w, k):
        """``(cost, base, z)`` of knot k."""

    @abc.abstractmethod
    def residual(self, z):
        """The dynamics residual at a point ``z``."""

    def curved(self, nz: int):
        """Indices of the point ``z`` (nz,) along which :meth:`residual` is not affine (default:
        all of them)."""
        return np.arange(nz)

    @abc.abstractmethod
    def retract(self, w, dx):
        """The knot ``w`` moved along the tangent step ``dx`` (nt,)."""

    @abc.abstractmethod
    def coords(self, w):
        """The coordinates (nt,) of ``w`` that the bounds apply to."""

    @property
    def tangent_size(self) -> int:
        return self.lower.shape[1]

    def equalities(self, parts):
        """A stage's equalities from its ``(cost, base, z)``."""
        _, base, z = parts
        return base if z is None else jnp.concatenate([base, self.residual(z)])

    def values(self, w):
        """(objective, interval equalities (N, nc), node equalities (K, ne), zero where masked)."""
        N = w.shape[0] - 1
        intervals = jax.vmap(self.interval)(w[:-1], w[1:], jnp.arange(N))
        nodes = jax.vmap(self.node)(w, jnp.arange(N + 1))
        d = jax.vmap(self.equalities)(intervals)
        e = jax.vmap(self.equalities)(nodes)
        return intervals[0].sum() + nodes[0].sum(), d, e * self.node_mask

    def derivatives(self, w, lam, nu):
        """First and second derivatives at ``w`` with multipliers ``lam`` (N, nc), ``nu`` (K, ne):
        ``(gi, J, Hi, gn, E, Hn)``, the cost gradients (N, 2 nt) and (K, nt), the equality
        Jacobians (N, nc, 2 nt) and (K, ne, nt), and the Lagrangian Hessians of the intervals
        (N, 2 nt, 2 nt) and of the nodes (K, nt, nt), in the tangent coordinates of the knots."""
        nt, N = self.tangent_size, w.shape[0] - 1
        k_int, k_node = jnp.arange(N), jnp.arange(N + 1)
        zero_i, zero_n = jnp.zeros(2 * nt, w.dtype), jnp.zeros(nt, w.dtype)

        def at_interval(wa, wb, k):
            return lambda dx: self.interval(self.retract(wa, dx[:nt]), self.retract(wb, dx[nt:]), k)

        def at_node(wk, k):
            return lambda dx: self.node(self.retract(wk, dx), k)

        def first(stage, x0):
            _, _, z = stage(x0)
            return z, jax.jacfwd(stage)(x0)

        zi, (gi, Jbi, Jzi) = jax.vmap(lambda wa, wb, k: first(at_interval(wa, wb, k), zero_i))(w[:-1], w[1:], k_int)
        zn, (gn, Jbn, Jzn) = jax.vmap(lambda wk, k: first(at_node(wk, k), zero_n))(w, k_node)
        nbi, nbn = Jbi.shape[1], Jbn.shape[1]
        nu = nu * self.node_mask

        # the dynamics at every point in one program: dr/dz and hess(mu . r)
        points = zn if zi is None else jnp.concatenate([zi, zn])
        mu = nu[:, nbn:] if zi is None else jnp.concatenate([lam[:, nbi:], nu[:, nbn:]])
        curved = self.curved(points.shape[1])

        def hessian(z, m):  # of m . r, differentiated along the curved coordinates only
            gradient = jax.grad(lambda y: m @ self.residual(y))
            columns = jax.jacfwd(lambda t: gradient(z.at[curved].add(t)))(jnp.zeros(curved.size, z.dtype))
            return jnp.zeros((z.size, z.size), z.dtype).at[:, curved].set(columns).at[curved, :].set(columns.T)

        Jr, Hr = jax.vmap(lambda z, m: (jax.jacfwd(self.residual)(z), hessian(z, m)))(points, mu)
        g_r = jnp.einsum("pi,pij->pj", mu, Jr)
        Jr_n, Hr_n, g_n = (x[-(N + 1):] for x in (Jr, Hr, g_r))

        def second(stage, x0, m_base, g):
            def lagrangian(x):
                c, base, z = stage(x)
                return c + m_base @ base + (0.0 if z is None else g @ z)
            return jax.hessian(lagrangian)(x0)

        def chain(Jz, H):
            return jnp.einsum("pzi,pzy,pyj->pij", Jz, H, Jz)

        Hn = jax.vmap(lambda wk, k, m, g: second(at_node(wk, k), zero_n, m, g))(w, k_node, nu[:, :nbn], g_n)
        Hn = Hn + chain(Jzn, Hr_n)
        E = jnp.concatenate([Jbn, jnp.einsum("prz,pzi->pri", Jr_n, Jzn)], 1) * self.node_mask[..., None]
        if zi is None:
            Hi = jax.vmap(lambda wa, wb, k, m: second(at_interval(wa, wb, k), zero_i, m, None))(
                w[:-1], w[1:], k_int, lam)
            J = Jbi
        else:
            Hi = jax.vmap(lambda wa, wb, k, m, g: second(at_interval(wa, wb, k), zero_i, m, g))(
                w[:-1], w[1:], k_int, lam[:, :nbi], g_r[:N])
            Hi = Hi + chain(Jzi, Hr[:N])
            J = jnp.concatenate([Jbi, jnp.einsum("prz,pzi->pri", Jr[:N], Jzi)], 1)
        return gi, J, Hi, gn, E, Hn
