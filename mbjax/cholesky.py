"""Cholesky factor and solves by LAPACK, safe to batch on XLA:CPU, and a differentiable SPD solve.

jaxlib 0.10's CPU LAPACK kernels split a batch whose estimated work (matrices times flops per
matrix) reaches :data:`PARALLEL_WORK` into pieces on XLA's thread pool and block a pool thread
until the pieces finish (``jax::ParallelBatchMap``). When as many such calls run at once as the
pool has threads, every thread waits for pieces queued behind the others and the program hangs
(docs/errors.md, Troubleshooting): e.g. second derivatives of a vmapped ``aba``, whose
differentiated solves are independent of each other. Here every batch, given as leading axes or
made by ``jax.vmap``, is factored and solved in sub-batches below that work, one after another
(``jax.lax.map``), which LAPACK runs on the calling thread: no call waits on the pool. What
that costs (pinned to one core, µs per matrix, one batched call against sub-batches): the
factors of 256 matrices, nv = 38 6.4 against 6.7, nv = 18 0.95 against 1.17; M^-1 of 128 (a
chunk of states), nv = 38 21.3 against 24.6, nv = 18 4.1 against 4.2
(benchmarks/README.md, session 44). A right-hand
side that ``jax.vmap`` batches alone (a ``jax.jacfwd``'s tangents) is solved with its batch side
by side, and by M^-1 and a product when the batch has more columns than M has rows: nv = 38 with
114 tangents 58.6 against the batched LAPACK solve's 66.7.

:func:`spd_solve` is ``jax.lax.custom_linear_solve`` around them: its derivatives (any order,
forward and reverse) are solves with the same factor, never the derivative of the factorisation.
:func:`cholesky`, :func:`cho_solve` and :func:`cho_inverse` themselves are not differentiable
(their batching rules are JAX ``custom_vmap`` functions): differentiate :func:`spd_solve`.
"""

from __future__ import annotations

import math

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
    xs = [x.reshape((math.prod(lead),) + x.shape[-2:]) for x in xs]
    size = max(1, (PARALLEL_WORK - 1) // work)
    if xs[0].shape[0] <= size:
        out = jax.vmap(fn)(*xs)
    else:
        out = jax.lax.map(lambda ys: fn(*ys), xs, batch_size=size)
    return out.reshape(lead + out.shape[1:])


def _vmapped_as_leading_axis(fn):
    """``fn`` of one array (..., n, n) as a ``custom_vmap`` whose vmapped axis is one more of
    its leading axes."""
    fn = custom_vmap(fn)
    fn.def_vmap(lambda axis_size, in_batched, x: (fn(x), True))
    return fn


@_vmapped_as_leading_axis
def cholesky(A):
    """Lower Cholesky factor L of symmetric positive-definite A (..., n, n), A = L L^T."""
    return _in_sub_batches(jnp.linalg.cholesky, max(A.shape[-1] ** 3 // 3, 1), A)


@custom_vmap
def cho_solve(L, B, inverse=None):
    """X with L L^T X = B, for lower factors L (..., n, n) and B (..., n, k). ``inverse``: (L
    L^T)^-1, where the caller has it, for the vmapped solves that take products instead: a vmap
    over the matrices (one product each, no LAPACK call), or over B alone with more right-hand
    sides than n (module docstring). Vmapped over B alone: one solve with the batch's
    right-hand sides side by side."""
    n, k = B.shape[-2:]
    return _in_sub_batches(lambda l, b: jax.scipy.linalg.cho_solve((l, True), b), max(n * n * k, 1), L, B)


@cho_solve.def_vmap
def _cho_solve_vmap(axis_size, in_batched, L, B, inverse):
    L_batched, B_batched, inverse_batched = in_batched
    if inverse_batched:  # a batch of matrices and their inverses: products
        return inverse @ B, True
    if not L_batched:  # one factor for the whole batch: its right-hand sides side by side
        columns = jnp.moveaxis(B, 0, -1)  # (..., n, k, batch)
        columns = columns.reshape(columns.shape[:-2] + (columns.shape[-2] * axis_size,))  # sizes given: n may be 0
        n = L.shape[-1]
        if columns.shape[-1] > n:  # more of them than the order: by the inverse and a product
            X = (cho_inverse(L) if inverse is None else inverse) @ columns
        else:
            X = cho_solve(L, columns, inverse)
        return jnp.moveaxis(X.reshape(B.shape[1:] + (axis_size,)), -1, 0), True
    if not B_batched:
        B = jnp.broadcast_to(B, (axis_size,) + B.shape)
    return cho_solve(L, B), True


@_vmapped_as_leading_axis
def cho_inverse(L):
    """A^-1 from the lower factor L (..., n, n) of A."""
    n = L.shape[-1]
    eye = jnp.eye(n, dtype=L.dtype)
    return _in_sub_batches(lambda l: jax.scipy.linalg.cho_solve((l, True), eye), max(n ** 3, 1), L)


def spd_solve(A, b, inverse=None, factorise: bool = True):
    """A^-1 b for symmetric positive-definite A (..., n, n) and b (..., n) or (..., n, k), by
    Cholesky; differentiable in A and b, each derivative a solve with the same factor.
    ``inverse``: A^-1, where the caller has it (not differentiated), for the solves that take
    products with it instead (:func:`cho_solve`: vmapped over the matrices, or over many
    right-hand sides), A's factor solving the others (then a product with the inverse is not in
    the program, nor, if nothing else uses it, the inverse); ``factorise=False``: every solve a
    product with it, no factorisation."""
    vector = b.ndim == A.ndim - 1
    B = b[..., None] if vector else b
    inverse = None if inverse is None else jax.lax.stop_gradient(inverse)
    if factorise:
        L = cholesky(jax.lax.stop_gradient(A))
        solve = lambda _, r: cho_solve(L, r, inverse)  # noqa: E731
    else:
        solve = lambda _, r: inverse @ r  # noqa: E731
    X = jax.lax.custom_linear_solve(lambda x: A @ x, B, solve, symmetric=True)
    return X[..., 0] if vector else X
