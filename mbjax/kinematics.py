"""Kinematics: body and frame poses, spatial velocities, Jacobians, centre of mass.

Internally every spatial quantity is expressed in the world frame ("absolute" form): the
motion subspace of velocity coordinate k is the world-frame 6-vector ``S_k``, the spatial
velocity of body i is ``v_i = sum over k moving i of S_k qd_k`` and the Jacobian of body i
is the matrix of those ``S_k``. Sums along root paths and over subtrees are products with
the ancestor matrix (Mufti's path matrix T, 1983 Eq. 25), so only the composition of
poses needs a pass over the tree.

Jacobians follow Pinocchio's reference frames:

- ``"world"``: spatial velocity of the frame, both parts in world axes, linear part at the
  world origin;
- ``"local"``: in the frame's own axes, at its origin;
- ``"local_world_aligned"``: at the frame's origin, in world axes (classical linear velocity
  of the frame origin, and angular velocity).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import spatial
from .checks import check_state
from .compilation import filter_jit
from .configuration import integrate
from .model.model import Model
from .model.tree import as_index, compose_paths, map_joints, rows, take

REFERENCES = ("world", "local", "local_world_aligned")


class TreeKinematics(NamedTuple):
    """World poses of the bodies and world-frame motion subspaces of the velocity coordinates."""

    R: jax.Array  # (nb, 3, 3) body orientations
    p: jax.Array  # (nb, 3) body origins
    S: jax.Array  # (nv, 6) motion subspace of each velocity coordinate, world frame


def joint_motion(model: Model, q):
    """Joint transforms X_J(q) composed with the joint placements, and local subspaces.

    **Returns:** ``(R, p)`` (nb, 3, 3), (nb, 3): pose of each body in its parent body;
    ``S`` (nv, 6): motion subspace rows in the child body frame.
    """
    topo = model.topology
    if not topo.groups:  # nothing moves: every link is welded to the world
        return model.joint_rotation, model.joint_translation, jnp.zeros((0, 6), q.dtype)

    def motion(g):
        axis, qg = take(model.joint_axis, as_index(g.body)), rows(q, g.q)
        return g.joint.transform(axis, qg) + (g.joint.motion_subspace(axis, qg),)

    RJ, pJ, S = map_joints(topo, motion, ("body", "body", "v"))
    R, p = spatial.compose(model.joint_rotation, model.joint_translation, RJ, pJ)
    return R, p, S


def joint_bias(model: Model, q, qd):
    """Velocity-product terms c_J (nb, 6) of the joints, child frame (zero for most types)."""
    return map_joints(model.topology, lambda g: g.joint.bias(take(model.joint_axis, as_index(g.body)), rows(q, g.q),
                                                              rows(qd, g.v)), "body")


def tree_kinematics(model: Model, q) -> TreeKinematics:
    """World poses of all bodies and the world-frame motion subspaces (no input checks)."""
    R_loc, p_loc, S_loc = joint_motion(model, q)
    R, p = compose_paths(model.topology, R_loc, p_loc)
    body = model.topology.dof_body
    S = spatial.transform_motion(take(R, body), take(p, body), S_loc)
    return TreeKinematics(R, p, S)


@filter_jit(one_state=True)
def forward_kinematics(model: Model, q):
    """Pose of every body in the world.

    **Arguments:** ``q`` (nq,).

    **Returns:** ``(R, p)``: rotations (nb, 3, 3) and origins (nb, 3), world frame.
    """
    q = check_state(model, q)
    tk = tree_kinematics(model, q)
    return tk.R, tk.p


def frame_placements_from(model: Model, tk: TreeKinematics):
    """World poses (nf, 3, 3), (nf, 3) of all frames given the body poses."""
    nb = model.nbodies
    idx = np.asarray([b if b >= 0 else nb for b in model.topology.frame_bodies], dtype=np.int32)
    Rb = take(jnp.concatenate([tk.R, jnp.eye(3, dtype=tk.R.dtype)[None]]), idx)  # row nb: world
    pb = take(jnp.concatenate([tk.p, jnp.zeros((1, 3), tk.p.dtype)]), idx)
    return spatial.compose(Rb, pb, model.frame_rotation, model.frame_translation)


@filter_jit(one_state=True)
def frame_placements(model: Model, q):
    """World pose of every frame: ``(R, p)`` of shapes (nf, 3, 3) and (nf, 3)."""
    q = check_state(model, q)
    return frame_placements_from(model, tree_kinematics(model, q))


def frame_id(model: Model, frame):
    """A frame name or index as an int32 array: frames are data, not part of the compiled
    program, so one compilation serves every frame (and frames can be vmapped over)."""
    if isinstance(frame, (str, int, np.integer)):
        frame = model.frame_index(frame)
    return jnp.asarray(frame, jnp.int32)


def frame_placement(model: Model, q, frame):
    """World pose ``(R (3, 3), p (3,))`` of one frame (name or index)."""
    return _frame_placement(model, q, frame_id(model, frame))


@filter_jit(one_state=True)
def _frame_placement(model, q, f):
    R, p = frame_placements(model, q)
    return take(R, f), take(p, f)


def body_velocities_from(model: Model, tk: TreeKinematics, qd):
    """World-frame spatial velocities of all bodies (nb, 6): ``v = A_dof @ (S * qd)``."""
    return jnp.asarray(model.topology.dof_ancestors, qd.dtype) @ (tk.S * qd[:, None])


@filter_jit(one_state=True)
def body_velocities(model: Model, q, qd, reference: str = "local"):
    """Spatial velocity of every body (nb, 6), ``(linear, angular)``, in ``reference``."""
    q, qd = check_state(model, q, qd=qd)
    tk = tree_kinematics(model, q)
    return _express(tk.R, tk.p, body_velocities_from(model, tk, qd), reference)


def _express(R, p, m, reference):
    """Re-express world-frame motions ``m`` (..., 6) at frames with poses (R, p)."""
    if reference == "world":
        return m
    if reference == "local":
        return spatial.inverse_transform_motion(R, p, m)
    if reference == "local_world_aligned":
        v, w = m[..., :3], m[..., 3:]
        return jnp.concatenate([v + jnp.cross(w, p), w], axis=-1)
    raise ValueError(f"unknown reference frame {reference!r}; use one of {REFERENCES}")


def frame_jacobian_from(model: Model, tk: TreeKinematics, f, reference: str):
    """Jacobian of frame ``f`` (an int32 index, possibly traced) from tree kinematics."""
    topo = model.topology
    # row nb of the mask table stands for the world: frames fixed to it do not move
    masks = np.concatenate([topo.dof_ancestors, np.zeros((1, topo.nv))])
    bodies = np.asarray([b if b >= 0 else topo.nbodies for b in topo.frame_bodies], dtype=np.int32)
    mask = take(jnp.asarray(masks, tk.S.dtype), take(jnp.asarray(bodies), f))
    Rf, pf = frame_placements_from(model, tk)
    J = tk.S * mask[:, None]  # (nv, 6) world-frame columns
    return _express(take(Rf, f), take(pf, f), J, reference).T


def frame_jacobian(model: Model, q, frame, reference: str = "local_world_aligned"):
    """Jacobian (6, nv) of a frame (name or index), rows ``(linear, angular)``, in ``reference``.

    ``J @ qd`` is the frame's spatial velocity in that reference (see module docstring).
    """
    return _frame_jacobian(model, q, frame_id(model, frame), reference)


@filter_jit(one_state=True)
def _frame_jacobian(model, q, f, reference):
    q = check_state(model, q)
    return frame_jacobian_from(model, tree_kinematics(model, q), f, reference)


def frame_jacobian_time_variation(model: Model, q, qd, frame, reference: str = "local_world_aligned"):
    """dJ/dt (6, nv) of :func:`frame_jacobian` along the motion ``qd``.

    Computed as the exact directional derivative ``d/dt J(q (+) t qd)`` at ``t = 0``, so
    that ``frame acceleration = J qdd + dJ qd``.
    """
    return _frame_jacobian_time_variation(model, q, qd, frame_id(model, frame), reference)


@filter_jit(one_state=True)
def _frame_jacobian_time_variation(model, q, qd, f, reference):
    q, qd = check_state(model, q, qd=qd)

    def jac(t):
        return frame_jacobian_from(model, tree_kinematics(model, integrate(model, q, t * qd)), f, reference)

    return jax.jvp(jac, (jnp.zeros((), q.dtype),), (jnp.ones((), q.dtype),))[1]


def frame_velocity(model: Model, q, qd, frame, reference: str = "local_world_aligned"):
    """Spatial velocity (6,) of a frame in ``reference``: ``J(q) qd``."""
    return frame_jacobian(model, q, frame, reference) @ jnp.asarray(qd)


def center_of_mass_from(model: Model, tk: TreeKinematics):
    c = spatial.matvec(tk.R, model.com) + tk.p
    return jnp.sum(model.mass[:, None] * c, axis=0) / jnp.sum(model.mass)


@filter_jit(one_state=True)
def center_of_mass(model: Model, q):
    """Position (3,) of the centre of mass of the whole system, world frame."""
    q = check_state(model, q)
    return center_of_mass_from(model, tree_kinematics(model, q))
