"""The result of :func:`mbjax.simulate`: saved times and states, with optional diagnostics."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ..configuration import neutral, normalize
from ..dynamics.terms import kinetic_energy, momentum, potential_energy


class Trajectory(eqx.Module):
    """Saved states of a simulation (one row per saved time).

    **Fields:**

    - ``ts`` (T,): times. Rows after an event stopped the run hold ``inf`` (diffrax's
      convention), and the matching states ``inf``/NaN.
    - ``q`` (T, nq): configurations, normalised (quaternions and (cos, sin) pairs of unit
      norm); ``qd`` (T, nv): velocities.
    - ``energy`` (T,): kinetic + potential energy, if requested, else ``None``.
    - ``work`` (T,): with ``energy``, the work done since the start by the applied forces
      (controls, joint springs and dampers, external wrenches): ``energy - energy[0] - work``
      is the integration error (:attr:`energy_error`).
    - ``momentum`` (T, 6): spatial momentum (linear, angular about the world origin) in world
      axes, if requested, else ``None``.
    - ``residual`` (T, ...): constraint residuals ``residual(model, q, qd)``, if a function
      was given, else ``None``.
    - ``event`` (bool): whether an event stopped the run (``None`` without an event).
    - ``stats``: diffrax's statistics (``num_steps``, ``num_accepted_steps``, ...).

    Batched simulations give the same fields with a leading batch axis.
    """

    ts: jax.Array
    q: jax.Array
    qd: jax.Array
    energy: jax.Array | None = None
    work: jax.Array | None = None
    momentum: jax.Array | None = None
    residual: jax.Array | None = None
    event: jax.Array | None = None
    stats: dict = eqx.field(default_factory=dict)

    @property
    def energy_error(self):
        """The energy balance ``energy - energy[0] - work`` (T,): zero but for integration error."""
        return None if self.energy is None else self.energy - self.energy[..., :1] - self.work

    @property
    def valid(self):
        """Mask (T,) of the rows that hold a state (False after an event)."""
        return jnp.isfinite(self.ts)

    def plot(self, path: str | None = None, model=None):
        """Figure of joint positions, velocities and (if recorded) energy and momentum drift.

        ``path``: save the figure there (then close it); ``model``: label the coordinates with
        joint names. Returns the matplotlib figure (``None`` once saved). Needs matplotlib.
        """
        from ..plotting import plot_trajectory

        return plot_trajectory(self, model=model, path=path)


def diagnose(model, ts, q, qd, energy: bool, momentum_: bool, residual):
    """Build a :class:`Trajectory` from diffrax's raw saved states.

    Rows after an event (``ts == inf``) are evaluated at the neutral configuration and then
    masked, so the diagnostics never see an invalid state.
    """
    valid = jnp.isfinite(ts)
    q_safe = jnp.where(valid[:, None], q, neutral(model))
    qd_safe = jnp.where(valid[:, None], qd, 0.0)
    q_safe = jax.vmap(normalize, (None, 0))(model, q_safe)

    def per_row(fn, *extra):
        out = jax.vmap(fn, (None, 0, 0) + (None,) * len(extra))(model, q_safe, qd_safe, *extra)
        mask = valid.reshape(valid.shape + (1,) * (out.ndim - 1))
        return jnp.where(mask, out, jnp.nan)

    mask = valid[:, None]
    fields = dict(ts=ts, q=jnp.where(mask, q_safe, q), qd=qd)
    if energy:
        fields["energy"] = per_row(lambda m, q, qd: kinetic_energy(m, q, qd) + potential_energy(m, q))
    if momentum_:
        fields["momentum"] = per_row(momentum)
    if residual is not None:
        fields["residual"] = per_row(residual)
    return fields
