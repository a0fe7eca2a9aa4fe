"""Ordinary (optionally weighted) least-squares identification of base parameters."""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from .optimize import quadratic_form


class LeastSquaresFit(NamedTuple):
    """Result of :func:`least_squares`.

    - ``theta`` (p,): the estimate;
    - ``std`` (p,): its standard deviations ``sigma sqrt(diag((W^T W)^-1))`` (Gautier's
      identification quality: a relative deviation ``std / |theta|`` above a few percent marks
      a poorly excited parameter);
    - ``sigma``: the residual standard deviation ``|W theta - tau| / sqrt(rows - p)``.
    """

    theta: jax.Array
    std: jax.Array
    sigma: jax.Array


@eqx.filter_jit
def least_squares(W, tau, weights=None) -> LeastSquaresFit:
    """Solve ``min |diag(w) (W theta - tau)|`` by QR.

    Use it on the base regressor (``base.regressor(W)``), whose columns are independent;
    the full regressor is rank-deficient and has no unique solution.

    **Arguments:**

    - ``W`` (rows, p): stacked regressor (:func:`stacked_regressor`); ``tau`` (N, nv) or
      (rows,): measured torques, stacked the same way.
    - ``weights``: ``None``, per joint (nv,) (e.g. the inverse noise standard deviation of each
      joint's torque) or per row (rows,).

    **Returns:** a :class:`LeastSquaresFit`.
    """
    W, tau = jnp.asarray(W), jnp.asarray(tau).reshape(-1)
    rows, p = W.shape
    if rows <= p:
        raise ValueError(f"{rows} equations for {p} parameters: stack more samples")
    if weights is not None:
        w = jnp.asarray(weights, W.dtype)
        if rows % w.shape[0]:
            raise ValueError(f"weights of shape {w.shape} fit neither the {rows} rows nor a joint count")
        w = jnp.tile(w, rows // w.shape[0])
        W, tau = W * w[:, None], tau * w
    R, z, c = quadratic_form(W, tau)
    theta = jsl.solve_triangular(R, z)
    sigma = jnp.sqrt(c / (rows - p))
    Rinv = jsl.solve_triangular(R, jnp.eye(p, dtype=W.dtype))
    return LeastSquaresFit(theta, sigma * jnp.linalg.norm(Rinv, axis=1), sigma)
