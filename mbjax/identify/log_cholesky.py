"""Physical consistency of inertial parameters: the pseudo-inertia and its log-Cholesky
parametrisation (Wensing, Kim & Slotine 2018; Rucker & Wensing 2022).

The **pseudo-inertia** of a body with inertial parameters ``pi`` (see
:mod:`mbjax.identify.parameters`) is the second moment of its mass distribution,

    J = [[Sigma, h], [h^T, m]],   Sigma = int r r^T dm = tr(I_O)/2 E - I_O,   h = m c,

and ``pi`` belongs to a real body (positive mass, inertia satisfying the triangle
inequalities about every point) exactly when ``J`` is positive definite (Wensing et al. 2018,
Thm. 1). Every positive definite ``J`` is ``U U^T`` for exactly one upper-triangular ``U``
with positive diagonal; Rucker & Wensing write it with ten unconstrained numbers
``phi = (alpha, d_1, d_2, d_3, s_12, s_23, s_13, t_1, t_2, t_3)``:

    U = e^alpha [[e^d1, s_12, s_13, t_1],
                 [0,    e^d2, s_23, t_2],
                 [0,    0,    e^d3, t_3],
                 [0,    0,    0,    1  ]],

so ``m = e^(2 alpha)``. Any ``phi`` gives a physically consistent body, and the map is smooth
and one-to-one: an optimiser over ``phi`` cannot leave the set of real bodies.
"""

from __future__ import annotations

import jax.numpy as jnp

from .parameters import symmetric_from_parameters, SYM_COLS, SYM_ROWS


def pseudo_inertia(pi):
    """The 4x4 pseudo-inertia ``J`` (..., 4, 4) of inertial parameters ``pi`` (..., 10)."""
    m, h = pi[..., 0], pi[..., 1:4]
    IO = symmetric_from_parameters(pi[..., 4:10])
    eye = jnp.eye(3, dtype=pi.dtype)
    Sigma = 0.5 * jnp.trace(IO, axis1=-2, axis2=-1)[..., None, None] * eye - IO
    top = jnp.concatenate([Sigma, h[..., :, None]], axis=-1)
    bottom = jnp.concatenate([h, m[..., None]], axis=-1)[..., None, :]
    return jnp.concatenate([top, bottom], axis=-2)


def parameters_from_pseudo_inertia(J):
    """Inertial parameters ``pi`` (..., 10) of a pseudo-inertia ``J`` (..., 4, 4):
    ``m = J_44``, ``h = J[:3, 3]``, ``I_O = tr(Sigma) E - Sigma``."""
    Sigma = J[..., :3, :3]
    eye = jnp.eye(3, dtype=J.dtype)
    IO = jnp.trace(Sigma, axis1=-2, axis2=-1)[..., None, None] * eye - Sigma
    return jnp.concatenate([J[..., 3, 3:], J[..., :3, 3], IO[..., SYM_ROWS, SYM_COLS]], axis=-1)


def log_cholesky_factor(phi):
    """The factor ``U`` (..., 4, 4) of ``J = U U^T`` for log-Cholesky parameters ``phi`` (..., 10)."""
    alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3 = (phi[..., k] for k in range(10))
    z, one = jnp.zeros_like(alpha), jnp.ones_like(alpha)
    U = jnp.stack([
        jnp.stack([jnp.exp(d1), s12, s13, t1], -1),
        jnp.stack([z, jnp.exp(d2), s23, t2], -1),
        jnp.stack([z, z, jnp.exp(d3), t3], -1),
        jnp.stack([z, z, z, one], -1),
    ], -2)
    return jnp.exp(alpha)[..., None, None] * U


def parameters_from_log_cholesky(phi):
    """Inertial parameters ``pi`` (..., 10) of log-Cholesky parameters ``phi`` (..., 10); every
    ``phi`` gives a physically consistent body."""
    U = log_cholesky_factor(phi)
    return parameters_from_pseudo_inertia(U @ jnp.swapaxes(U, -1, -2))


def log_cholesky_from_parameters(pi):
    """Log-Cholesky parameters ``phi`` (..., 10) of physically consistent ``pi`` (..., 10); NaN
    where ``pi`` is not (its pseudo-inertia is not positive definite).

    ``U`` is the upper Cholesky factor: with ``P`` the reversal permutation,
    ``P J P = L L^T`` gives ``J = (P L P)(P L P)^T``.
    """
    J = pseudo_inertia(pi)
    L = jnp.linalg.cholesky(J[..., ::-1, ::-1])
    U = L[..., ::-1, ::-1]
    u44 = U[..., 3, 3]
    V = U / u44[..., None, None]
    return jnp.stack([jnp.log(u44), jnp.log(V[..., 0, 0]), jnp.log(V[..., 1, 1]), jnp.log(V[..., 2, 2]),
                      V[..., 0, 1], V[..., 1, 2], V[..., 0, 2], V[..., 0, 3], V[..., 1, 3], V[..., 2, 3]], -1)


def is_physically_consistent(pi, tol: float = 0.0):
    """Whether each body of ``pi`` (..., 10) is a real body: the smallest eigenvalue of its
    pseudo-inertia exceeds ``tol`` (..., bool)."""
    return jnp.linalg.eigvalsh(pseudo_inertia(pi))[..., 0] > tol


def entropic_divergence(pi, pi_prior):
    """The entropic (log-det Bregman) divergence of pseudo-inertias (Lee, Wensing & Park 2020):

        d(J, J0) = -log det(J0^-1 J) + tr(J0^-1 J) - 4  >= 0,   zero only at J = J0,

    invariant to the choice of body frame and of units. A regulariser towards prior values
    (e.g. CAD data) for the parameters the data cannot determine. (...,) per body.
    """
    J, J0 = pseudo_inertia(pi), pseudo_inertia(pi_prior)
    A = jnp.linalg.solve(J0, J)
    _, logdet = jnp.linalg.slogdet(A)
    return -logdet + jnp.trace(A, axis1=-2, axis2=-1) - 4.0
