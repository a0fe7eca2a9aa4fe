"""Operations on the configuration manifold: neutral, random, integrate, difference, normalize.

``q`` lives on a product of Lie groups (R^n for revolute and prismatic joints, S^1 for
continuous joints, SO(3) for spherical joints, SE(3) for free joints, SE(2) for planar ones);
velocities ``v`` live in its tangent space, so ``nq != nv`` in general. These functions apply
each joint type's group operation to all joints of that type at once.
"""

from __future__ import annotations

import jax
import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .checks import check_state
from .kinematics import _rows
from .model.model import Model


def _scatter(n, groups, parts, dtype):
    if not parts:
        return jnp.zeros(n, dtype)
    idx = np.concatenate([g.reshape(-1) for g in groups])
    vals = jnp.concatenate([p.reshape(-1) for p in parts])
    return jnp.zeros(n, dtype).at[idx].set(vals, unique_indices=True)


def neutral(model: Model):
    """The neutral configuration (nq,): zero angles, identity quaternions."""
    q = np.concatenate([j.neutral() for j in model.topology.joints])
    return jnp.asarray(q, dtype=model.dtype)


@eqx.filter_jit
def random_configuration(model: Model, key):
    """A random configuration within the position limits.

    Coordinates with infinite limits are drawn from [-pi, pi] (angles) or [-1, 1]
    (translations); quaternions are uniform on SO(3).
    """
    groups = model.topology.groups
    keys = jax.random.split(key, len(groups))
    parts = [
        joint.random(k, _rows(model.lower, qi), _rows(model.upper, qi))
        for k, (joint, _, qi, _) in zip(keys, groups)
    ]
    return _scatter(model.nq, [g[2] for g in groups], parts, model.dtype)


@eqx.filter_jit
def integrate(model: Model, q, v):
    """``q (+) v``: the configuration reached from q by following the velocity v for unit time."""
    q, v = check_state(model, q, v=v)
    return integrate_from(model, q, v)


def integrate_from(model: Model, q, v):
    """:func:`integrate` without input checks, for use inside other algorithms."""
    groups = model.topology.groups
    parts = [joint.integrate(_rows(q, qi), _rows(v, vi)) for joint, _, qi, vi in groups]
    return _scatter(model.nq, [g[2] for g in groups], parts, q.dtype)


@eqx.filter_jit
def difference(model: Model, q0, q1):
    """The velocity v (nv,) with ``integrate(q0, v) == q1``."""
    q0, q1 = check_state(model, q0, q1)
    return difference_from(model, q0, q1)


def difference_from(model: Model, q0, q1):
    """:func:`difference` without input checks, for use inside other algorithms."""
    groups = model.topology.groups
    parts = [joint.difference(_rows(q0, qi), _rows(q1, qi)) for joint, _, qi, _ in groups]
    return _scatter(model.nv, [g[3] for g in groups], parts, q0.dtype)


@eqx.filter_jit
def normalize(model: Model, q):
    """Project q onto the manifold: unit quaternions and unit (cos, sin) pairs."""
    q = jnp.asarray(q, model.dtype)
    groups = model.topology.groups
    parts = [joint.normalize(_rows(q, qi)) for joint, _, qi, _ in groups]
    return _scatter(model.nq, [g[2] for g in groups], parts, q.dtype)
