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
(which block meets which) is static, so each level is one step of the tree's level sweep
(:mod:`mbjax.dynamics.levels`, the roots' level on its own) of a handful of batched 6 x 6
operations: two SPD inverses written out by 3 x 3
blocks (``mbjax.linalg.spd_inverse``; LAPACK calls would cost dozens of XLA operations each)
and four products (see ``_eliminate``). Keeping A_i and N_i exactly symmetric matters: in a
deep chain, rounding asymmetry fed from level to level grows until it dominates.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..dynamics.levels import body_slots, parent_rows, slots, sweep_down, sweep_up, to_parents
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


def solve_sparse_kkt(model: Model, ne: NewtonEuler):
    """Accelerations x (nb, 6) and multipliers lambda (nb, 6) by tree-ordered elimination:
    the levels of the tree's sweep (:func:`mbjax.dynamics.levels.sweep_up` and ``sweep_down``),
    then the roots, whose parent is the base (its motion is already in gamma)."""
    dtype = ne.M.dtype
    sw = model.topology.sweep
    pad_row = lambda x, fill=0.0: jnp.concatenate([x, jnp.full((1,) + x.shape[1:], fill, x.dtype)])  # noqa: E731
    # padding slots: an identity block and only padded constraint rows
    Mu = jnp.concatenate([ne.M, ne.u_total[..., None]], -1)  # (A | u~) before the children's share
    Mu = jnp.concatenate([Mu, jnp.eye(6, 7, dtype=dtype)[None]])
    pad = jnp.asarray(np.concatenate([~ne.active, np.ones((1, 6), bool)]), dtype)
    data = (Mu, pad_row(ne.G_child), pad_row(ne.G_parent), pad_row(ne.gamma), pad)
    # per-level data gathered once, outside the sweeps
    at = lambda body: tuple(take(X, body) for X in data)  # noqa: E731

    def backward(acc, Mul, Gcl, Gpl, gl, pl, P):
        up, saved = _eliminate(Mul + acc, Gcl, Gpl, gl, pl)
        return to_parents(P, up), saved

    zero = lambda W: jnp.zeros((W, 6, 7), dtype)  # noqa: E731
    acc, saved = sweep_up(model, backward, zero, [at(seg.body) for seg in sw.segments])
    Mu0, *rest = at(np.asarray(sw.root.bodies, np.int32))
    _, saved0 = _eliminate(Mu0 + (acc if saved else 0.0), *rest)

    def forward(x_prev, Ya, Z, P):
        x, lam = _back(parent_rows(P, x_prev), Ya, Z)
        return x, jnp.concatenate([x, lam], -1)

    x0, lam0 = _back(jnp.zeros((len(sw.root.bodies), 6), dtype), *saved0)
    xl = sweep_down(model, forward, x0, saved)
    xl = take(slots(jnp.concatenate([x0, lam0], -1), xl), body_slots(model))
    return xl[:, :6], xl[:, 6:]
