"""Joint position limits enforced by a compliant law: a one-sided spring-damper torque (or
force, for prismatic joints) when a joint passes its limit, like a contact with a stop.

For a revolute or prismatic coordinate with limit ``upper``, the penetration is
d = q - upper and the generalized force -f(d, qd) with f the normal law of
:mod:`mbjax.contact.compliant` (zero when d <= 0); at ``lower``, d = lower - q and the force is
+f(d, -qd). A joint of rotational inertia I (or mass) meeting its stop at speed w leaves it at
e w with e = ``SpringDamper.restitution(I)`` when nothing else acts during the impact.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..model.model import Model
from .compliant import HuntCrossley, SpringDamper


class JointLimits(eqx.Module):
    """Limits of a model's revolute and prismatic joints (see the module docstring).

    **Fields:** ``q_lower`` / ``q_upper`` (static): q indices of the coordinates with a finite
    lower / upper limit, ``v_lower`` / ``v_upper`` (static) their velocity indices; ``lower``,
    ``upper``: the limits (leaves); ``law``: :class:`SpringDamper` or :class:`HuntCrossley`.
    """

    q_lower: tuple = eqx.field(static=True)
    v_lower: tuple = eqx.field(static=True)
    q_upper: tuple = eqx.field(static=True)
    v_upper: tuple = eqx.field(static=True)
    lower: jnp.ndarray
    upper: jnp.ndarray
    law: SpringDamper | HuntCrossley

    def torques(self, model: Model, q, qd):
        """Generalized forces (nv,) of the stops."""
        tau = jnp.zeros(model.nv, qd.dtype)
        for qi, vi, limit, sign in ((self.q_upper, self.v_upper, self.upper, 1.0),
                                    (self.q_lower, self.v_lower, self.lower, -1.0)):
            if qi:
                d = sign * (q[np.asarray(qi)] - limit)
                f = jnp.where(d > 0, self.law(d, sign * qd[np.asarray(vi)]), 0.0)
                tau = tau.at[np.asarray(vi)].add(-sign * f)
        return tau


def joint_limits(model: Model, law, joints=None) -> JointLimits:
    """The stops of ``joints`` (names or indices; default: every revolute and prismatic joint
    with a finite limit) at the model's ``lower`` / ``upper`` (from URDF ``<limit>`` or MJCF
    ``range``), with the normal ``law`` (e.g. ``SpringDamper(1e4, 50.0)``)."""
    if joints is None:
        joints = [i for i, t in enumerate(model.joint_types) if t in ("revolute", "prismatic")]
    lower, upper = np.asarray(model.lower), np.asarray(model.upper)
    sides = {"lower": ([], []), "upper": ([], [])}
    for j in joints:
        i = model.joint_index(j)
        if model.joint_types[i] not in ("revolute", "prismatic"):
            raise ValueError(f"joint {model.joint_names[i]!r} is {model.joint_types[i]}; joint_limits handles "
                             "revolute and prismatic joints")
        qi, vi = model.q_slice(i).start, model.v_slice(i).start
        for side, values in (("lower", lower), ("upper", upper)):
            if np.isfinite(values[qi]):
                sides[side][0].append(qi)
                sides[side][1].append(vi)
    if not sides["lower"][0] and not sides["upper"][0]:
        raise ValueError("joint_limits: none of these joints has a finite limit (model.lower / model.upper)")
    (ql, vl), (qu, vu) = sides["lower"], sides["upper"]
    return JointLimits(tuple(ql), tuple(vl), tuple(qu), tuple(vu), jnp.asarray(model.lower)[np.asarray(ql, int)],
                       jnp.asarray(model.upper)[np.asarray(qu, int)], law)
