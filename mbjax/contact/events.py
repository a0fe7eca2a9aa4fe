"""Events for ``mbjax.simulate(..., event=...)`` at a change of contact: the first candidate
touching (touch-down) or the last one leaving (lift-off). Geometric: a compliant contact's
force can let go a little before its candidate leaves the surface (a clipped spring-damper);
lift-off is the candidate leaving the surface."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from ..model.model import Model
from .compliant import CompliantContact, PairContact


class ContactEvent(eqx.Module):
    """``cond(t, q, qd)``: minus the deepest candidate's depth (touch-down: positive while every
    candidate is apart, zero when the first touches) or the deepest depth itself (lift-off:
    positive while one touches, zero when the last leaves). Build it with :func:`touch_down`
    or :func:`lift_off`."""

    model: Model
    contact: CompliantContact | PairContact
    sign: float = eqx.field(static=True)

    def __call__(self, t, q, qd):
        return self.sign * jnp.max(self.contact.contacts(self.model, q).depth)


def _checked(contact):
    if not isinstance(contact, (CompliantContact, PairContact)):
        raise TypeError(f"contact must be a contact.CompliantContact or a contact.PairContact; got "
                        f"{type(contact).__name__}")
    return contact


def touch_down(model: Model, contact) -> ContactEvent:
    """Stop when the first candidate of ``contact`` (:class:`CompliantContact` with the ground,
    :class:`PairContact` between bodies) touches; start with every candidate apart."""
    return ContactEvent(model, _checked(contact), -1.0)


def lift_off(model: Model, contact) -> ContactEvent:
    """Stop when the last touching candidate of ``contact`` leaves the surface (or the other
    body); start with at least one touching."""
    return ContactEvent(model, _checked(contact), 1.0)
