"""Cholesky factor and solves by LAPACK, safe to batch on XLA:CPU, and a differentiable SPD solve.

jaxlib 0.10's CPU LAPACK kernels split a batch whose estimated work (matrices times flops per
matrix) reaches :data:`PARALLEL_WORK` into pieces on XLA's thread pool and block a pool thread
until the pieces finish (``jax::ParallelBatchMap``). When as many such calls run at once as the
pool has threads, every thread waits for pieces queued behind the others and the program hangs
(docs/errors.md, Troubleshooting): e.g. second derivatives of a vmapped ``aba``, whose
differentiated solves are independent of each other. Here every batch, given as leading axes or
made by ``jax.vmap``, is factored and solved in sub-batches below that work, one after another
(``jax.lax.map``), which LAPACK runs on the calling thread: no call waits on the pool. Measured
against one batched call (256 matrices, per matrix, medians): nv = 38 with 114 right-hand sides
65 against 82 µs, 38 with 1: 8.0 against 7.6; nv = 18 with 54: 12.5 against 14.6; pinned to one
core, where the pool has a single thread, equal within 3 % or faster (benchmarks/README.md).

:func:`spd_solve` is ``jax.lax.custom_linear_solve`` around them: its derivatives (any order,
forward and reverse) are solves with the same factor, never the derivative of the factorisation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

#: jaxlib 0.10's threshold: a batched LAPACK call with at least this much estimated work (its
#: ``GetLapackBatchChunkSize``) is split across the thread pool
PARALLEL_WORK = 200_000


def _in_sub_batches(fn, work, *xs):
    """``fn`` (one matrix problem, each of ``xs`` (..., m, n)) over their leading axes, vmapped
    over sub-batches whose work (``work`` flops each) stays below :data:`PARALLEL_WORK`."""
    lead = xs[0].shape[:-2]
    if not lead:
        return fn(*xs)
    xs = [x.reshape((-1,) + x.shape[-2:]) for x in xs]
    size = max(1, (PARALLEL_WORK - 1) // work)
    if xs[0].shape[0] <= size:
        out = jax.vmap(fn)(*xs)
    else:
        out = jax.lax.map(lambda ys: fn(*ys), xs, batch_size=size)
    return out.reshape(lead + out.shape[1:])


@custom_vmap
def cholesky(A):
    """Lower Cholesky factor L of symmetric positive-definite A (..., n, n), A = L L^T."""
    return _in_sub_batches(jnp.linalg.cholesky, max(A.shape[-1] ** 3 // 3, 1), A)


@cholesky.def_vmap
def _cholesky_vmap(axis_size, in_batched, A):
    return cholesky(A), True  # the vmapped axis is one more leading axis


@custom_vmap
def cho_solve(L, B):
    """X with L L^T X = B, for lower factors L (..., n, n) and B (..., n, k)."""
    n, k = B.shape[-2:]
    return _in_sub_batches(lambda l, b: jax.scipy.linalg.cho_solve((l, True), b), max(n * n * k, 1), L, B)


@cho_solve.def_vmap
def _cho_solve_vmap(axis_size, in_batched, L, B):
    L_batched, B_batched = in_batched
    if not L_batched:  # one factor for the whole batch: its right-hand sides side by side
        columns = jnp.moveaxis(B, 0, -1)  # (..., n, k, batch)
        columns = columns.reshape(columns.shape[:-2] + (-1,))
        n = L.shape[-1]
        if columns.shape[-1] > n:  # more of them than the order: by the inverse and a product
            X = cho_solve(L, jnp.broadcast_to(jnp.eye(n, dtype=L.dtype), L.shape)) @ columns
        else:
            X = cho_solve(L, columns)
        return jnp.moveaxis(X.reshape(B.shape[1:] + (axis_size,)), -1, 0), True
    if not B_batched:
        B = jnp.broadcast_to(B, (axis_size,) + B.shape)
    return cho_solve(L, B), True


def spd_solve(A, b):
    """A^-1 b for symmetric positive-definite A (..., n, n) and b (..., n) or (..., n, k), by
    Cholesky; differentiable in A and b, each derivative a solve with the same factor."""
    vector = b.ndim == A.ndim - 1
    B = b[..., None] if vector else b
    L = cholesky(jax.lax.stop_gradient(A))
    X = jax.lax.custom_linear_solve(lambda x: A @ x, B, lambda _, r: cho_solve(L, r), symmetric=True)
    return X[..., 0] if vector else X
