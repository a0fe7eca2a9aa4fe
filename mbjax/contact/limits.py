"""Joint position limits enforced by a compliant law: a one-sided spring-damper torque (or
force, for prismatic joints) when a joint passes its limit, like a contact with a stop.

For a revolute or prismatic coordinate with limit ``upper``, the penetration is
d = q - upper and the generalized force -f(d, qd) with f the normal law of
:mod:`mbjax.contact.compliant` (zero when d <= 0); at ``lower``, d = lower - q and the force is
+f(d, -qd). A joint of rotational inertia I (or mass) meeting its stop at speed w leaves it at
e w with e = ``SpringDamper.restitution(I)`` when nothing else acts during the impact.

Without a law, each coordinate gets its own critically damped linear stop of time constant T
(as MuJoCo's soft limits, ``solref`` = (T, 1)): k = I / T^2, c = 2 I / T, with I the
coordinate's apparent inertia 1 / (M^-1)_jj at the neutral configuration (the rest of the
system free, armature included). Every stop then responds alike whatever the link's size: it
gives way by tau T^2 / I under a load tau, and the motion into it dies out within a few T.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..configuration import neutral
from ..dynamics.crba import crba
from ..linalg import spd_inverse
from ..model.model import Model
from .compliant import HuntCrossley, SpringDamper

#: the default stops' time constant (s)
TIME_CONSTANT = 0.002


class JointLimits(eqx.Module):
    """Limits of a model's revolute and prismatic joints (see the module docstring).

    **Fields:** ``q_lower`` / ``q_upper`` (static): q indices of the coordinates with a finite
    lower / upper limit, ``v_lower`` / ``v_upper`` (static) their velocity indices; ``lower``,
    ``upper``: the limits (leaves); ``law``: :class:`SpringDamper` or :class:`HuntCrossley`,
    its parameters scalars or one per velocity coordinate (nv,).
    """

    q_lower: tuple = eqx.field(static=True)
    v_lower: tuple = eqx.field(static=True)
    q_upper: tuple = eqx.field(static=True)
    v_upper: tuple = eqx.field(static=True)
    lower: jnp.ndarray
    upper: jnp.ndarray
    law: SpringDamper | HuntCrossley

    def _stops(self):
        """(q indices, velocity indices, limits, sign, law) of the upper and the lower stops."""
        for qi, vi, limit, sign in ((self.q_upper, self.v_upper, self.upper, 1.0),
                                    (self.q_lower, self.v_lower, self.lower, -1.0)):
            if qi:
                vi = np.asarray(vi)
                yield np.asarray(qi), vi, limit, sign, jax.tree.map(lambda x: x[vi] if jnp.ndim(x) == 1 else x, self.law)

    def _sides(self, q):
        """(velocity indices, law, penetration, sign) of the upper and the lower stops; a stop
        at an infinite limit (a traced model's, :func:`joint_limits`) never touches (-1)."""
        for qi, vi, limit, sign, law in self._stops():
            yield vi, law, jnp.where(jnp.isfinite(limit), sign * (q[qi] - limit), -1.0), sign

    def torques(self, model: Model, q, qd):
        """Generalized forces (nv,) of the stops."""
        tau = jnp.zeros(model.nv, qd.dtype)
        for vi, law, d, sign in self._sides(q):
            tau = tau.at[vi].add(-sign * jnp.where(d > 0, law(d, sign * qd[vi]), 0.0))
        return tau

    def rates(self, inverse_mass):
        """Eigenvalue estimates (1/s) of the stops' motions: each coordinate's law linearised
        (:meth:`SpringDamper.linearised`, unloaded) on its apparent inertia 1 / (M^-1)_jj
        (``inverse_mass``: M^-1 at the configuration)."""
        out = []
        for _, vi, limit, _, law in self._stops():
            k, c = (np.broadcast_to(np.asarray(x, float), vi.shape) for x in law.linearised(0.0))
            m = 1.0 / np.diag(inverse_mass)[vi]
            finite = np.isfinite(np.asarray(limit))  # a stop at an infinite limit never acts
            k, c, m = k[finite], c[finite], m[finite]
            root = np.sqrt(c**2 - 4 * m * k + 0j)
            out += [(-c - root) / (2 * m), (-c + root) / (2 * m)]
        return np.concatenate(out)

    def energy(self, q):
        """The energy stored in the stops' springs at ``q`` (nq,)."""
        return sum((jnp.sum(law.energy(d)) for _, law, d, _ in self._sides(q)), jnp.zeros((), q.dtype))

    def excursion(self, q):
        """How far (rad or m) the configurations ``q`` (..., nq) pass the limits, at most (zero
        inside them)."""
        d = [jnp.max(sign * (q[..., qi] - limit)) for qi, _, limit, sign, _ in self._stops()]
        return jnp.maximum(jnp.max(jnp.stack(d)), 0.0)


def joint_limits(model: Model, law=None, joints=None, *, time_constant: float = TIME_CONSTANT) -> JointLimits:
    """The stops of ``joints`` (names or indices; default: every revolute and prismatic joint
    with a finite limit) at the model's ``lower`` / ``upper`` (from URDF ``<limit>`` or MJCF
    ``range``), with the normal ``law`` (e.g. ``SpringDamper(1e4, 50.0)``); default: each
    coordinate critically damped with ``time_constant`` (:func:`stops`).

    A traced model (a batch of models under ``jax.vmap``, a model passed to ``jax.jit``): its
    limits' values are not known, so every revolute and prismatic coordinate (of ``joints``)
    gets both stops, each acting only where its limit is finite."""
    if _traced(model):
        return _traced_limits(model, law, joints, time_constant)
    joints = limited_joints(model) if joints is None else joints
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
    law = stops(model, time_constant) if law is None else law
    (ql, vl), (qu, vu) = sides["lower"], sides["upper"]
    return JointLimits(tuple(ql), tuple(vl), tuple(qu), tuple(vu), jnp.asarray(model.lower)[np.asarray(ql, int)],
                       jnp.asarray(model.upper)[np.asarray(qu, int)], law)


def _traced(model: Model) -> bool:
    return isinstance(model.lower, jax.core.Tracer) or isinstance(model.upper, jax.core.Tracer)


def _one_dof(model: Model, joints=None) -> list:
    """The revolute and prismatic joints (of ``joints``; default all), as indices."""
    joints = range(len(model.joint_types)) if joints is None else [model.joint_index(j) for j in joints]
    return [i for i in joints if model.joint_types[i] in ("revolute", "prismatic")]


def _traced_limits(model, law, joints, time_constant):
    chosen = _one_dof(model, joints)
    if not chosen:
        raise ValueError("joint_limits: none of these joints is revolute or prismatic")
    qi = tuple(model.q_slice(i).start for i in chosen)
    vi = tuple(model.v_slice(i).start for i in chosen)
    law = stops(model, time_constant) if law is None else law
    index = np.asarray(qi)
    return JointLimits(qi, vi, qi, vi, jnp.asarray(model.lower)[index], jnp.asarray(model.upper)[index], law)


def limited_joints(model: Model) -> list:
    """Indices of the revolute and prismatic joints with a finite lower or upper limit."""
    finite = np.isfinite(np.asarray(model.lower)) | np.isfinite(np.asarray(model.upper))
    return [i for i in _one_dof(model) if finite[model.q_slice(i)].any()]


def stops(model: Model, time_constant: float = TIME_CONSTANT) -> SpringDamper:
    """Per-coordinate critically damped stops of ``time_constant`` T (s): k = I / T^2,
    c = 2 I / T with I = 1 / (M^-1)_jj at the neutral configuration (the module docstring)."""
    if not (np.isfinite(time_constant) and time_constant > 0):
        raise ValueError(f"time_constant must be a positive number of seconds; got {time_constant}")
    # written-out inverse, no LAPACK call: inside a vmapped simulate it would run beside the
    # dynamics' own (docs/errors.md, Troubleshooting)
    inertia = 1.0 / jnp.diag(spd_inverse(crba(model, neutral(model))))
    return SpringDamper(inertia / time_constant**2, 2.0 * inertia / time_constant)


def declared_joints(model: Model) -> tuple:
    """The joints whose limits :func:`mbjax.simulate` enforces by default (its file's URDF
    ``<limit>``, MJCF ``range``): the revolute and prismatic joints with a finite limit; for a
    traced model, whose values are not known, every revolute and prismatic joint (their stops
    act where the limit is finite: :func:`joint_limits`)."""
    return tuple(_one_dof(model) if _traced(model) else limited_joints(model))
