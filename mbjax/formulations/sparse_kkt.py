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
(two batched 6 x 6 SPD inverses by unrolled LDL^T, ``mbjax.linalg.spd_inverse``, and four
batched products, see ``_eliminate``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..linalg import spd_inverse
from ..model.model import Model
from ..model.tree import take
from .newton_euler import NewtonEuler


def _eliminate(Au, Gc, Gp, gamma, pad):
    """Leaves-to-root step for a batch of bodies, with ``Au = [A | u~]`` (n, 6, 7).

    (Y, a) = A^-1 (G_ii, u~);  N = G_ii^T Y;  rho = gamma + G_ii^T a;
    Z = N^-1 (G_pi^T, -rho); the parent receives G_pi Z = (G_pi N^-1 G_pi^T, -G_pi N^-1 rho).
    """
    Ya = jnp.einsum("nij,njk->nik", spd_inverse(Au[..., :6]), jnp.concatenate([Gc, Au[..., 6:]], -1))
    Nr = jnp.einsum("nji,njk->nik", Gc, Ya)  # (N, G_ii^T a)
    N = Nr[..., :6] + pad[..., None] * jnp.eye(6, dtype=pad.dtype)
    Z = jnp.einsum("nij,njk->nik", spd_inverse(N), jnp.concatenate([jnp.swapaxes(Gp, -1, -2), -(gamma + Nr[..., 6])[..., None]], -1))
    return jnp.einsum("nij,njk->nik", Gp, Z), (Ya, Z)


def _back(x_parent, Ya, Z):
    """Root-to-leaves step: lambda = -N^-1 (rho + G_pi^T x_p) = Z (-x_p, 1), x = a + Y lambda."""
    lam = Z[..., 6] - jnp.einsum("nij,nj->ni", Z[..., :6], x_parent)
    return Ya[..., 6] + jnp.einsum("nij,nj->ni", Ya[..., :6], lam), lam


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

    Mu = jnp.concatenate([M, u[..., None]], -1)  # (A | u~) before the children's share
    # per-level data gathered once, outside the sweeps
    levels = [take(X, sw.body) for X in (Mu, Gc, Gp, gamma, pad)]

    def backward_level(acc, xs):
        (Mul, Gcl, Gpl, gl, pl), parent = xs
        up, saved = _eliminate(Mul + acc, Gcl, Gpl, gl, pl)
        return jnp.einsum("kj,k...->j...", parent, up), saved

    acc, saved = jax.lax.scan(backward_level, jnp.zeros((W, 6, 7), dtype), (levels, P), reverse=True)

    # the roots: their parent is the base, already in gamma
    root = sw.root
    n0, rb = len(root.bodies), np.asarray(root.bodies, np.int32)
    _, (Ya, Z) = _eliminate(take(Mu, rb) + acc[:n0], *(take(X, rb) for X in (Gc, Gp, gamma, pad)))
    x0, lam0 = _back(jnp.zeros((n0, 6), dtype), Ya, Z)

    def forward(x_prev, xs):
        parent, (Ya, Z) = xs
        x, lam = _back(parent @ x_prev, Ya, Z)
        return x, (x, lam)

    x_init = jnp.zeros((W, 6), dtype).at[:n0].set(x0)
    _, (xs, lams) = jax.lax.scan(forward, x_init, (P, saved))
    order = _body_order(model)
    x = take(jnp.concatenate([x0, xs.reshape(-1, 6)]), order)
    lam = take(jnp.concatenate([lam0, lams.reshape(-1, 6)]), order)
    return x, lam
