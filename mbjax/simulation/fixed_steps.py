"""Fixed-step rollouts: ``steps`` applications of a one-step map in one ``lax.scan``, with the
torques constant, one row per step, or from a controller ``tau(t, q, qd)``. The time steppers
(:func:`mbjax.constraints.rollout`, :func:`mbjax.contact.rollout`) share it."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .trajectory import Trajectory


def scan_steps(model, step, q0, qd0, tau, dt, steps: int, carry=None):
    """``steps`` steps of ``step(q, qd, u, carry) -> (q, qd, carry, out)`` from ``(q0, qd0)``.

    ``tau``: (nv,) held constant, (steps, nv) one row per step, or a controller
    ``tau(t, q, qd)`` evaluated at the start of each step; ``carry``: what a step hands to the
    next (e.g. a solver's warm start). **Returns:** ``(trajectory, outs)``: a
    :class:`~mbjax.Trajectory` of the steps + 1 states at ``ts = dt * arange(steps + 1)`` and
    the stacked ``out`` of every step.
    """
    per_step = not callable(tau) and jnp.ndim(tau) == 2
    if not callable(tau) and jnp.shape(tau)[-1:] != (model.nv,):
        raise ValueError(f"tau has shape {jnp.shape(tau)}; expected ({model.nv},), ({steps}, {model.nv}) or a "
                         "controller tau(t, q, qd)")
    if per_step and jnp.shape(tau)[0] != steps:
        raise ValueError(f"tau has {jnp.shape(tau)[0]} rows for {steps} steps; give one row per step")
    torques = jnp.asarray(tau, qd0.dtype) if per_step else None

    def body(state, xs):
        k, tau_k = xs
        q, qd, c = state
        u = tau(k * dt, q, qd) if callable(tau) else (tau_k if per_step else jnp.asarray(tau, qd.dtype))
        q, qd, c, out = step(q, qd, u, c)
        return (q, qd, c), (q, qd, out)

    ks = jnp.arange(steps, dtype=qd0.dtype)
    _, (qs, qds, outs) = jax.lax.scan(body, (q0, qd0, carry), (ks, torques), length=steps)
    qs, qds = jnp.concatenate([q0[None], qs]), jnp.concatenate([qd0[None], qds])
    return Trajectory(dt * jnp.arange(steps + 1, dtype=qd0.dtype), qs, qds), outs
