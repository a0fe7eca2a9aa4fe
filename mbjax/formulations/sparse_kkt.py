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
(which block meets which) is static, so each level is a handful of batched 6 x 6 operations.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..model.model import Model
from ..model.tree import take
from .newton_euler import NewtonEuler


def _eliminate(A, u, Gc, gamma, pad):
    """Leaves-to-root step for a batch of bodies: A^-1, N^-1, rho and A^-1 G_ii."""
    Ainv = jnp.linalg.inv(A)
    Y = jnp.einsum("nij,njk->nik", Ainv, Gc)
    N = jnp.einsum("nji,njk->nik", Gc, Y) + jax.vmap(jnp.diag)(pad)
    rho = gamma + jnp.einsum("nji,nj->ni", Y, u)  # Y^T u = G^T A^-1 u (A symmetric)
    return Ainv, Y, jnp.linalg.inv(N), rho


def _parent_update(Gp, Ninv, rho):
    """What a joint passes to its parent: (G_pi N^-1 G_pi^T, -G_pi N^-1 rho)."""
    GN = jnp.einsum("nij,njk->nik", Gp, Ninv)
    return jnp.einsum("nij,nkj->nik", GN, Gp), -jnp.einsum("nij,nj->ni", GN, rho)


def _back(x_parent, Gp, Ainv, Y, Ninv, rho, u):
    """Root-to-leaves step: lambda = -N^-1 (rho + G_pi^T x_p), x = A^-1 u~ + Y lambda."""
    lam = -jnp.einsum("nij,nj->ni", Ninv, rho + jnp.einsum("nji,nj->ni", Gp, x_parent))
    x = jnp.einsum("nij,nj->ni", Ainv, u) + jnp.einsum("nij,nj->ni", Y, lam)
    return x, lam


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

    def backward(acc, body):
        A, ub = take(M, body) + acc[0], take(u, body) + acc[1]
        Ainv, Y, Ninv, rho = _eliminate(A, ub, take(Gc, body), take(gamma, body), take(pad, body))
        dA, du = _parent_update(take(Gp, body), Ninv, rho)
        return (dA, du), (Ainv, Y, Ninv, rho, ub)

    def send_up(carry, parent):
        return (jnp.einsum("kj,k...->j...", parent, carry[0]), jnp.einsum("kj,k...->j...", parent, carry[1]))

    def backward_level(acc, xs):
        body, parent = xs
        up, saved = backward(acc, body)
        return send_up(up, parent), saved

    zero = (jnp.zeros((W, 6, 6), dtype), jnp.zeros((W, 6), dtype))
    acc, saved = jax.lax.scan(backward_level, zero, (sw.body, P), reverse=True)

    # the roots: their parent is the base, already in gamma
    root = sw.root
    n0 = len(root.bodies)
    _, (Ainv, Y, Ninv, rho, ub) = backward((acc[0][:n0], acc[1][:n0]), np.asarray(root.bodies, np.int32))
    x0, lam0 = _back(jnp.zeros((n0, 6), dtype), jnp.zeros((n0, 6, 6), dtype), Ainv, Y, Ninv, rho, ub)

    def forward(x_prev, xs):
        body, parent, (Ainv, Y, Ninv, rho, ub) = xs
        x, lam = _back(parent @ x_prev, take(Gp, body), Ainv, Y, Ninv, rho, ub)
        return x, (x, lam)

    x_init = jnp.zeros((W, 6), dtype).at[:n0].set(x0)
    _, (xs, lams) = jax.lax.scan(forward, x_init, (sw.body, P, saved))
    order = _body_order(model)
    x = take(jnp.concatenate([x0, xs.reshape(-1, 6)]), order)
    lam = take(jnp.concatenate([lam0, lams.reshape(-1, 6)]), order)
    return x, lam
