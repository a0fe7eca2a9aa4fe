"""Event functions for ``simulate(..., event=...)``: the run stops where they cross zero."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..model.model import Model


class JointLimitEvent(eqx.Module):
    """``cond(t, q, qd)``: the smallest distance of the chosen joints to a position limit.

    It is positive inside the limits and crosses zero when the first joint reaches one.
    Build it with :func:`joint_limit_event`.
    """

    index: tuple = eqx.field(static=True)
    lower: jax.Array
    upper: jax.Array

    def __call__(self, t, q, qd):
        x = jnp.take(q, jnp.asarray(self.index, jnp.int32))
        return jnp.min(jnp.minimum(x - self.lower, self.upper - x))


def joint_limit_event(model: Model, joints=None) -> JointLimitEvent:
    """Stop when a revolute or prismatic joint reaches its position limit.

    **Arguments:** ``joints``: names or indices (default: every revolute and prismatic joint
    with finite limits).

    **Returns:** a :class:`JointLimitEvent` for ``simulate(..., event=...)``.
    """
    if joints is None:
        joints = [i for i, t in enumerate(model.joint_types) if t in ("revolute", "prismatic")]
    index = []
    for j in joints:
        i = model.joint_index(j)
        if model.joint_types[i] not in ("revolute", "prismatic"):
            raise ValueError(f"joint {model.joint_names[i]!r} is {model.joint_types[i]}; "
                             "joint_limit_event handles revolute and prismatic joints")
        index.append(model.q_slice(i).start)
    index = np.asarray(index, dtype=np.int32)
    lower, upper = jnp.take(model.lower, index), jnp.take(model.upper, index)
    finite = np.isfinite(np.asarray(lower)) & np.isfinite(np.asarray(upper))
    if not len(index) or not finite.all():
        raise ValueError("joint_limit_event needs joints with finite lower and upper limits")
    return JointLimitEvent(tuple(int(i) for i in index), lower, upper)
