"""mbjax.cholesky: LAPACK's Cholesky factor and solves in sub-batches, and the SPD solve built on
them, against numpy's dense solve (values) and JAX's derivatives of ``jnp.linalg.solve``
(derivatives: every order, forward and reverse, single and vmapped)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mbjax.cholesky import PARALLEL_WORK, cho_inverse, cho_solve, cholesky, spd_solve

RNG = np.random.default_rng(7)


def spd(*lead, n):
    A = RNG.standard_normal(lead + (n, n))
    return jnp.asarray(A @ np.swapaxes(A, -1, -2) + n * np.eye(n))


# n = 40: a factor's work 21k, a solve's with one right-hand side 1,600: 300 matrices are
# factored in sub-batches of 9 and solved in sub-batches of 124 (lax.map and its remainder)
N, BATCH = 40, 300


def test_the_batch_is_large_enough_for_sub_batches():
    assert 300 * N ** 3 / 3 >= PARALLEL_WORK and 300 * N * N >= PARALLEL_WORK  # the case exercises them


def test_factor_and_solve_match_numpy():
    A, b = spd(BATCH, n=N), jnp.asarray(RNG.standard_normal((BATCH, N, 3)))
    L = cholesky(A)
    np.testing.assert_allclose(L, np.linalg.cholesky(np.asarray(A)), rtol=0, atol=1e-12)
    x = np.linalg.solve(np.asarray(A), np.asarray(b))
    for out in (cho_solve(L, b), jax.vmap(cho_solve)(L, b), spd_solve(A, b), jax.jit(jax.vmap(spd_solve))(A, b)):
        np.testing.assert_allclose(out, x, rtol=0, atol=1e-13)
    v = spd_solve(A, b[..., 0])  # right-hand side vectors
    np.testing.assert_allclose(v, x[..., 0], rtol=0, atol=1e-13)
    inverse = np.linalg.inv(np.asarray(A))
    for out in (cho_inverse(L), jax.jit(jax.vmap(cho_inverse))(L)):
        np.testing.assert_allclose(out, inverse, rtol=0, atol=1e-14)


def test_one_factor_for_a_vmapped_right_hand_side():
    """vmap over the right-hand sides only (a jacfwd's tangents): one solve with them side by
    side, also under an outer vmap over the matrices."""
    A, B = spd(7, n=5), jnp.asarray(RNG.standard_normal((7, 11, 5, 2)))
    x = jax.vmap(jax.vmap(spd_solve, in_axes=(None, 0)))(A, B)
    np.testing.assert_allclose(x, np.linalg.solve(np.asarray(A)[:, None], np.asarray(B)), rtol=0, atol=1e-13)
    J = jax.jit(jax.vmap(jax.jacfwd(spd_solve, argnums=1)))(A, B[:, 0, :, 0])
    np.testing.assert_allclose(J, np.linalg.inv(np.asarray(A)), rtol=0, atol=1e-13)


def test_a_given_inverse_is_used_where_vmapped_over_the_matrices():
    """With A^-1 given, a vmap over the matrices multiplies by their inverses (no LAPACK call in
    the program); one matrix solves by its factor; the values are the dense solve's either way."""
    A, B = spd(7, n=5), jnp.asarray(RNG.standard_normal((7, 5, 2)))
    inverse = jnp.asarray(np.linalg.inv(np.asarray(A)))
    x = np.linalg.solve(np.asarray(A), np.asarray(B))
    batched = jax.jit(jax.vmap(lambda A, b, i: spd_solve(A, b, inverse=i)))
    one = jax.jit(lambda A, b, i: spd_solve(A, b, inverse=i))
    for f, args, ref, lapack in ((batched, (A, B, inverse), x, False), (one, (A[0], B[0], inverse[0]), x[0], True)):
        np.testing.assert_allclose(f(*args), ref, rtol=0, atol=1e-13)
        assert ("lapack" in f.lower(*args).compile().as_text()) == lapack


@pytest.mark.parametrize("with_inverse", [None, True, False], ids=["factor", "inverse", "inverse-only"])
@pytest.mark.parametrize("order", ["grad", "jacfwd", "hessian", "jacfwd(jacrev)"])
def test_derivatives_match_dense_solve(order, with_inverse):
    """Derivatives with respect to the matrix and the right-hand side, vmapped over a batch
    large enough for sub-batches, equal those of jnp.linalg.solve; also with A^-1 given (its
    products are solves, differentiated through A alone), with A's factor for the others
    (``factorise``, the default) or without."""
    n = 9

    def loss(solve):
        def f(X, b):
            A = X @ X.T + n * jnp.eye(n)
            return jnp.sum(jnp.sin(solve(A, b)) ** 2)
        return f

    transform = {"grad": jax.grad, "jacfwd": jax.jacfwd, "hessian": jax.hessian,
                 "jacfwd(jacrev)": lambda f, **kw: jax.jacfwd(jax.jacrev(f, **kw), **kw)}[order]
    X, b = jnp.asarray(RNG.standard_normal((BATCH, n, n))), jnp.asarray(RNG.standard_normal((BATCH, n)))
    solve = spd_solve if with_inverse is None else (
        lambda A, b: spd_solve(A, b, inverse=jnp.linalg.inv(A), factorise=with_inverse))
    got = jax.jit(jax.vmap(transform(loss(solve), argnums=(0, 1))))(X, b)
    ref = jax.jit(jax.vmap(transform(loss(jnp.linalg.solve), argnums=(0, 1))))(X, b)
    for g, r in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-12)
