"""Kane's method for ordinary mbjax Models (``forward_dynamics(..., method="kane")``), and the
converter from building-block systems to Models.

Each mbjax joint is a building-block joint (Sayers 1991, Table 1), with the paper's speeds:

| mbjax joint           | building block                       | Kane speeds u                    |
|-----------------------|--------------------------------------|----------------------------------|
| revolute, continuous  | 1 rotation                           | angle rate (= qd)                |
| prismatic             | 1 translation                        | displacement rate (= qd)         |
| universal             | 2 rotations (the paper: 2 joints and | angle rates (= qd)               |
|                       | a massless body; the same motion)    |                                  |
| cylindrical           | 1 translation, 1 rotation (same axis)| rates (= qd)                     |
| planar                | 2 translations, 1 rotation           | x', y' in the joint frame, angle |
|                       |                                      | rate (qd: x, y rates in B)       |
| spherical             | 3 rotations                          | omega^B in B (qd: relative omega)|
| free                  | 3 translations, 3 rotations          | v^{B*}, omega^B in B (qd: v^{B0} |
|                       |                                      | and omega relative to the parent)|

The speeds are linear in qd, ``u = Phi(q) qd``, so Kane's equations M u' = f become, with
``u' = Phi qdd + Phi' qd`` and the joint forces entering as ``Phi^-T tau``,

    (Phi^T M Phi + armature) qdd = Phi^T (f - M Phi' qd) + tau,

solved by Cholesky: the accelerations in the model's own convention. ``Phi`` is the
Jacobian of the (linear) speed map and ``Phi' qd`` its exact derivative along the motion.
Models carry no "fixed" bodies (the builder merged welded ones), so nothing is lumped.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..configuration import integrate_from
from ..kinematics import body_velocities_from, tree_kinematics
from ..model.builder import ModelBuilder
from ..model.model import Model
from ..model.tree import take
from .equations import force_array_from, mass_matrix_from, world_inertias
from .joints import BODY_ROTATION, BODY_TRANSLATION, ROTATION, TRANSLATION
from .partial_velocities import kane_kinematics_from, system_kinematics
from .system import KaneSystem

_R, _T, _BR, _BT = ROTATION, TRANSLATION, BODY_ROTATION, BODY_TRANSLATION
#: speed kinds and body axes of each mbjax joint type, in the joint's velocity order
SPEEDS = {
    "revolute": ((_R,), (-1,)),
    "continuous": ((_R,), (-1,)),
    "prismatic": ((_T,), (-1,)),
    "universal": ((_R, _R), (-1, -1)),
    "cylindrical": ((_T, _R), (-1, -1)),
    "planar": ((_T, _T, _R), (-1, -1, -1)),
    "spherical": ((_BR,) * 3, (0, 1, 2)),
    "free": ((_BT,) * 3 + (_BR,) * 3, (0, 1, 2, 0, 1, 2)),
}


@functools.lru_cache(maxsize=64)
def kane_tree(topology):
    """The :class:`~mbjax.kane.tree.KaneTree` of a Model's topology (no fixed bodies)."""
    from .tree import KaneTree

    kinds, axes = [], []
    for jt in topology.joint_types:
        kinds += SPEEDS[jt][0]
        axes += SPEEDS[jt][1]
    return KaneTree(topology.body_names, topology.parents, tuple(int(b) for b in topology.dof_body),
                    tuple(kinds), tuple(axes), (False,) * topology.nbodies)


def _planar_dofs(topology):
    """Velocity indices (n, 3) and q indices (n, 4) of the planar joints."""
    bodies = [b for b, jt in enumerate(topology.joint_types) if jt == "planar"]
    v = np.array([[topology.v_start[b] + k for k in range(3)] for b in bodies], dtype=np.int32).reshape(-1, 3)
    q = np.array([[topology.q_start[b] + k for k in range(4)] for b in bodies], dtype=np.int32).reshape(-1, 4)
    return np.array(bodies, dtype=np.int32), v, q


