"""Solvers for the equality-constrained equations of motion (Mufti 1983 Eq. 73 and Appendix)

    M qdd = f + A^T lam,        A qdd = b,

with M (nv, nv) symmetric positive definite, f = tau - h the free generalized force, A = Phi_q
(nc, nv) and b the (stabilised) acceleration right-hand side. Each solver returns
``(qdd, lam)``.

- ``"kkt"``: the dense Lagrangian (KKT) matrix ``[[M, A^T], [A, 0]]`` by LU (Eq. 73).
- ``"schur"``: range space: ``(A M^-1 A^T) lam = b - A M^-1 f``, with the Cholesky factor
  of the Schur complement from the QR of ``L^-1 A^T`` (Eq. A-3 ... A-5; M = L L^T).
- ``"nullspace"``: reduced coordinates: ``A^T = Q R``, ``qdd = Y b + Z x'`` with
  ``Y = Q R^-T``, ``Z = Q'`` (Eq. A-6), ``(Z^T M Z) x' = Z^T (f - M Y b)``.
- ``"svd"``: rank-deficient A (redundant constraints, singular configurations):
  ``L^-1 A^T = V S W^T`` and ``lam = W S^-2 W^T (b - A M^-1 f)`` (Eq. A-7 ... A-12), the
  minimum-norm multipliers; singular values below ``rcond * s_max`` count as zero. Motion
  is unique whenever the constraints are consistent; redundant multipliers are not.
- ``"damped"``: ``(A M^-1 A^T + mu E) lam = b - A M^-1 f``, ``mu = damping * max diag``:
  a regularised (soft-constraint) solve, defined for any A; its relative error is about
  ``damping * cond(A M^-1 A^T)`` where the exact solve exists.

The first three need A of full row rank and raise a clear error (``eqx.error_if``) when it is
not, instead of returning NaN: the diagonal of the triangular factor they compute anyway
(LU pivots, R of the QR) measures the rank. ``checked=False`` leaves the check out (an
optimiser's trial states may pass a singular configuration: their non-finite or huge
accelerations must reach it, not raise).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_factor, cho_solve, lu_factor, lu_solve, solve_triangular

from ..checks import check_nonnegative
from ..dynamics.stabilization import baumgarte

METHODS = ("kkt", "schur", "nullspace", "svd", "damped")


def _full_rank(x, diag, method, rcond, checked):
    """``x`` unchanged, or an error when the triangular factor's diagonal reveals rank loss."""
    if not checked:
        return x
    d = jnp.abs(diag)
    singular = jnp.min(d, initial=jnp.inf) <= rcond * jnp.max(d, initial=0.0)
    return eqx.error_if(
        x,
        singular,
        f"constrained dynamics (method={method!r}): the loop-closure Jacobian Phi_q is rank-deficient "
        "(redundant constraints, or a singular configuration such as a change point). "
        "Use method='svd' or method='damped', or remove the redundant rows (add_loop(..., directions=...)).",
    )


def solve_kkt(M, f, A, b, rcond, checked=True):
    """Eq. 73: LU of the Lagrangian matrix [[M, -A^T], [-A, 0]] (qdd, lam)."""
    nv = M.shape[0]
    K = jnp.block([[M, -A.T], [-A, jnp.zeros((A.shape[0],) * 2, M.dtype)]])
    lu, piv = lu_factor(K)
    x = lu_solve((lu, piv), jnp.concatenate([f, -b]))
    x = _full_rank(x, jnp.diagonal(lu), "kkt", rcond, checked)
    return x[:nv], x[nv:]


def _forward_substitution(M, A, f):
    """M's Cholesky factor L and L^-1 [A^T f] split as (L^-1 A^T, L^-1 f), in one triangular
    solve: independent batched LAPACK calls can run at once and deadlock jaxlib 0.10's CPU
    runtime under vmap (docs/errors.md, Troubleshooting), so each solver below is one chain of
    them. With these, A M^-1 f = (L^-1 A^T)^T L^-1 f and M^-1 (f + A^T lam) = L^-T (L^-1 f + L^-1 A^T lam)."""
    L = cho_factor(M, lower=True)[0]
    Z = solve_triangular(L, jnp.concatenate([A.T, f[:, None]], axis=1), lower=True)
    return L, Z[:, :-1], Z[:, -1]


def _back_substitution(L, Abar, zf, lam):
    """qdd = M^-1 (f + A^T lam) = L^-T (L^-1 f + L^-1 A^T lam)."""
    return solve_triangular(L, zf + Abar @ lam, lower=True, trans=1)


def solve_schur(M, f, A, b, rcond, checked=True):
    """Eq. A-3 ... A-5: lam from the Cholesky factor R^T R of A M^-1 A^T, R from QR(L^-1 A^T)."""
    L, Abar, zf = _forward_substitution(M, A, f)  # Abar = L^-1 A^T (nv, nc)
    R = jnp.linalg.qr(Abar, mode="r")
    R = _full_rank(R, jnp.diagonal(R), "schur", rcond, checked)
    u = b - Abar.T @ zf  # b - A M^-1 f
    lam = solve_triangular(R, solve_triangular(R, u, trans=1), trans=0)  # (R^T R)^-1 u
    return _back_substitution(L, Abar, zf, lam), lam


