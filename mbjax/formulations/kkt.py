"""The dense symmetric KKT system of Mufti's Eq. (10) / (49) (with Remark 5's prismatic rows
and Remark 3's prescribed base), assembled and solved as one matrix.

    [[ M,   -G ], [-G^T, 0 ]] (x, lambda) = (u, gamma)                  (Eqs. 10, 49)

M is block diagonal, G holds the incidence matrix C and the lever arms L (its blocks are
-Phi(l_jj)^T Q_j for a joint's child and +Phi(l_pj)^T Q_j for its parent, see
``newton_euler``). Solved by LU: the matrix is symmetric but indefinite. O((6n)^3).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .newton_euler import NewtonEuler


def constraint_matrix(ne: NewtonEuler):
    """G (6 nb, m) with only the m real constraint columns, and their static index."""
    nb = ne.M.shape[0]
    j = np.arange(nb)
    G = jnp.zeros((nb + 1, 6, nb, 6), ne.M.dtype)
    G = G.at[j, :, j, :].set(ne.G_child).at[ne.parent, :, j, :].add(ne.G_parent)[:nb]
    cols = np.flatnonzero(ne.active.reshape(-1))
    return G.reshape(6 * nb, 6 * nb)[:, cols], cols


def block_diagonal(blocks):
    """Dense block-diagonal matrix of (n, k, k) blocks."""
    n, k, _ = blocks.shape
    return jnp.einsum("ij,iab->iajb", jnp.eye(n, dtype=blocks.dtype), blocks).reshape(n * k, n * k)


def solve_kkt(ne: NewtonEuler):
    """Accelerations x (nb, 6) and multipliers lambda (nb, 6) from the dense KKT system."""
    nb = ne.M.shape[0]
    G, cols = constraint_matrix(ne)
    m = len(cols)
    K = jnp.block([[block_diagonal(ne.M), -G], [-G.T, jnp.zeros((m, m), G.dtype)]])
    sol = jnp.linalg.solve(K, jnp.concatenate([ne.u_total.reshape(-1), ne.gamma.reshape(-1)[cols]]))
    lam = jnp.zeros(6 * nb, G.dtype).at[cols].set(sol[6 * nb:])
    return sol[: 6 * nb].reshape(nb, 6), lam.reshape(nb, 6)
