"""Small dense linear algebra, batched and written out for XLA:CPU.

``jnp.linalg.solve``/``inv`` on a batch of 6 x 6 matrices lowers to LAPACK custom calls and a
pivot-permutation loop per call: dozens of operations, each paying XLA:CPU's per-operation
cost, in every step of a tree recursion. The inverse of a small symmetric positive-definite
matrix written out by 2 x 2 blocks, with closed forms for 1 x 1 to 3 x 3, compiles to a few
fused kernels instead.
"""

from __future__ import annotations

import jax.numpy as jnp


def _matmul(A, B):
    return jnp.einsum("...ij,...jk->...ik", A, B)


def spd_inverse(A):
    """Inverse of a batch of small symmetric positive-definite matrices ``(..., n, n)``.

    n <= 3: the adjugate over the determinant (for 3 x 3, the rows of the adjugate are the
    cross products of the columns). Larger: by blocks A = [[P, B], [B^T, C]] with the Schur
    complement S = C - B^T P^-1 B (both SPD, so no pivoting is needed):

        A^-1 = [[P^-1 + X S^-1 X^T, -X S^-1], [-S^-1 X^T, S^-1]],   X = P^-1 B.
    """
    # the symmetric part: rounding makes a computed "symmetric" matrix slightly asymmetric,
    # and in a recursion (each inverse feeding the next matrix) that would build up
    return _inverse(0.5 * (A + jnp.swapaxes(A, -1, -2)))


def _inverse(A):
    """:func:`spd_inverse` of a symmetric A."""
    n = A.shape[-1]
    if n == 1:
        return 1.0 / A
    if n == 2:
        a, b, c = A[..., 0, 0], A[..., 0, 1], A[..., 1, 1]
        adj = jnp.stack([jnp.stack([c, -b], -1), jnp.stack([-b, a], -1)], -2)
        return adj / (a * c - b * b)[..., None, None]
    if n == 3:
        c0, c1, c2 = A[..., :, 0], A[..., :, 1], A[..., :, 2]
        adj = jnp.stack([jnp.cross(c1, c2), jnp.cross(c2, c0), jnp.cross(c0, c1)], -2)
        return adj / jnp.sum(c0 * adj[..., 0, :], -1)[..., None, None]
    k = min(3, n // 2)
    P, B, C = A[..., :k, :k], A[..., :k, k:], A[..., k:, k:]
    P_inv = spd_inverse(P)
    X = _matmul(P_inv, B)
    S_inv = spd_inverse(C - _matmul(jnp.swapaxes(B, -1, -2), X))
    XS = _matmul(X, S_inv)
    top = jnp.concatenate([P_inv + _matmul(XS, jnp.swapaxes(X, -1, -2)), -XS], -1)
    return jnp.concatenate([top, jnp.concatenate([-jnp.swapaxes(XS, -1, -2), S_inv], -1)], -2)