def solve_nullspace(M, f, A, b, rcond, checked=True):
    """Eq. A-6: qdd = Y b + Z x' with A^T = Q R, Y = Q R^-T, Z = Q' (orthonormal null basis).

    y = R^-T b and x' = (Z^T M Z)^-1 Z^T (f - M Q y) in one solve of the block lower-triangular
    system [[R^T, 0], [Z^T M Q, Z^T M Z]] [y; x'] = [b; Z^T f] (one chain of LAPACK calls: see
    :func:`_forward_substitution`); qdd = Q y + Z x'."""
    nc = A.shape[0]
    Q1, R1 = jnp.linalg.qr(A.T, mode="complete")
    R = _full_rank(R1[:nc], jnp.diagonal(R1[:nc]), "nullspace", rcond, checked)
    Q, Z = Q1[:, :nc], Q1[:, nc:]
    top = jnp.concatenate([R.T, jnp.zeros((nc, Z.shape[1]), M.dtype)], axis=1)
    qdd = Q1 @ jnp.linalg.solve(jnp.concatenate([top, Z.T @ M @ Q1]), jnp.concatenate([b, Z.T @ f]))
    lam = solve_triangular(R, Q.T @ (M @ qdd - f))  # A^T lam = M qdd - f, exactly solvable
    return qdd, lam


def solve_svd(M, f, A, b, rcond, checked=True):
    """Eq. A-7 ... A-12: lam = W S^-2 W^T u from the SVD L^-1 A^T = V S W^T (= P P^T u with
    P = pinv(L^-1 A^T), whose derivative is defined while the rank stays constant)."""
    L, Abar, zf = _forward_substitution(M, A, f)
    P = jnp.linalg.pinv(Abar, rtol=rcond)  # W S^-1 V^T
    lam = P @ (P.T @ (b - Abar.T @ zf))
    return _back_substitution(L, Abar, zf, lam), lam


def solve_damped(M, f, A, b, damping):
    """Regularised range-space solve (A M^-1 A^T + mu E) lam = b - A M^-1 f."""
    L, Abar, zf = _forward_substitution(M, A, f)
    G = Abar.T @ Abar
    mu = damping * jnp.max(jnp.diagonal(G), initial=0.0)
    lam = cho_solve(cho_factor(G + mu * jnp.eye(G.shape[0], dtype=G.dtype)), b - Abar.T @ zf)
    return _back_substitution(L, Abar, zf, lam), lam


def solve(method, M, f, A, b, rcond, damping, checked=True):
    """Dispatch to one of :data:`METHODS` (``checked``: the rank check of kkt, schur, nullspace)."""
    if method == "damped":
        return solve_damped(M, f, A, b, damping)
    solvers = {"kkt": solve_kkt, "schur": solve_schur, "nullspace": solve_nullspace, "svd": solve_svd}
    if method not in solvers:
        raise ValueError(f"unknown constrained-dynamics method {method!r}; use one of {METHODS}")
    if method != "svd" and A.shape[0] > A.shape[1]:
        raise ValueError(
            f"{A.shape[0]} constraint rows on {A.shape[1]} velocity coordinates are necessarily redundant, "
            f"so method={method!r} cannot solve them; use method='svd' or method='damped'"
        )
    return solvers[method](M, f, A, b, rcond, checked)


class ClosureSolver(eqx.Module):
    """How the closed chain's constrained equations are solved and stabilised: the options of
    :func:`mbjax.constrained_forward_dynamics`, :class:`mbjax.ClosedChainDynamics`,
    :func:`mbjax.constrained_vector_field` and :func:`mbjax.constraints.step` (whose keywords
    they are).

    - ``method`` (static): ``"kkt"`` (dense Lagrangian matrix, Eq. 73), ``"schur"``
      (multipliers first, Eq. A-3...A-5), ``"nullspace"`` (reduced coordinates by QR, Eq. A-6)
      — these three need independent constraints and raise a clear error otherwise —
      ``"svd"`` (rank-deficient constraints, Eq. A-7...A-12) or ``"damped"`` (regularised).
    - ``alpha``, ``beta`` >= 0: Baumgarte stabilisation ``Phi_ddot + alpha Phi_dot + beta Phi
      = 0`` (Mufti 1983 Remark 4); ``mbjax.constraints.critical(tau_c)`` gives the critically
      damped pair for an error time constant tau_c. Zero (the default) imposes
      ``Phi_ddot = 0`` only.
    - ``rcond`` >= 0: relative singular-value (or pivot) threshold below which Phi_q counts as
      rank-deficient; ``damping`` >= 0: the ``"damped"`` solver's mu relative to the largest
      diagonal entry of A M^-1 A^T.

    The numbers are leaves (traced, differentiable); negative values raise inside jit.
    """

    method: str = eqx.field(default="kkt", static=True)
    alpha: float | jax.Array = 0.0
    beta: float | jax.Array = 0.0
    rcond: float | jax.Array = 1e-10
    damping: float | jax.Array = 1e-12

    def __check_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"unknown constrained-dynamics method {self.method!r}; use one of {METHODS}")

    def __call__(self, M, f, A, gamma, phi_dot, phi, checked=True):
        """``(qdd, lam)`` of ``M qdd = f + A^T lam``, ``A qdd = gamma - alpha phi_dot - beta phi``
        (``checked``: the rank check of kkt, schur and nullspace)."""
        b = baumgarte(gamma, phi_dot, phi, self.alpha, self.beta)  # Remark 4
        rcond = check_nonnegative(self.rcond, "rcond (the relative rank threshold) must be >= 0")
        damping = check_nonnegative(self.damping, "damping (the damped solver's regularisation) must be >= 0")
        return solve(self.method, M, f, A, b, rcond, damping, checked)
