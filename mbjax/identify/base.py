"""Base (identifiable) parameters by rank-revealing QR (Gautier 1990; Khalil & Dombre Sec. 12.3).

Some columns of the stacked regressor ``W`` are zero for every motion (parameters that never
act) and others are linear combinations of earlier ones (parameters that only act together).
Pivoted QR of the column-scaled ``W`` finds ``r = rank W`` independent columns ``W_1`` and
the rest ``W_2 = W_1 K``, so that

    W theta = W_1 (theta_1 + K theta_2) = W_1 theta_b,        theta_b = beta theta,

with ``K = R_11^{-1} R_12`` from ``W P = Q [R_11 R_12]``. ``theta_b`` (r,) are the base
parameters: exactly the combinations of ``theta`` that the torques determine.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from .parameters import ParameterLayout

#: columns whose norm is below this fraction of the largest are structurally zero
ZERO_COLUMN = 1e-12
#: |R_ii| below this (after scaling every column to unit norm) marks a dependent column
#: (float64 data; float32 data use 1e3 eps = 1.2e-4)
RANK_TOLERANCE = 1e-9


class BaseParameters(eqx.Module):
    """The base-parameter map ``theta_b = beta theta`` of a regressor.

    - ``independent``: indices (r,) of the columns of ``W`` kept (``W_b = W[:, independent]``);
    - ``beta`` (r, p): ``theta_b = beta @ theta``; ``W @ theta == W_b @ theta_b``.
    """

    independent: tuple = eqx.field(static=True)
    beta: jax.Array

    @property
    def rank(self) -> int:
        return len(self.independent)

    def __call__(self, theta):
        """The base parameters ``beta @ theta`` (r,) of full parameters ``theta`` (p,)."""
        return self.beta @ theta

    def regressor(self, Y):
        """The base regressor: the independent columns of ``Y`` (..., p) -> (..., r)."""
        return jnp.take(jnp.asarray(Y), jnp.asarray(self.independent, dtype=jnp.int32), axis=-1)

    def names(self, layout: ParameterLayout, digits: int = 4) -> tuple:
        """Each base parameter as the combination of named parameters it stands for, e.g.
        ``"Izz[link1] + 0.1600 m[link2]"``."""
        names, beta = layout.names, np.asarray(self.beta)
        out = []
        for i, row in zip(self.independent, beta):
            terms = [names[i]]
            for j in np.flatnonzero(row):
                if j != i:
                    terms.append(f"{'-' if row[j] < 0 else '+'} {abs(row[j]):.{digits}g} {names[j]}")
            out.append(" ".join(terms))
        return tuple(out)


def base_parameters(W, rank_tol: float | None = None) -> BaseParameters:
    """The base parameters of a stacked regressor ``W`` (rows, p).

    Use states that excite every parameter that can act: random states (the structural
    rank) or a long exciting trajectory. Runs in NumPy/SciPy at set-up time (not jittable).

    **Arguments:**

    - ``W`` (rows, p): e.g. :func:`stacked_regressor` over random states; rows >= p.
    - ``rank_tol``: a column whose pivot ``|R_ii|`` is below ``rank_tol`` once every column
      has unit norm depends on the columns before it (default :data:`RANK_TOLERANCE`, or
      ``1e3 eps`` for a float32 ``W``, whose rounding is far larger).

    **Returns:** a :class:`BaseParameters`.
    """
    if rank_tol is None:
        rank_tol = max(RANK_TOLERANCE, 1e3 * float(np.finfo(np.asarray(W).dtype).eps))
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2:
        raise ValueError(f"W has shape {W.shape}; expected a stacked regressor (rows, p)")
    p = W.shape[1]
    norms = np.linalg.norm(W, axis=0)
    if not np.all(np.isfinite(W)) or norms.max(initial=0.0) == 0.0:
        raise ValueError("W is zero or not finite; build it from finite, non-trivial states")
    acting = np.flatnonzero(norms > ZERO_COLUMN * norms.max())
    scale = norms[acting]
    _, R, perm = scipy.linalg.qr(W[:, acting] / scale, mode="economic", pivoting=True)
    diag = np.abs(np.diag(R))
    r = int(np.sum(diag > rank_tol * diag[0]))
    if W.shape[0] < p and r == W.shape[0]:
        raise ValueError(f"W has {W.shape[0]} rows for {p} parameters: stack more samples so that the rank "
                         "is not limited by the number of rows")
    # with D = diag(column norms), W = W_s D: theta_s = D theta, theta_b = theta_1 + D_1^-1 K_s D_2 theta_2
    K = scipy.linalg.solve_triangular(R[:r, :r], R[:r, r:])
    K = K * scale[None, perm[r:]] / scale[perm[:r], None]
    K[np.abs(K) < 1e-10 * max(1.0, np.abs(K).max(initial=0.0))] = 0.0  # rounding of exact zeros
    independent = acting[perm[:r]]
    order = np.argsort(independent)  # keep the parameters in layout order
    beta = np.zeros((r, p))
    beta[np.arange(r), independent] = 1.0
    beta[:, acting[perm[r:]]] = K
    return BaseParameters(tuple(int(i) for i in independent[order]), jnp.asarray(beta[order]))
