"""The forward-dynamics protocol: every formulation is a callable

    dynamics(model, q, qd, tau, f_ext=None) -> qdd  (nv,)

an ``eqx.Module`` whose fields hold what the formulation needs beyond the model (loop
closures, solver options), so that they are differentiated and batched like the model's
arrays. :func:`mbjax.forward_dynamics`, :func:`mbjax.simulate` and
:class:`mbjax.trajopt.TrajectoryProblem` take any of them (the named ones are registered in
:mod:`mbjax.methods`).

A subclass writes :meth:`Dynamics.forward` (no input checks, f_ext an (nbodies, 6) array or
None); the call adds the checks when ``checked`` is set (the default), and :meth:`unchecked`
gives the same formulation without them, for optimisers whose trial steps may diverge.
"""

from __future__ import annotations

import abc
import dataclasses

import equinox as eqx
import jax.numpy as jnp

from ..checks import check_accelerations, check_external_forces, check_state
from ..model.model import Model


class Dynamics(eqx.Module):
    """A forward-dynamics formulation (see the module docstring).

    ``checked`` (static): check the inputs (shapes, NaN states, unit quaternions) and the
    accelerations (``eqx.error_if``), and let the formulation raise on singular
    configurations; ``False`` lets non-finite values through instead.
    """

    checked: bool = eqx.field(default=True, static=True, kw_only=True)

    @abc.abstractmethod
    def forward(self, model: Model, q, qd, tau, f_ext):
        """Joint accelerations (nv,), without input checks."""

    def __call__(self, model: Model, q, qd, tau, f_ext=None):
        if not self.checked:
            return self.forward(model, q, qd, tau, None if f_ext is None else jnp.asarray(f_ext, jnp.result_type(tau)))
        q, qd, tau = check_state(model, q, qd=qd, tau=tau)
        return check_accelerations(self.forward(model, q, qd, tau, check_external_forces(model, f_ext)))

    def fast_rates(self, model: Model, q) -> dict:
        """Estimates of the fastest motions this formulation adds near ``q`` (concrete): a dict
        from what makes them (e.g. ``"contact springs"``) to complex eigenvalues (1/s), which
        :func:`mbjax.simulate` checks a fixed-step explicit solver against
        (:mod:`mbjax.simulation.stability`). None here."""
        return {}

    def unchecked(self) -> "Dynamics":
        """The same formulation with ``checked=False``."""
        return dataclasses.replace(self, checked=False)