def joint_axes(model: Model, tk):
    """N-axes direction of each velocity coordinate's joint motion (nv, 3): the axis of a
    rotation, or the direction of a translation fixed in the parent (planar joints
    translate along the x and y axes of their joint frame)."""
    S = tk.S
    tree = kane_tree(model.topology)
    axes = jnp.where(jnp.asarray(tree.masks[ROTATION])[:, None] > 0, S[:, 3:], S[:, :3])
    bodies, vi, _ = _planar_dofs(model.topology)
    if len(bodies):
        parent = jnp.asarray([p if p >= 0 else model.nbodies for p in np.asarray(model.parents)[bodies]])
        R_parent = take(jnp.concatenate([tk.R, jnp.eye(3, dtype=S.dtype)[None]]), parent)
        R_joint = spatial.matmul(R_parent, take(model.joint_rotation, bodies))  # joint frame in N
        axes = axes.at[vi[:, 0]].set(R_joint[:, :, 0]).at[vi[:, 1]].set(R_joint[:, :, 1])
    return axes


def kane_speeds(model: Model, tk, q, qd):
    """Kane's speeds u (nv,) at the state (q, qd), see the module table. Linear in qd."""
    tree = kane_tree(model.topology)
    u = qd
    bodies, vi, qi = _planar_dofs(model.topology)
    if len(bodies):  # (x', y') = Rot(theta) (v_x, v_y)
        cs = take(q, qi[:, 2:].reshape(-1)).reshape(-1, 2)
        cs = cs / jnp.linalg.norm(cs, axis=-1, keepdims=True)
        vx, vy = take(qd, vi[:, 0]), take(qd, vi[:, 1])
        u = u.at[vi[:, 0]].set(cs[:, 0] * vx - cs[:, 1] * vy).at[vi[:, 1]].set(cs[:, 1] * vx + cs[:, 0] * vy)
    nonrec = tree.masks[BODY_ROTATION] + tree.masks[BODY_TRANSLATION]
    if nonrec.any():
        V = body_velocities_from(model, tk, qd)  # N axes, linear part at N's origin
        w = V[:, 3:]
        c = tk.p + spatial.matvec(tk.R, model.com)
        Rt = spatial.transpose(tk.R)
        local = jnp.concatenate([spatial.matvec(Rt, V[:, :3] + jnp.cross(w, c)), spatial.matvec(Rt, w)], -1)
        k = np.flatnonzero(nonrec)
        body = np.asarray(tree.speed_body)[k]
        col = np.asarray(tree.speed_axes)[k] + 3 * (np.asarray(tree.speed_kinds)[k] == BODY_ROTATION)
        u = u.at[k].set(local[body, col])
    return u


def kane_forward_dynamics_from(model: Model, q, qd, tau, f_ext=None):
    """Joint accelerations (nv,) by Kane's method (module docstring), no input checks."""
    tree = kane_tree(model.topology)
    tk = tree_kinematics(model, q)
    u = kane_speeds(model, tk, q, qd)
    Phi = jax.jacfwd(lambda v: kane_speeds(model, tk, q, v))(qd)

    def speeds_along(t):  # u(q (+) t qd, qd): its t-derivative at 0 is Phi' qd
        q_t = integrate_from(model, q, t * qd)
        return kane_speeds(model, tree_kinematics(model, q_t), q_t, qd)

    _, Phi_dot_qd = jax.jvp(speeds_along, (jnp.zeros((), qd.dtype),), (jnp.ones((), qd.dtype),))
    kin = kane_kinematics_from(tree, tk.R, tk.p, joint_axes(model, tk), model.com, model.com, u, model.gravity)
    inertia_n = world_inertias(kin, 0.5 * (model.inertia + spatial.transpose(model.inertia)))
    M = mass_matrix_from(kin, model.mass, inertia_n)
    f = force_array_from(kin, model.mass, inertia_n, f_ext)
    Mq = Phi.T @ M @ Phi + jnp.diag(model.armature)
    rhs = Phi.T @ (f - M @ Phi_dot_qd) + tau
    return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(Mq), rhs)


