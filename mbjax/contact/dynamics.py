"""Contact forces and joint stops as a formulation of the dynamics protocol: any
formulation, with contacts and limits."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..checks import check_external_force_shape, check_shapes
from ..dynamics.crba import crba
from ..dynamics.protocol import Dynamics
from ..methods import as_dynamics
from ..model.model import Model
from ..simulation.integration import STOPS
from .compliant import CompliantContact, PairContact
from .limits import JointLimits, declared_joints, joint_limits


class WithContacts(Dynamics):
    """``dynamics`` (a name of :data:`mbjax.methods.METHODS` or an :class:`mbjax.Dynamics`,
    default ``"aba"``) with the wrenches of ``contact`` added to its ``f_ext`` and the torques
    of the joint stops ``limits`` (:func:`mbjax.contact.joint_limits`) to its ``tau``; either
    may be None. ``contact``: a :class:`CompliantContact` (with the ground), a
    :class:`PairContact` (between bodies), or a list of them. Pass it as ``method`` to
    :func:`mbjax.simulate`, :func:`mbjax.simulate_batch`, :func:`mbjax.forward_dynamics` or a
    trajectory problem."""

    contact: tuple | None
    limits: JointLimits | None
    dynamics: Dynamics

    def __init__(self, contact=None, dynamics="aba", *, limits: JointLimits | None = None, checked: bool = True):
        contact = () if contact is None else tuple(contact) if isinstance(contact, (list, tuple)) else (contact,)
        if not contact and limits is None:
            raise ValueError("WithContacts needs a contact model, joint limits, or both")
        for c in contact:
            if not isinstance(c, (CompliantContact, PairContact)):
                raise TypeError(f"contact must be a contact.CompliantContact, a contact.PairContact or a list of them; "
                                f"got {type(c).__name__}")
        self.contact = contact or None  # no empty tuple: diffrax's BacksolveAdjoint rejects one in its args
        self.limits = limits
        self.dynamics = as_dynamics(dynamics).unchecked()
        self.checked = checked

    def __call__(self, model: Model, q, qd, tau, f_ext=None):
        """The inputs' shapes are checked (with ``checked``), not their values: an adaptive
        solver's trial stages visit states deep in the ground, whose forces overflow to NaN and
        infinity; the solver must see them to reject the step (raising would end the run).
        :func:`mbjax.simulate` checks the initial state, and stops a run that diverges."""
        if self.checked:
            (q,), (qd, tau) = check_shapes(model, q, qd=qd, tau=tau)
            f_ext = None if f_ext is None else check_external_force_shape(model, f_ext)
        return self.forward(model, q, qd, tau, f_ext)

    def fast_rates(self, model: Model, q) -> dict:
        """The contacts' and stops' fastest motions at ``q`` (:meth:`CompliantContact.rates`,
        :meth:`JointLimits.rates`) and those of the wrapped formulation."""
        inverse_mass = np.linalg.inv(np.asarray(crba(model, q)))
        rates = dict(self.dynamics.fast_rates(model, q))
        for c in self.contact or ():
            rates |= c.rates(model, jnp.asarray(q), inverse_mass)
        if self.limits is not None:
            rates["joint stops"] = self.limits.rates(inverse_mass)
        return rates

    def forward(self, model: Model, q, qd, tau, f_ext):
        if self.limits is not None:
            tau = tau + self.limits.torques(model, q, qd)
        for c in self.contact or ():
            f = c.wrenches(model, q, qd)
            f_ext = f if f_ext is None else f_ext + f
        return self.dynamics.forward(model, q, qd, tau, f_ext)


def with_stops(method, limits: JointLimits):
    """``method`` (a :func:`mbjax.simulate` method: a name, an :class:`mbjax.Dynamics` or a
    function) with the joint stops ``limits`` added to its torques; a :class:`WithContacts`
    with stops of its own is returned as it is."""
    if isinstance(method, WithContacts):
        if method.limits is not None:
            return method
        return WithContacts(method.contact, method.dynamics, limits=limits, checked=method.checked)
    return WithContacts(dynamics=method, limits=limits)


def _add_declared_stops(model: Model, method, joints):
    return with_stops(method, joint_limits(model, joints=joints))


# mbjax.simulate's default stops (limits=True) are these (simulation is a layer below contact)
STOPS.joints, STOPS.add = declared_joints, _add_declared_stops
