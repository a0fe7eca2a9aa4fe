"""Passive joint forces: viscous damping and joint springs."""

from __future__ import annotations

from ..checks import check_state
from ..compilation import filter_jit
from ..configuration import difference_from
from ..model.model import Model


@filter_jit(one_state=True)
def passive_forces(model: Model, q, qd):
    """Generalized forces of the joints' springs and dampers::

        tau_passive = -stiffness * (q - spring_reference) - damping * qd

    where ``q - spring_reference`` is :func:`mbjax.difference` (the velocity that carries
    ``spring_reference`` to ``q`` in unit time): the angle or displacement for revolute and
    prismatic joints, the rotation vector in the child frame for spherical joints. This is
    MuJoCo's joint spring and damper (``qfrc_spring + qfrc_damper``) for hinge, slide and ball
    joints. Add it to the applied torque, e.g.
    ``forward_dynamics(model, q, qd, tau + passive_forces(model, q, qd))``.

    **Arguments:**

    - ``model``: its ``stiffness``, ``damping`` (nv,) and ``spring_reference`` (nq,) leaves.
    - ``q`` (nq,), ``qd`` (nv,): the state.

    **Returns:** the passive generalized force (nv,).
    """
    q, qd = check_state(model, q, qd=qd)
    return passive_forces_from(model, q, qd)


def passive_forces_from(model: Model, q, qd):
    """:func:`passive_forces` without input checks (for the simulation's vector field)."""
    displacement = difference_from(model, model.spring_reference.astype(q.dtype), q)
    return -model.stiffness * displacement - model.damping * qd