# ------------------------------------------------------------ system -> Model
def _joint_type(system: KaneSystem, b: int) -> str:
    """The mbjax joint type of body b's building-block joint (from its structure only)."""
    joint = system.joints[b]
    nt, nr = joint.n_translations, joint.n_rotations
    types = {(0, 0): "fixed", (0, 1): "revolute", (0, 2): "universal", (0, 3): "spherical", (1, 0): "prismatic",
             (1, 1): "cylindrical"}
    if (nt, nr) in types:
        return types[nt, nr]
    if (nt, nr) == (3, 3) and system.parents[b] < 0:
        return "free"
    raise NotImplementedError(
        f"body {system.body_names[b]!r}: a joint with {nt} translations and {nr} rotations has no mbjax "
        "equivalent (supported: 0-3 rotations, 1 translation with 0 or 1 rotation about it, and a free root)")


def _joint_axes(system: KaneSystem, b: int, jt: str) -> dict:
    """Axes (joint frame = R0) of the mbjax joint of body b."""
    joint = system.joints[b]
    e = [np.eye(3)[i - 1] for i in joint.rotation_axes]
    d = np.asarray(system.nominal_rotation[b]).T @ np.asarray(system.directions[b][0])
    if jt == "cylindrical" and np.linalg.norm(np.cross(d, e[0])) > 1e-12 * np.linalg.norm(d):
        raise NotImplementedError(f"body {system.body_names[b]!r}: a translation and a rotation about another "
                                  "axis have no mbjax equivalent (a cylindrical joint has one axis)")
    if jt == "prismatic":
        return {"axis": d}
    if jt in ("revolute", "cylindrical"):
        return {"axis": e[0]}
    if jt == "universal":
        return {"axis": e[0], "axis2": e[1]}
    return {}


def to_model(system: KaneSystem, name: str = "kane_system") -> Model:
    """The same tree as an mbjax :class:`~mbjax.Model` (body frames identical: the joint frame
    is R0 at the joint point). Bodies with 0-DOF joints are merged into their parents by the
    builder. Use :func:`state_to_model` for the matching state."""
    builder = ModelBuilder(name, gravity=np.asarray(system.gravity), inertia_check="warn")
    for b, body in enumerate(system.body_names):
        jt = _joint_type(system, b)
        kwargs = _joint_axes(system, b, jt)
        parent = system.parents[b]
        builder.add_body(body, parent=None if parent < 0 else system.body_names[parent], joint=jt,
                         rotation=np.asarray(system.nominal_rotation[b]), translation=np.asarray(system.joint_point[b]),
                         mass=float(system.mass[b]), com=np.asarray(system.com[b]),
                         inertia=np.asarray(system.inertia[b]), **kwargs)
    return builder.build(dtype=system.mass.dtype)


def state_to_model(system: KaneSystem, q, u):
    """(q, qd) of :func:`to_model`'s Model for the Kane state (q, u) (differentiable).

    Euler angles become the quaternion of the same rotation; spherical qd is the relative
    angular velocity in B, free qd the velocity of B0 and omega^B in B's axes.
    """
    kin = system_kinematics(system, q, u)
    qs, vs = [], []
    for b, joint in enumerate(system.joints):
        sl = system.q_slice(b)
        jt = _joint_type(system, b)
        nt = joint.n_translations
        Rt = kin.R[b].T
        a = system.parents[b]
        rel = kin.omega[b] - (kin.omega[a] if a >= 0 else 0.0)
        if jt in ("spherical", "free"):
            quat = spatial.rotation_to_quat(system.nominal_rotation[b].T @ (kin.R[a].T @ kin.R[b] if a >= 0 else kin.R[b]))
            if jt == "spherical":
                qs += [quat]
                vs += [Rt @ rel]
            else:
                pos = system.nominal_rotation[b].T @ (system.directions[b][:nt].T @ q[sl][:nt])
                v0 = kin.v[b] + jnp.cross(kin.omega[b], kin.p[b] - kin.point[b])
                qs += [pos, quat]
                vs += [Rt @ v0, Rt @ kin.omega[b]]
        elif jt != "fixed":
            qs.append(q[sl])
            vs.append(u[sl])
    return jnp.concatenate(qs), jnp.concatenate(vs)
