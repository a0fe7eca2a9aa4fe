"""Hinge forces first, by the Schur complement of the KKT system (Mufti's Eq. 14), then the
accelerations body by body (Eqs. 12-13).

From M x = u + G lambda and -G^T x = gamma:

    (G^T M^-1 G) lambda = -gamma - G^T M^-1 u                          (Eq. 14)
    x = M^-1 (u + G lambda)                                            (Eqs. 12-13)

G^T M^-1 G = H^T J^-1 H is factored as the Appendix does (Eqs. A-3 to A-5): with the
Cholesky factors M_i = L_i L_i^T of the bodies' 6 x 6 blocks, the QR factorisation
L^-1 G = Q R gives G^T M^-1 G = R^T R without forming the product (better conditioned than
a Cholesky factorisation of the product). O(n m^2) for m constraint rows.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .kkt import constraint_matrix
from .newton_euler import NewtonEuler


def solve_schur(ne: NewtonEuler):
    """Accelerations x (nb, 6) and multipliers lambda (nb, 6) by Eqs. (14), (12)-(13)."""
    nb = ne.M.shape[0]
    G, cols = constraint_matrix(ne)
    L = jnp.linalg.cholesky(ne.M)  # J = L L^T, body by body
    # L^-1 [G u] in one solve (one LAPACK call: independent ones deadlock jaxlib 0.10 under vmap)
    HLu = jax.scipy.linalg.solve_triangular(L, jnp.concatenate([G.reshape(nb, 6, -1), ne.u_total[..., None]], -1),
                                            lower=True)
    H, Lu = HLu[..., :-1].reshape(6 * nb, -1), HLu[..., -1].reshape(-1)
    _, R = jnp.linalg.qr(H)  # L^-1 G = Q R , so G^T M^-1 G = R^T R 
    b = -ne.gamma.reshape(-1)[cols] - H.T @ Lu
    y = jax.scipy.linalg.solve_triangular(R, b, trans="T", lower=False)
    lam_a = jax.scipy.linalg.solve_triangular(R, y, lower=False)
    # x = M^-1 (u + G lambda) = L^-T (L^-1 u + H lambda)
    z = (Lu + H @ lam_a).reshape(nb, 6, 1)
    x = jax.scipy.linalg.solve_triangular(L, z, lower=True, trans="T")[..., 0]
    lam = jnp.zeros(6 * nb, G.dtype).at[cols].set(lam_a)
    return x, lam.reshape(nb, 6)
