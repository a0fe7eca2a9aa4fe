"""Contact forces as a formulation of the dynamics protocol: any formulation, with contacts."""

from __future__ import annotations

from ..dynamics.protocol import Dynamics
from ..methods import as_dynamics
from ..model.model import Model
from .compliant import CompliantContact


class WithContacts(Dynamics):
    """``dynamics`` (a name of :data:`mbjax.methods.METHODS` or an :class:`mbjax.Dynamics`,
    default ``"aba"``) with the wrenches of ``contact`` added to its ``f_ext``: pass it as
    ``method`` to :func:`mbjax.simulate`, :func:`mbjax.simulate_batch`,
    :func:`mbjax.forward_dynamics` or a trajectory problem."""

    contact: CompliantContact
    dynamics: Dynamics

    def __init__(self, contact: CompliantContact, dynamics="aba", *, checked: bool = True):
        self.contact = contact
        self.dynamics = as_dynamics(dynamics).unchecked()
        self.checked = checked

    def forward(self, model: Model, q, qd, tau, f_ext):
        f = self.contact.wrenches(model, q, qd)
        return self.dynamics.forward(model, q, qd, tau, f if f_ext is None else f_ext + f)
