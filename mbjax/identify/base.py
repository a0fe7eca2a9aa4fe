"""Base (identifiable) parameters by rank-revealing QR (Gautier 1990; Khalil & Dombre Sec. 12.3).

Some columns of the stacked regressor ``W`` are zero for every motion (parameters that never
act) and others are linear combinations of earlier ones (parameters that only act together).
Pivoted QR of the column-scaled ``W`` finds ``r = rank W`` independent columns ``W_1`` and
the rest ``W_2 = W_1 K``, so that

    W theta = W_1 (theta_1 + K theta_2) = W_1 theta_b,        theta_b = beta theta,

with ``K = R_11^{-1} R_12`` from ``W P = Q [R_11 R_12]``. ``theta_b`` (r,) are the base
parameters: exactly the combinations of ``theta`` that the torques determine.

The rank r is read from the pivots |R_ii| (relative to the first): it is cut at the widest gap
(in orders of magnitude) below :data:`RANK_CEILING`, with pivots under the rounding floor
(1e3 eps of W's dtype) counted as at the floor. A fixed threshold would split a nearly dependent
combination by chance (a URDF's pi/2 rounded to 11 digits leaves one pivot near 1e-9.5,
above or below a threshold of 1e-9 depending on the data); the gap does not move with it.
"""

from __future__ import annotations

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from ..checks import default_tolerance
from .parameters import ParameterLayout

#: columns whose norm is below this fraction of the largest are structurally zero (in float64;
#: in float32, 100 units of roundoff: the cancellations that make a column zero leave ~1e-8 there)
ZERO_COLUMN = 1e-12
#: entries of K = R_11^-1 R_12 below this fraction of the largest are rounded exact zeros (float64;
#: float32: 100 units of roundoff)
ZERO_COMBINATION = 1e-10
#: relative pivots |R_ii| / |R_00| above this (every column scaled to unit norm) are never cut
RANK_CEILING = 1e-6
#: a rank cut in a gap narrower than this many orders of magnitude comes with a warning
CLEAR_GAP = 3.0


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
    - ``rank_tol``: ``None`` (default) cuts the rank at the widest gap of the pivots (see the
      module's notes) and warns when that gap is narrow; a number: a column whose pivot
      ``|R_ii| / |R_00|`` is below ``rank_tol`` once every column has unit norm depends on the
      columns before it.

    **Returns:** a :class:`BaseParameters`.
    """
    dtype = np.asarray(W).dtype
    floor = default_tolerance(dtype, 0.0, 1000)
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2:
        raise ValueError(f"W has shape {W.shape}; expected a stacked regressor (rows, p)")
    p = W.shape[1]
    norms = np.linalg.norm(W, axis=0)
    if not np.all(np.isfinite(W)) or norms.max(initial=0.0) == 0.0:
        raise ValueError("W is zero or not finite; build it from finite, non-trivial states")
    acting = np.flatnonzero(norms > default_tolerance(dtype, ZERO_COLUMN, 100) * norms.max())
    scale = norms[acting]
    _, R, perm = scipy.linalg.qr(W[:, acting] / scale, mode="economic", pivoting=True)
    pivots = np.abs(np.diag(R)) / np.abs(R[0, 0])
    r = _rank_from_gap(pivots, floor) if rank_tol is None else int(np.sum(pivots > rank_tol))
    if W.shape[0] < p and r == W.shape[0]:
        raise ValueError(f"W has {W.shape[0]} rows for {p} parameters: stack more samples so that the rank "
                         "is not limited by the number of rows")
    # with D = diag(column norms), W = W_s D: theta_s = D theta, theta_b = theta_1 + D_1^-1 K_s D_2 theta_2
    K = scipy.linalg.solve_triangular(R[:r, :r], R[:r, r:])
    K = K * scale[None, perm[r:]] / scale[perm[:r], None]
    K[np.abs(K) < default_tolerance(dtype, ZERO_COMBINATION, 100) * max(1.0, np.abs(K).max(initial=0.0))] = 0.0
    independent = acting[perm[:r]]
    order = np.argsort(independent)  # keep the parameters in layout order
    beta = np.zeros((r, p))
    beta[np.arange(r), independent] = 1.0
    beta[:, acting[perm[r:]]] = K
    return BaseParameters(tuple(int(i) for i in independent[order]), jnp.asarray(beta[order]))


def _rank_from_gap(pivots, floor):
    """The number of relative pivots (non-increasing, pivots[0] = 1) above the widest gap in
    log10 whose lower side is below ``max(RANK_CEILING, 100 floor)``; pivots under ``floor``,
    and one more after the last, count as at the floor."""
    ceiling = max(RANK_CEILING, 100.0 * floor)
    levels = np.append(np.maximum(pivots, floor), floor)
    cuts = [k for k in range(1, len(levels)) if levels[k] < ceiling]  # rank k: levels[k] is the first dropped
    gaps = [np.log10(levels[k - 1] / levels[k]) for k in cuts]
    best = int(np.argmax(gaps))
    r = cuts[best]
    if gaps[best] < CLEAR_GAP:
        warnings.warn(
            f"the rank of W is not clear-cut: {r} base parameters, cut between relative pivots "
            f"{levels[r - 1]:.2e} and {levels[r]:.2e} (a gap of {gaps[best]:.1f} orders of magnitude). The base "
            "parameters may change with the data: use a longer or more exciting trajectory, or pass rank_tol",
            stacklevel=3,
        )
    return r
