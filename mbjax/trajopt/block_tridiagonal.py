"""Symmetric block-tridiagonal linear algebra: the Newton systems of a stagewise NLP.

A matrix with diagonal blocks ``D`` (n, m, m) and upper blocks ``[U_k, 0]`` (block (k, k+1),
``U`` (n-1, m, c) its first c <= m columns, the others zero; block (k+1, k) is the transpose)
is factored by block Gaussian elimination down the diagonal, the Riccati-like recursion of the
Schur complements

    S_0 = D_0,    S_k = D_k - [U_{k-1}^T S_{k-1}^{-1} U_{k-1}, 0; 0, 0]   (its leading c x c block),

in one ``lax.scan`` (time and memory linear in n, cubic in m). A stagewise NLP couples
neighbouring knots through the knots' steps alone (the first c = nt of the m unknowns of a
block), so each elimination solves for c right-hand sides instead of m (the acrobot's
collocation: 12 of 28). By Sylvester's law of inertia
the matrix has as many negative eigenvalues as the ``S_k`` together, which tells an interior
point method whether its Hessian needs regularising. Each ``S_k``'s count comes from its
tridiagonal form T = Q^T S_k Q (LAPACK's ``sytrd``) by Sturm's sequence, the pivots of T's
unpivoted LDL^T: ``p_1 = t_11, p_i = t_ii - t_{i,i-1}^2 / p_{i-1}``, as many negative as T has
negative eigenvalues (a zero pivot counts as negative: the matrix is then singular, and the
caller regularises it). It costs a sixth of ``eigvalsh`` for blocks of 24.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl


def _stack(first, rest):
    return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), first, rest)


def _at(tree, index):
    return jax.tree.map(lambda a: a[index], tree)


def factor(D, U):
    """LU factors of the Schur complements ``S_k`` (a pytree of arrays with leading axis n) and
    the number of negative eigenvalues of the matrix."""
    c = U.shape[2]

    def eliminate(lu_prev, blocks):
        Dk, Uk = blocks  # Uk = U_{k-1}
        Sk = Dk.at[:c, :c].add(-Uk.T @ jsl.lu_solve(lu_prev, Uk))
        lu = jsl.lu_factor(Sk)
        return lu, (lu, Sk)

    lu0 = jsl.lu_factor(D[0])
    _, (lus, S) = jax.lax.scan(eliminate, lu0, (D[1:], U))
    S = jnp.concatenate([D[:1], S])
    return _stack(lu0, lus), negative_eigenvalues(0.5 * (S + jnp.swapaxes(S, 1, 2)))


def negative_eigenvalues(S):
    """How many eigenvalues of the symmetric matrices ``S`` (..., m, m) are negative, together
    (Sturm's count on their tridiagonal forms; zero counts as negative)."""
    _, d, e, _ = jax.lax.linalg.tridiagonal(S, lower=True)
    tiny = jnp.finfo(d.dtype).tiny

    def pivot(p, t):
        d_i, e2_i = t
        p = d_i - e2_i / p
        p = jnp.where(p == 0, -tiny, p)
        return p, p < 0

    e2 = jnp.concatenate([jnp.zeros_like(d[..., :1]), e**2], -1)
    _, negative = jax.lax.scan(pivot, jnp.ones(d.shape[:-1], d.dtype), (jnp.moveaxis(d, -1, 0), jnp.moveaxis(e2, -1, 0)))
    return jnp.sum(negative)


def solve(lus, U, r):
    """Solve the factored system for the right-hand side ``r`` (n, m): forward elimination, then
    back substitution ``x_k = S_k^{-1} (r'_k - U_k x_{k+1})``."""
    c = U.shape[2]

    def forward(r_prev, blocks):
        lu_prev, Uk, rk = blocks  # Uk = U_{k-1}
        rk = rk.at[:c].add(-Uk.T @ jsl.lu_solve(lu_prev, r_prev))
        return rk, rk

    _, rs = jax.lax.scan(forward, r[0], (_at(lus, slice(None, -1)), U, r[1:]))
    rs = jnp.concatenate([r[:1], rs])
    x_last = jsl.lu_solve(_at(lus, -1), rs[-1])

    def backward(x_next, blocks):
        lu, rk, Uk = blocks
        xk = jsl.lu_solve(lu, rk - Uk @ x_next[:c])
        return xk, xk

    _, xs = jax.lax.scan(backward, x_last, (_at(lus, slice(None, -1)), rs[:-1], U), reverse=True)
    return jnp.concatenate([xs, x_last[None]])


def matvec(D, U, x):
    """The product of the matrix with ``x`` (n, m)."""
    c = U.shape[2]
    y = jnp.einsum("kij,kj->ki", D, x)
    y = y.at[:-1].add(jnp.einsum("kij,kj->ki", U, x[1:, :c]))
    return y.at[1:, :c].add(jnp.einsum("kji,kj->ki", U, x[:-1]))

