"""Assembly of closed chains: configurations with Phi(q) = 0 and velocities with Phi_q qd = 0.

``assemble`` is Gauss-Newton on the configuration manifold, regularised as in Levenberg-Marquardt:
the step ``delta = -Phi_q^T (Phi_q Phi_q^T + mu E)^-1 Phi`` with ``mu = |Phi|^2`` tends to the
minimum-norm Gauss-Newton step as the loops close (defined for redundant constraints too,
bounded where Phi_q is near singular). It is applied with
``q (+) s delta`` (``mbjax.integrate``), with a backtracking line search on |Phi|^2 that tries
all step sizes ``s = 1, 1/2, ..., 2^-7`` at once and keeps the largest with sufficient
decrease (Armijo). ``project`` composes it with the velocity projection, to pull a numerically
integrated state back onto the constraint manifold after a step.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..checks import check_nonnegative, check_state, default_tolerance
from ..configuration import integrate_from
from ..model.model import Model
from .closures import LoopClosures
from .closed_chain import check_closures
from ..kinematics import tree_kinematics
from .closure_kinematics import jacobian_from, residual_from

_STEPS = 0.5 ** np.arange(8.0)  # line-search step sizes (NumPy: importing mbjax makes no JAX backend)
# orders of magnitude of the residual named in assemble's error messages
_DECADES = tuple(10.0**k for k in range(-15, 3))
_MAGNITUDES = ["below 1e-15"] + [f"between {a:.0e} and {b:.0e}" for a, b in zip(_DECADES, _DECADES[1:])] + ["above 1e+02"]


def _residual(model, closures, q):
    return residual_from(model, closures, tree_kinematics(model, q))


def _gauss_newton_step(model, closures, q):
    tk = tree_kinematics(model, q)
    phi = residual_from(model, closures, tk)
    J = jacobian_from(model, closures, tk)
    # Levenberg-Marquardt step delta = -J^T (J J^T + mu E)^-1 Phi with mu = |Phi|^2
    # (Yamashita-Fukushima: quadratic convergence, and bounded steps where J is near singular)
    JJ = J @ J.T
    mu = jnp.sum(phi**2) + 1e-14 * jnp.max(jnp.diagonal(JJ), initial=0.0)
    delta = -J.T @ jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(JJ + mu * jnp.eye(JJ.shape[0], dtype=JJ.dtype)), phi)
    trials = jax.vmap(lambda s: integrate_from(model, q, s * delta))(_STEPS.astype(q.dtype))
    cost = jax.vmap(lambda qt: jnp.sum(_residual(model, closures, qt) ** 2))(trials)
    f0 = jnp.sum(phi**2)
    # Armijo, c = 1e-4: f(s) <= f(0) + c s f'(0), and f'(0) = -2 f(0) along a Gauss-Newton step
    ok = cost <= (1.0 - 2e-4 * _STEPS) * f0
    pick = jnp.where(jnp.any(ok), jnp.argmax(ok), jnp.argmin(cost))
    return trials[pick], jnp.sqrt(f0)


@eqx.filter_jit
def assemble(model: Model, closures: LoopClosures, q, *, tol=None, max_steps=100):
    """A configuration near ``q`` that closes every loop, ``|Phi(q)|_inf <= tol``.

    **Arguments:** ``q`` (nq,) the guess; ``tol`` on the largest residual (metres, radians),
    by default 1e-12 for a float64 model and 1.2e-5 for a float32 one (100 units of roundoff:
    ``mbjax.checks.default_tolerance(model.dtype, 1e-12, 100)``); ``max_steps`` Gauss-Newton
    iterations.

    **Returns:** q (nq,). Raises (``eqx.error_if``) if ``tol`` is not reached, with the order of
    magnitude of the residual reached: when Gauss-Newton stalled, the loops may not close at
    all (lengths or cut-joint placements that no configuration satisfies) or the guess lies
    in the wrong basin; when it was still converging, raise ``max_steps``. A guess on the far
    side of a singular configuration may assemble the mechanism in another branch.
    Forward-mode differentiable; not through the iteration in reverse mode.
    """
    check_closures(model, closures)
    q = check_state(model, q)
    if tol is None:
        tol = default_tolerance(model.dtype, 1e-12, 100)
    tol = check_nonnegative(tol, "assemble: tol must be >= 0")

    def cond(state):
        q, k = state
        return (k < max_steps) & (jnp.max(jnp.abs(_residual(model, closures, q))) > tol)

    def body(state):
        q, k = state
        return _gauss_newton_step(model, closures, q)[0], k + 1

    q, _ = jax.lax.while_loop(cond, body, (q, jnp.asarray(0)))
    err = jnp.max(jnp.abs(_residual(model, closures, q)))
    # one more step tells a stall (a non-zero minimum of |Phi|) from slow convergence
    stalled = jnp.max(jnp.abs(_residual(model, closures, _gauss_newton_step(model, closures, q)[0]))) > 0.5 * err
    magnitude = jnp.searchsorted(jnp.asarray(_DECADES, err.dtype), err)
    messages = [
        f"assemble: the largest loop residual is still {m} after max_steps={max_steps} Gauss-Newton steps, "
        "and falling: raise max_steps, loosen tol or start from a better guess" for m in _MAGNITUDES
    ] + [
        f"assemble: the loops do not close: Gauss-Newton stalled with the largest loop residual {m}, above tol. "
        "The loops may not close at all: check the link lengths and the cut joints' placements; if they are "
        "right, start from another guess" for m in _MAGNITUDES
    ]
    return eqx.branched_error_if(q, err > tol, stalled * len(_MAGNITUDES) + magnitude, messages)


@eqx.filter_jit
def project_velocity(model: Model, closures: LoopClosures, q, qd, *, rcond=1e-10):
    """The orthogonal projection of ``qd`` onto ker Phi_q(q): ``qd - pinv(Phi_q) Phi_q qd``."""
    check_closures(model, closures)
    q, qd = check_state(model, q, qd=qd)
    A = jacobian_from(model, closures, tree_kinematics(model, q))
    rcond = check_nonnegative(rcond, "project_velocity: rcond must be >= 0")
    return qd - jnp.linalg.pinv(A, rtol=rcond) @ (A @ qd)


def project(model: Model, closures: LoopClosures, q, qd, **options):
    """``(q, qd)`` pulled back onto the constraint manifold: :func:`assemble` then
    :func:`project_velocity` (use after an integration step; ``options`` go to assemble)."""
    q = assemble(model, closures, q, **options)
    return q, project_velocity(model, closures, q, qd)
