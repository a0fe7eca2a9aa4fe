"""Output-error identification: fit parameters so that simulated trajectories match measured
ones (the simulation-error method; Ljung, *System Identification*, Sec. 7.3).

Where the inverse-dynamics fit needs accelerations (differentiated, filtered measurements),
this one compares measured and simulated positions directly, differentiating through
:func:`mbjax.simulate` (diffrax). It is nonlinear in the parameters and needs a start close
enough to the answer, e.g. CAD values or the least-squares estimate; any parametrisation of
the Model works (masses, lengths, friction, ...).

    loss(p) = mean_{b, t} |q_b(t) - q_b(t; p)|^2 + w_v |qd_b(t) - qd_b(t; p)|^2

over the B measured trajectories, simulated together (``simulate_batch``).
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from ..configuration import difference
from ..model.model import Model
from ..simulation.batching import simulate_batch
from .optimize import Minimization, minimize


def simulation_error(params, make_model: Callable[..., Model], ts, q0, qd0, q_measured, *, tau=None,
                     batch_tau: bool = True, qd_measured=None, velocity_weight: float = 0.0, **simulate_kwargs):
    """The output-error loss (see the module docstring) of ``params``.

    **Arguments:** as :func:`output_error`.

    **Returns:** the mean squared error (a scalar).
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
    error = jax.vmap(lambda a, b: difference(model, a, b))(flat(q_measured), flat(run.q))
    loss = jnp.mean(jnp.sum(error**2, axis=-1))
    if qd_measured is not None:
        loss = loss + velocity_weight * jnp.mean(jnp.sum((run.qd - jnp.asarray(qd_measured)) ** 2, axis=-1))
    return loss


def output_error(params, make_model: Callable[..., Model], ts, q0, qd0, q_measured, *, tau=None,
                 batch_tau: bool = True, qd_measured=None, velocity_weight: float = 0.0, steps: int = 100,
                 optimizer: optax.GradientTransformation | None = None, gtol: float = 0.0, progress: bool = True,
                 **simulate_kwargs) -> Minimization:
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
    - ``steps``, ``optimizer`` (default ``optax.lbfgs()``), ``gtol``, ``progress``: see
      :func:`mbjax.identify.minimize`.
    - other keyword arguments go to :func:`mbjax.simulate` (solver, rtol, atol, ...).

    **Returns:** a :class:`Minimization` (fitted ``params``, loss per iteration).
    """
    loss = eqx.Partial(simulation_error, make_model=make_model, ts=ts, q0=q0, qd0=qd0, q_measured=q_measured,
                       tau=tau, batch_tau=batch_tau, qd_measured=qd_measured, velocity_weight=velocity_weight,
                       **simulate_kwargs)
    return minimize(loss, params, optimizer, steps, gtol=gtol, progress=progress, desc="output-error fit")
