"""Maximal coordinates (Mufti 1983, Sec. 3): every body's own position, orientation and
velocities, and the maps between them and the joint-space state (q, qd).

A :class:`MaximalState` holds, for each body i, Mufti's r_i (centre of mass, world frame), the
orientation R_i (as a unit quaternion), r_i dot and the angular velocity R_i omega_i, which is
kept in world axes as in Eq. (10). The hinge of joint j lies at the origin of its child body's
frame; seen from the parent it is the joint's placement. Mufti's lever arms l_ij (Fig. 4) are
the vectors from each body's centre of mass to its hinges.

A base whose motion is prescribed (Remark 3: a manipulator on a moving platform) is a
:class:`PrescribedBase`; ``None`` means the world frame, fixed.

Joint types are described by which rows of their motion subspace are translations and which
rotations: every type of ``mbjax.JOINT_TYPES`` splits that way, so the constraint directions of
a joint (Eq. 44 for rotations, Remark 5 for translations) are the orthogonal complements of
its translation axes and of its rotation axes, and the maximal-coordinate methods treat ball,
universal, pin, prismatic, cylindrical, planar and free joints alike.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..checks import check_state
from ..kinematics import body_velocities_from, tree_kinematics
from ..model.model import Model
from ..model.tree import as_index, map_joints, take

#: (translation rows, rotation rows, rows whose axis is fixed in the parent) of each joint
#: type's motion subspace; every other row is fixed in the child body.
JOINT_ROWS = {
    "revolute": ((), (0,), ()),
    "continuous": ((), (0,), ()),
    "prismatic": ((0,), (), ()),
    "spherical": ((), (0, 1, 2), ()),
    "universal": ((), (0, 1), (0,)),  # axis 1 turns with the parent, axis 2 with the child
    "cylindrical": ((0,), (1,), ()),
    "planar": ((0, 1), (2,), ()),
    "free": ((0, 1, 2), (3, 4, 5), ()),
}


class MaximalState(eqx.Module):
    """Positions and velocities of every body on its own (Mufti's r, R, r dot, omega).

    - ``r`` (nb, 3): centres of mass, world frame.
    - ``quat`` (nb, 4): orientations R_i as unit quaternions (w, x, y, z).
    - ``r_dot`` (nb, 3): velocities of the centres of mass, world frame.
    - ``omega`` (nb, 3): angular velocities, world axes (Mufti's R_i omega_i).
    """

    r: jax.Array
    quat: jax.Array
    r_dot: jax.Array
    omega: jax.Array

    @property
    def rotation(self):
        """Body orientations R_i (nb, 3, 3)."""
        return spatial.quat_to_rotation(self.quat)


class PrescribedBase(eqx.Module):
    """Motion of the body the tree's root joints are attached to (Mufti's body 0, Remark 3).

    The model's world frame moves with this body: its pose is (``rotation``, ``position``),
    its origin has velocity ``velocity`` and acceleration ``acceleration``, and it turns with
    angular velocity ``omega`` and angular acceleration ``omega_dot``; all (3,) in the inertial
    frame (classical, not spatial, derivatives). Gravity still acts along ``model.gravity`` in
    the inertial frame.
    """

    rotation: jax.Array
    position: jax.Array
    velocity: jax.Array
    omega: jax.Array
    acceleration: jax.Array
    omega_dot: jax.Array

    @staticmethod
    def fixed(dtype=float):
        """The world frame, at rest: what ``base=None`` means."""
        z = jnp.zeros(3, dtype)
        return PrescribedBase(jnp.eye(3, dtype=dtype), z, z, z, z, z)

    def spatial_velocity(self):
        """(v, w) at the inertial origin: v = p_dot - w x p."""
        return jnp.concatenate([self.velocity - jnp.cross(self.omega, self.position), self.omega])


def base_or_fixed(base, dtype):
    return PrescribedBase.fixed(dtype) if base is None else base


# ------------------------------------------------------------------- joint-space -> maximal
def maximal_state_with_rotation_from(model: Model, q, qd, base=None):
    """:func:`maximal_state` without input checks, and the body orientations R (nb, 3, 3) its
    quaternions are made from (the solvers take R as it is, without the round trip)."""
    tk = tree_kinematics(model, q)
    v = body_velocities_from(model, tk, qd)  # spatial, model world frame, at its origin
    R, p = tk.R, tk.p
    if base is not None:
        R, p = spatial.compose(base.rotation, base.position, R, p)
        v = spatial.transform_motion(base.rotation, base.position, v) + base.spatial_velocity()
    r = spatial.matvec(R, model.com) + p
    omega = v[:, 3:]
    return MaximalState(r, spatial.rotation_to_quat(R), v[:, :3] + jnp.cross(omega, r), omega), R


def maximal_state_from(model: Model, q, qd, base=None) -> MaximalState:
    """:func:`maximal_state` without input checks."""
    return maximal_state_with_rotation_from(model, q, qd, base)[0]


@eqx.filter_jit
def maximal_state(model: Model, q, qd, base: PrescribedBase | None = None) -> MaximalState:
    """Maximal coordinates of the joint-space state (q, qd).

    **Arguments:** ``q`` (nq,), ``qd`` (nv,); ``base``: the prescribed motion of the frame the
    root joints are attached to (Remark 3), ``None`` for the fixed world.

    **Returns:** a :class:`MaximalState` (positions and velocities in the inertial frame).
    """
    q, qd = check_state(model, q, qd=qd)
    return maximal_state_from(model, q, qd, base)


# ------------------------------------------------------------------- maximal -> joint-space
def body_poses(model: Model, state: MaximalState, rotation=None):
    """Body-frame orientations (nb, 3, 3) and origins (nb, 3) of a maximal state (``rotation``:
    the orientations if known, instead of the state's quaternions)."""
    R = state.rotation if rotation is None else rotation
    return R, state.r - spatial.matvec(R, model.com)


def joint_frames_on_parents(model: Model, R, o, base):
    """World pose of every joint frame as fixed on the parent body (or on the base)."""
    nb = model.nbodies
    parent = np.asarray([p if p >= 0 else nb for p in model.parents], dtype=np.int32)
    Rp = take(jnp.concatenate([R, base.rotation[None]]), parent)
    pp = take(jnp.concatenate([o, base.position[None]]), parent)
    return spatial.compose(Rp, pp, model.joint_rotation, model.joint_translation)


def _angle_about(k, u, w):
    """Angle of the rotation about the unit axis k that takes u to w (both rows (n, 3))."""
    s = jnp.sum(k * jnp.cross(u, w), -1)
    c = jnp.sum(u * w, -1) - jnp.sum(k * u, -1) * jnp.sum(k * w, -1)
    return jnp.arctan2(s, c)


def _vee_angle(axis, R):
    """Angle of a rotation R about a known unit axis: tan = a . vee(R - R^T)/2 / ((tr R - 1)/2)."""
    vee = 0.5 * jnp.stack([R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]], -1)
    return jnp.sum(axis * vee, -1), 0.5 * (jnp.trace(R, axis1=-2, axis2=-1) - 1.0)


def _coordinates(name, axis, R, p):
    """Joint coordinates q (n, nq) of joint transforms X_J = (R, p) of one joint type."""
    a = axis[:, 0]
    if name in ("revolute", "cylindrical"):
        angle = jnp.arctan2(*_vee_angle(a, R))[:, None]
        return angle if name == "revolute" else jnp.concatenate([jnp.sum(a * p, -1)[:, None], angle], -1)
    if name == "continuous":
        s, c = _vee_angle(a, R)
        return jnp.stack([c, s], -1) / jnp.sqrt(c * c + s * s)[:, None]
    if name == "prismatic":
        return jnp.sum(a * p, -1)[:, None]
    if name == "spherical":
        return spatial.rotation_to_quat(R)
    if name == "universal":
        # X_J = R1(a1, q1) R2(a2, q2): R a2 = R1 a2 and R^T a1 = R2^T a1
        a2 = axis[:, 1]
        q1 = _angle_about(a, a2, spatial.matvec(R, a2))
        q2 = -_angle_about(a2, a, spatial.matvec(spatial.transpose(R), a))
        return jnp.stack([q1, q2], -1)
    if name == "planar":
        c, s = R[:, 0, 0], R[:, 1, 0]
        n = jnp.sqrt(c * c + s * s)
        return jnp.stack([p[:, 0], p[:, 1], c / n, s / n], -1)
    if name == "free":
        return jnp.concatenate([p, spatial.rotation_to_quat(R)], -1)
    raise ValueError(f"no maximal-coordinate support for joint type {name!r}")


def joint_state_from(model: Model, state: MaximalState, base=None):
    """:func:`joint_state` without input checks."""
    topo = model.topology
    base = base_or_fixed(base, state.r.dtype)
    R, o = body_poses(model, state)
    Rj, pj = joint_frames_on_parents(model, R, o, base)
    RJ, pJ = spatial.compose(*spatial.inverse(Rj, pj), R, o)  # X_J = (parent frame)^-1 X_child
    v = jnp.concatenate([state.r_dot - jnp.cross(state.omega, state.r), state.omega], -1)
    parent = np.asarray([p if p >= 0 else topo.nbodies for p in topo.parents], dtype=np.int32)
    v_parent = take(jnp.concatenate([v, base.spatial_velocity()[None]]), parent)
    vJ = spatial.inverse_transform_motion(R, o, v - v_parent)  # child frame

    def coordinates(g):
        ib = as_index(g.body)
        axis = take(model.joint_axis, ib)
        qg = _coordinates(g.joint.name, axis, take(RJ, ib), take(pJ, ib))
        S = g.joint.motion_subspace(axis, qg)  # (n, nv, 6), child frame
        # qd = (S S^T)^-1 S vJ: exact when vJ lies in the motion subspace
        gram = jnp.einsum("nai,nbi->nab", S, S)
        return qg, jnp.linalg.solve(gram, jnp.einsum("nai,ni->na", S, take(vJ, ib))[..., None])[..., 0]

    return map_joints(topo, coordinates, ("q", "v"))


@eqx.filter_jit
def joint_state(model: Model, state: MaximalState, base: PrescribedBase | None = None):
    """Joint-space state ``(q, qd)`` of a maximal state: the inverse of :func:`maximal_state`.

    Each joint's coordinates are read from the pose of its child relative to the joint frame
    on its parent, and its rates are the least-squares fit of the relative velocity by the
    joint's motion subspace; both are exact on the constraint manifold. Off it (after drift),
    they are the joint-space state nearest in this sense, which is a projection back onto
    the manifold.

    **Arguments:** ``state``: a :class:`MaximalState`; ``base`` as in :func:`maximal_state`.

    **Returns:** ``q`` (nq,), ``qd`` (nv,).
    """
    _check_supported(model)
    return joint_state_from(model, state, base)


def _check_supported(model: Model):
    for name, jt in zip(model.joint_names, model.joint_types):
        if jt not in JOINT_ROWS:
            raise ValueError(
                f"joint {name!r} has type {jt!r}, which the maximal-coordinate formulations do not "
                f"support; supported types: {sorted(JOINT_ROWS)}"
            )


def state_derivative(state: MaximalState, r_ddot, omega_dot) -> MaximalState:
    """d/dt of a maximal state given the accelerations: quat_dot = (0, omega) * quat / 2."""
    return MaximalState(state.r_dot, 0.5 * spatial.quat_multiply(spatial.quat_pure(state.omega), state.quat), r_ddot,
                        omega_dot)


def joint_tables(model: Model):
    """Static NumPy tables of each joint's motion-subspace rows, padded to the widest joint.

    Returns ``(width, dofs (nb, w), pad (nb, w), lin (nb, 2), n_lin (nb,), ang (nb, 2),
    n_ang (nb,), on_parent (nb, w))``: the velocity index of each row (nv = padding), which
    rows are padding, the first two translation and rotation rows, how many there are, and
    which rows turn with the parent.
    """
    topo = model.topology
    _check_supported(model)
    nb = topo.nbodies
    w = max((j.nv for j in topo.joints), default=1)
    dofs = np.full((nb, w), topo.nv, dtype=np.int32)
    on_parent = np.zeros((nb, w), dtype=bool)
    lin = np.zeros((nb, 2), dtype=np.int32)
    ang = np.zeros((nb, 2), dtype=np.int32)
    n_lin = np.zeros(nb, dtype=np.int32)
    n_ang = np.zeros(nb, dtype=np.int32)
    for i, joint in enumerate(topo.joints):
        dofs[i, : joint.nv] = np.arange(topo.v_start[i], topo.v_start[i] + joint.nv)
        rl, ra, rp = JOINT_ROWS[joint.name]
        n_lin[i], n_ang[i] = len(rl), len(ra)
        lin[i, : min(2, len(rl))] = rl[:2]
        ang[i, : min(2, len(ra))] = ra[:2]
        on_parent[i, list(rp)] = True
    return w, dofs, dofs == topo.nv, lin, n_lin, ang, n_ang, on_parent


def neutral_subspaces(model: Model, w: int, dtype):
    """Motion-subspace rows (nb, w, 6) of every joint at its neutral configuration, in the
    child (or, for rows that turn with the parent, the parent's joint) frame; zero padding."""
    def subspaces(g):
        qn = jnp.broadcast_to(jnp.asarray(g.joint.neutral(), dtype), (len(g.body), g.joint.nq))
        S = g.joint.motion_subspace(take(model.joint_axis, as_index(g.body)), qn)
        return jnp.pad(S, ((0, 0), (0, w - g.joint.nv), (0, 0)))

    return map_joints(model.topology, subspaces, "body")


def scatter_dofs(values, dofs, nv):
    """Joint-space vector (nv,) from per-joint rows (nb, w) with padding index nv."""
    return jnp.zeros(nv + 1, values.dtype).at[dofs.reshape(-1)].set(values.reshape(-1))[:nv]


def gather_dofs(x, dofs):
    """Per-joint rows (nb, w) of a joint-space vector (nv,), zero on padding."""
    return take(jnp.concatenate([x, jnp.zeros(1, x.dtype)]), dofs)
