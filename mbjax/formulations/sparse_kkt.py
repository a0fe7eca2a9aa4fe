"""The KKT system of Eq. (10)/(49) solved by block elimination along the tree, never forming a
matrix: O(n), one batched step per depth level (Mufti: "sparse matrix techniques can be used";
the elimination order is the tree's, leaves to root, then back).

Eliminating the leaves first, each body i with its accumulated block A_i and right-hand side
u~_i gives x_i = A_i^-1 (u~_i + G_ii lambda_i); its joint's row then reads

    N_i lambda_i = -(rho_i + G_pi^T x_p),  N_i = G_ii^T A_i^-1 G_ii,  rho_i = gamma_i + G_ii^T A_i^-1 u~_i,

and eliminating lambda_i updates the parent:

    A_p += G_pi N_i^-1 G_pi^T,     u~_p -= G_pi N_i^-1 rho_i.

At the roots the parent is the base, whose motion is already in gamma (Remark 3). Back down:
lambda_i from x_p, then x_i. This is the articulated-body recursion written in Mufti's
maximal coordinates: A_i is body i's articulated inertia (at its CoM), and the sparsity pattern
(which block meets which) is static, so each level is a handful of batched 6 x 6 operations
(two batched solves with several right-hand sides each, see ``_eliminate``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..model.model import Model
from ..model.tree import take
from .newton_euler import NewtonEuler


def _eliminate(A, u, Gc, Gp, gamma, pad):
    """Leaves-to-root step for a batch of bodies (two batched solves).

    (Y, a) = A^-1 (G_ii, u~);  N = G_ii^T Y;  rho = gamma + G_ii^T a;
    (Z_G, z) = N^-1 (G_pi^T, rho); the parent receives (G_pi Z_G, -G_pi z).
    """
    Ya = jnp.linalg.solve(A, jnp.concatenate([Gc, u[..., None]], -1))
    Y, a = Ya[..., :6], Ya[..., 6]
    N = jnp.einsum("nji,njk->nik", Gc, Y) + jax.vmap(jnp.diag)(pad)
    rho = gamma + jnp.einsum("nji,nj->ni", Gc, a)
    Z = jnp.linalg.solve(N, jnp.concatenate([jnp.swapaxes(Gp, -1, -2), rho[..., None]], -1))
    up = jnp.einsum("nij,njk->nik", Gp, Z)
    return (up[..., :6], -up[..., 6]), (Y, a, Z)


def _back(x_parent, Y, a, Z):
    """Root-to-leaves step: lambda = -N^-1 (rho + G_pi^T x_p) = -(z + Z_G x_p), x = a + Y lambda."""
    lam = -(Z[..., 6] + jnp.einsum("nij,nj->ni", Z[..., :6], x_parent))
    return a + jnp.einsum("nij,nj->ni", Y, lam), lam


def _body_order(model: Model):
    """Position of every body in [root level, sweep levels flattened] (static)."""
    sw = model.topology.sweep
    flat = np.concatenate([np.asarray(sw.root.bodies), sw.body.reshape(-1)])
    order = np.empty(model.nbodies, dtype=np.int32)
    for k, b in enumerate(flat):
        if b < model.nbodies:
            order[b] = k
    return order


def solve_sparse_kkt(model: Model, ne: NewtonEuler):
    """Accelerations x (nb, 6) and multipliers lambda (nb, 6) by tree-ordered elimination."""
    sw = model.topology.sweep
    dtype = ne.M.dtype
    pad_row = lambda x, fill=0.0: jnp.concatenate([x, jnp.full((1,) + x.shape[1:], fill, x.dtype)])  # noqa: E731
    M = jnp.concatenate([ne.M, jnp.eye(6, dtype=dtype)[None]])  # padding slots: identity
    u, Gc, Gp, gamma = pad_row(ne.u_total), pad_row(ne.G_child), pad_row(ne.G_parent), pad_row(ne.gamma)
    pad = jnp.asarray(np.concatenate([~ne.active, np.ones((1, 6), bool)]), dtype)
    P = jnp.asarray(sw.parent, dtype)
    W = P.shape[-1] if P.size else len(sw.root.bodies)

    # per-level data gathered once, outside the sweeps
    levels = [take(X, sw.body) for X in (M, u, Gc, Gp, gamma, pad)]

    def backward_level(acc, xs):
        (Ml, ul, Gcl, Gpl, gl, pl), parent = xs
        up, saved = _eliminate(Ml + acc[0], ul + acc[1], Gcl, Gpl, gl, pl)
        return (jnp.einsum("kj,k...->j...", parent, up[0]), jnp.einsum("kj,k...->j...", parent, up[1])), saved

    zero = (jnp.zeros((W, 6, 6), dtype), jnp.zeros((W, 6), dtype))
    acc, saved = jax.lax.scan(backward_level, zero, (levels, P), reverse=True)

    # the roots: their parent is the base, already in gamma
    root = sw.root
    n0, rb = len(root.bodies), np.asarray(root.bodies, np.int32)
    _, (Y, a, Z) = _eliminate(take(M, rb) + acc[0][:n0], take(u, rb) + acc[1][:n0], take(Gc, rb), take(Gp, rb),
                              take(gamma, rb), take(pad, rb))
    x0, lam0 = _back(jnp.zeros((n0, 6), dtype), Y, a, Z)

    def forward(x_prev, xs):
        parent, (Y, a, Z) = xs
        x, lam = _back(parent @ x_prev, Y, a, Z)
        return x, (x, lam)

    x_init = jnp.zeros((W, 6), dtype).at[:n0].set(x0)
    _, (xs, lams) = jax.lax.scan(forward, x_init, (P, saved))
    order = _body_order(model)
    x = take(jnp.concatenate([x0, xs.reshape(-1, 6)]), order)
    lam = take(jnp.concatenate([lam0, lams.reshape(-1, 6)]), order)
    return x, lam
