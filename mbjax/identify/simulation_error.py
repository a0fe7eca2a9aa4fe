"""Output-error identification: fit parameters so that simulated trajectories match measured
ones (the simulation-error method; Ljung, *System Identification*, 2nd ed., Sec. 7.3).

Where the inverse-dynamics fit needs accelerations (differentiated, filtered measurements),
this one compares measured and simulated positions directly, differentiating through
:func:`mbjax.simulate` (diffrax). It is nonlinear in the parameters and needs a start close
enough to the answer, e.g. CAD values or the least-squares estimate; any parametrisation of
the Model works (masses, lengths, friction, ...). The residuals

    r_b(t; p) = q_b(t) (-) q_b(t; p)       (and sqrt(w_v) (qd_b(t) - qd_b(t; p)))

of the B measured runs, simulated together (``simulate_batch``), are minimised by
Levenberg-Marquardt, with the Jacobian from forward-mode differentiation of the solver
(``diffrax.ForwardMode``): a handful of parameters cost a handful of tangents, and
the iteration converges quadratically near the answer (typically under ten steps).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from ..configuration import difference
from ..model.model import Model
from ..simulation.batching import simulate_batch
from ..progress import Progress


class OutputErrorFit(NamedTuple):
    """Result of :func:`output_error`: the fitted ``params``, the mean squared residual
    ``loss`` there, and the number of Levenberg-Marquardt ``steps``."""

    params: object
    loss: float
    steps: int


def simulation_residuals(params, make_model: Callable[..., Model], ts, q0, qd0, q_measured, *, tau=None,
                         batch_tau: bool = True, qd_measured=None, velocity_weight: float = 0.0, **simulate_kwargs):
    """The output-error residuals (B T nv (+ B T nv),) of ``params``: the configuration errors
    ``q_measured (-) q_simulated`` (:func:`mbjax.difference`, so quaternions are compared on
    their manifold), then ``sqrt(velocity_weight) (qd_measured - qd_simulated)`` if given.

    **Arguments:** as :func:`output_error`; differentiable with respect to ``params`` (reverse
    mode with simulate's default adjoint, forward mode with ``adjoint=diffrax.ForwardMode()``).
    """
    model = make_model(params)
    ts = jnp.asarray(ts, model.dtype)
    q0, qd0, q_measured = (jnp.asarray(x, model.dtype) for x in (q0, qd0, q_measured))
    B, T = q_measured.shape[:2]
    if q0.shape != (B, model.nq) or qd0.shape != (B, model.nv) or q_measured.shape != (B, T, model.nq) \
            or ts.shape != (T,):
        raise ValueError(f"expected q0 (B, nq), qd0 (B, nv), q_measured (B, T, nq), ts (T,) with nq = {model.nq}, "
                         f"nv = {model.nv}; got {q0.shape}, {qd0.shape}, {q_measured.shape}, {ts.shape}")
    run = simulate_batch(model, q0, qd0, ts[0], ts[-1], tau=tau, batch_tau=batch_tau and tau is not None,
                         saveat=ts, **simulate_kwargs)
    flat = lambda x: x.reshape((B * T,) + x.shape[2:])  # noqa: E731
    residuals = [jax.vmap(lambda a, b: difference(model, a, b))(flat(run.q), flat(q_measured)).reshape(-1)]
    if qd_measured is not None:
        residuals.append(jnp.sqrt(velocity_weight) * (jnp.asarray(qd_measured) - run.qd).reshape(-1))
    return jnp.concatenate(residuals)


@eqx.filter_jit
def _residuals_and_jacobian(residuals, flat, params):
    """The residuals (M,) and their Jacobian (M, P) at the flat parameters (P,) of the pytree
    ``params`` (whose values are not used)."""
    unravel = ravel_pytree(params)[1]
    fn = lambda x: residuals(unravel(x))  # noqa: E731
    return fn(flat), jax.jacfwd(fn)(flat)


def levenberg_marquardt(fn, x, steps: int, tol: float, progress: bool):
    """Minimise ``|r(x)|^2`` from ``x`` (P,) by Levenberg-Marquardt with Nielsen's damping
    update (Madsen, Nielsen & Tingleff 2004, *Methods for non-linear least squares problems*,
    Alg. 3.16). ``fn(x) -> (r, J)``; the P x P steps are solved in NumPy.

    **Returns:** ``(x, |r|^2 / M, steps taken)``.
    """
    r, J = (np.asarray(a) for a in fn(x))
    x = np.asarray(x)
    A, g = J.T @ J, J.T @ r
    mu, nu = 1e-3 * np.max(np.diag(A)), 2.0
    bar, taken = Progress(steps, "output-error fit", "iterations", progress), 0
    try:
        for taken in range(steps + 1):
            if taken == steps or np.max(np.abs(g)) <= tol:
                break
            h = np.linalg.solve(A + mu * np.eye(len(x)), -g)
            if np.linalg.norm(h) <= tol * (np.linalg.norm(x) + tol):
                break
            r_new, J_new = (np.asarray(a) for a in fn(x + h))
            # gain ratio: actual over predicted decrease of |r|^2 / 2 (Eq. 3.14)
            rho = (r @ r - r_new @ r_new) / (h @ (mu * h - g))
            if rho > 0:
                x, r, J = x + h, r_new, J_new
                A, g = J.T @ J, J.T @ r
                mu, nu = mu * max(1 / 3, 1 - (2 * rho - 1) ** 3), 2.0
            else:
                mu, nu = mu * nu, 2 * nu
            bar.update(1, f"loss {float(r @ r / len(r)):.6g}")
    finally:
        bar.close()
    return x, float(r @ r / len(r)), taken


def output_error(params, make_model: Callable[..., Model], ts, q0, qd0, q_measured, *, tau=None,
                 batch_tau: bool = True, qd_measured=None, velocity_weight: float = 0.0, steps: int = 50,
                 tol: float = 1e-10, progress: bool = True, **simulate_kwargs) -> OutputErrorFit:
    """Fit ``params`` so that the model ``make_model(params)`` reproduces measured trajectories.

    **Arguments:**

    - ``params``: the parameters to fit (any pytree of arrays), and ``make_model(params)``:
      the Model they describe (e.g. ``eqx.tree_at`` of masses and joint placements into a
      nominal model). Fit positive quantities through their logarithm.
    - ``ts`` (T,): measurement times (``ts[0]`` is the time of the initial states).
    - ``q0`` (B, nq), ``qd0`` (B, nv): initial states of the B measured runs, and
      ``q_measured`` (B, T, nq): the measured configurations.
    - ``tau``: the torques that drove the runs: a controller or array batched over the runs
      (leading axis B, e.g. ``jax.vmap(FeedForward.from_knots)(...)``), or one shared by all
      with ``batch_tau=False``; ``None`` for unactuated motion.
    - ``qd_measured`` (B, T, nv) and ``velocity_weight``: also match velocities.
    - ``steps``: the most Levenberg-Marquardt steps; ``tol``: stop when the gradient of
      ``|r|^2 / 2`` or the relative step is below it; ``progress``: a progress bar.
    - other keyword arguments go to :func:`mbjax.simulate` (``solver``, ``rtol``, ``atol``,
      ...); the simulation error must stay well below the measurement error.

    **Returns:** an :class:`OutputErrorFit`.
    """
    if "adjoint" in simulate_kwargs:
        raise ValueError("output_error differentiates the simulation in forward mode (diffrax.ForwardMode); "
                         "do not pass an adjoint")
    residuals = eqx.Partial(simulation_residuals, make_model=make_model, ts=ts, q0=q0, qd0=qd0,
                            q_measured=q_measured, tau=tau, batch_tau=batch_tau, qd_measured=qd_measured,
                            velocity_weight=velocity_weight, adjoint=diffrax.ForwardMode(), **simulate_kwargs)
    flat, unravel = ravel_pytree(params)
    x, loss, taken = levenberg_marquardt(lambda x: _residuals_and_jacobian(residuals, x, params), flat, steps, tol,
                                         progress)
    return OutputErrorFit(unravel(jnp.asarray(x)), loss, taken)
