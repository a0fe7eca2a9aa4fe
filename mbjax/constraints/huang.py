"""The singularity-free constrained stepper of Huang, Yan, Jeng and Cheing (2000).

Every body moves on its own (maximal coordinates, :class:`~mbjax.MaximalState`); every joint
-- the tree's joints and the cut joints of :class:`LoopClosures` alike -- holds the bodies
together by unknown reactions Q, one per joint constraint. Over one step Δt:

1. Newton–Euler (Eq. 9–11) gives each body's accelerations as affine functions of Q:
   ``a_i = (Σ R_i^k + F_i + B_i) / m_i`` and
   ``α'_i = J'_i^-1 (N'_i - ω'_i x J'_i ω'_i)`` with ``N'_i`` the moment about the centre of
   mass in body axes (Eq. 11).
2. Each joint's points and axes are expanded to second order over Δt (Eq. 12, 18):
   ``Δr^c = ṙ^c Δt + r̈^c Δt²/2`` with ``r̈^c = a + α x d + ω x (ω x d)`` (Eq. 8), and
   ``Δq = ω x q Δt + (α x q + ω x (ω x q)) Δt²/2`` (Eq. 16–17): ``U + W(Q)`` and
   ``P + H(Q)`` in the paper's notation (Eq. 13, 19).
3. The joint equations at t + Δt, in the paper's vector forms:

   - points coincide (spherical, revolute, universal, weld): ``r_a^c + Δr_a^c = r_b^c +
     Δr_b^c`` (Eq. 21–23), three rows along joint frame A's axes;
   - axes stay parallel (revolute, cylindrical, prismatic, weld, planar):
     ``(q_a + Δq_a) x (q_b + Δq_b) = 0`` (Eq. 25–27), its two components normal to the axis;
   - a point stays on the axis (cylindrical, prismatic): ``(q_a + Δq_a) x (d + Δd) = 0``
     (Eq. 28–31), two rows;
   - two vectors stay perpendicular (prismatic, weld: y_A . x_B; universal: x_A . y_B;
     planar: z_A . d): ``(h_a + Δh_a) . (h_b + Δh_b) = 0`` (Eq. 32–33), one row.

   The rows are polynomials in Q; dropping the terms of second order in Q (Δt⁴ Q²) leaves
   the linear system of Eq. (36), ``(∂f/∂Q)|_{Q=0} Q = -f(0)`` (Eq. 4, A9–A10). Here the
   Jacobian is taken by forward-mode differentiation of the very expressions above, so it
   equals the paper's hand-derived partials (Eq. 14, 20, 27, 31, 33) term by term.
4. Action = -reaction (Eq. 34–35) is built in: each row's reaction acts on body b with +Q
   and on body a with -Q, at the same world point (the origin of joint frame B).
5. The system is solved by Gaussian elimination (LU) and the state is advanced with the same
   second-order expansion: ``r += ṙ Δt + a Δt²/2``, ``R <- exp(ω Δt + α Δt²/2) R``,
   ``ṙ += a Δt``, ``ω += α Δt``.

Reaction components (the unknowns): a point-coincidence row is a force along an axis of joint
frame A, applied at B's origin; an axis-parallel row is a moment about x_A or y_A; a
perpendicularity row a moment about z_A (a planar joint's: a force along z_A). A revolute joint
therefore carries 3 + 2 unknowns: the moment about its own axis is not a reaction (a motor
torque there is an applied load, given as ``tau``).

Because the right-hand side contains the current joint errors (``r_j^c - r_i^c`` in Eq. 23),
drift is corrected at every step. At a kinematic singularity the multiplier matrix of Eq. (1)
loses rank, but the matrix of Eq. (36) contains the second-order terms and the inertia of each
body separately (Sec. 2, Fig. 1) and stays regular.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..checks import check_external_forces, check_state
from ..dynamics.passive import passive_forces_from
from ..formulations.maximal import MaximalState, body_poses, maximal_state_from
from ..model.model import Model
from ..model.tree import as_index, map_joints, rows, take
from .closures import LoopClosures

#: constraint rows of each joint type -> index of the row in :func:`_candidate_rows`
ROW_FORMS = {
    "spherical": {"x": 0, "y": 1, "z": 2},
    "revolute": {"x": 0, "y": 1, "z": 2, "rx": 6, "ry": 7},
    "universal": {"x": 0, "y": 1, "z": 2, "rz": 9},
    "cylindrical": {"x": 3, "y": 4, "rx": 6, "ry": 7},
    "prismatic": {"x": 3, "y": 4, "rx": 6, "ry": 7, "rz": 8},
    "weld": {"x": 0, "y": 1, "z": 2, "rx": 6, "ry": 7, "rz": 8},
    "planar": {"z": 5, "rx": 6, "ry": 7},
}
#: reaction of each candidate row: (is a moment, axis of joint frame A it acts along)
_REACTION = np.array([(0, 0), (0, 1), (0, 2), (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 2)])
#: tree joint type -> the constraint it imposes on its two bodies (free joints impose none)
_TREE_CONSTRAINT = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic",
                    "spherical": "spherical", "universal": "universal", "cylindrical": "cylindrical",
                    "planar": "planar", "free": None}


class HuangJoints(eqx.Module):
    """Every joint of a closed-chain model as a constraint between two bodies.

    **Static:** ``names`` (tree joints, then cut joints), ``kinds`` (keys of
    :data:`ROW_FORMS`), ``body_a``, ``body_b`` (body index, ``nbodies`` = the world),
    ``row_joint`` and ``row_form`` (per constraint row: its joint and its form),
    ``row_names``, ``ntree`` (how many of the joints are tree joints).

    **Leaves:** poses of joint frame A in body a (``rotation_a`` (nj, 3, 3),
    ``translation_a`` (nj, 3)) and of joint frame B in body b; their z axes are the joint axes.
    """

    names: tuple = eqx.field(static=True)
    kinds: tuple = eqx.field(static=True)
    body_a: tuple = eqx.field(static=True)
    body_b: tuple = eqx.field(static=True)
    row_joint: tuple = eqx.field(static=True)
    row_form: tuple = eqx.field(static=True)
    row_names: tuple = eqx.field(static=True)
    ntree: int = eqx.field(static=True)
    rotation_a: jax.Array
    translation_a: jax.Array
    rotation_b: jax.Array
    translation_b: jax.Array

    @property
    def nrows(self) -> int:
        """Number of unknown reactions = number of joint constraints."""
        return len(self.row_form)


def _alignment(axis):
    """Rotations (n, 3, 3) whose z column is the unit ``axis`` (n, 3) (x: normal to the world
    axis least parallel to it), as :class:`~mbjax.LoopClosureBuilder` aligns cut joints."""
    helper = take(jnp.eye(3, dtype=axis.dtype), jnp.argmin(jnp.abs(axis), axis=-1))
    x = jnp.cross(helper, axis)
    x = x / jnp.linalg.norm(x, axis=-1, keepdims=True)
    return jnp.stack([x, jnp.cross(axis, x), axis], -1)


def huang_joints(model: Model, closures: LoopClosures | None = None) -> HuangJoints:
    """The tree joints of ``model`` (except free joints) and the cut joints of ``closures``.

    Tree joint i joins its parent (frame A: the joint placement) to body i (frame B: the body
    frame), each turned so that z is the joint axis (universal joints: x_A is axis 1 and y_B
    axis 2, which must be perpendicular).
    """
    topo = model.topology
    nb = topo.nbodies
    tree = [i for i, t in enumerate(topo.joint_types) if _TREE_CONSTRAINT[t] is not None]
    kinds = [_TREE_CONSTRAINT[topo.joint_types[i]] for i in tree]
    idx = np.asarray(tree, np.int32)
    axes = take(model.joint_axis, idx)  # (nt, 2, 3)
    eye = jnp.broadcast_to(jnp.eye(3, dtype=model.dtype), (len(tree), 3, 3))
    aligned = _alignment(axes[:, 0])
    universal = jnp.stack([axes[:, 0], axes[:, 1], jnp.cross(axes[:, 0], axes[:, 1])], -1)
    on_axis = np.asarray([k in ("revolute", "prismatic", "cylindrical") for k in kinds], bool)[:, None, None]
    crossed = np.asarray([k == "universal" for k in kinds], bool)[:, None, None]
    align = jnp.where(on_axis, aligned, jnp.where(crossed, universal, eye))
    Ra = [spatial.matmul(take(model.joint_rotation, idx), align)]
    pa = [take(model.joint_translation, idx)]
    Rb, pb = [align], [jnp.zeros((len(tree), 3), model.dtype)]
    names = [topo.joint_names[i] for i in tree]
    body_a = [p if p >= 0 else nb for p in (topo.parents[i] for i in tree)]
    body_b = list(tree)
    directions = [tuple(ROW_FORMS[k]) for k in kinds]
    if closures is not None:
        kinds += list(closures.joint_types)
        names += list(closures.names)
        body_a += [a if a >= 0 else nb for a, _ in closures.bodies]
        body_b += [b if b >= 0 else nb for _, b in closures.bodies]
        directions += list(closures.directions)
        Ra.append(closures.rotation_a.astype(model.dtype))
        pa.append(closures.translation_a.astype(model.dtype))
        Rb.append(closures.rotation_b.astype(model.dtype))
        pb.append(closures.translation_b.astype(model.dtype))
    rows = [(j, ROW_FORMS[k][d], f"{n}/{d}") for j, (k, n, ds) in enumerate(zip(kinds, names, directions)) for d in ds]
    if not rows:
        raise ValueError(f"model {model.name!r} has no joint constraints (only free joints and no closures)")
    row_joint, row_form, row_names = zip(*rows)
    return HuangJoints(tuple(names), tuple(kinds), tuple(body_a), tuple(body_b), row_joint, row_form, row_names,
                       len(tree), jnp.concatenate(Ra), jnp.concatenate(pa), jnp.concatenate(Rb),
                       jnp.concatenate(pb))


def _with_world(x, fill=0.0):
    """Per-body rows plus a last row (the world): zeros, or the identity for rotations."""
    last = jnp.eye(3, dtype=x.dtype)[None] if fill == "eye" else jnp.zeros((1,) + x.shape[1:], x.dtype)
    return jnp.concatenate([x, last])


def _expand(x, w, alpha, dt):
    """Second-order change of a body-fixed vector x (Eq. 16–18): ω x x Δt + (α x x + ω x (ω x x)) Δt²/2."""
    return jnp.cross(w, x) * dt + 0.5 * dt * dt * (jnp.cross(alpha, x) + jnp.cross(w, jnp.cross(w, x)))


def _candidate_rows(RA, RA1, RB1, d1):
    """All joint equations (nj, 10) from frame A at t (RA), the predicted frames A and B at
    t + Δt (RA1, RB1) and the predicted vector d1 from A's origin to B's origin."""
    X, Y, Z = RA[..., 0], RA[..., 1], RA[..., 2]
    Z1 = RA1[..., 2]

    def dot(u, v):
        return jnp.sum(u * v, -1)

    on_axis = jnp.cross(Z1, d1)  # Eq. 28
    parallel = jnp.cross(Z1, RB1[..., 2])  # Eq. 25
    return jnp.stack([
        dot(X, d1), dot(Y, d1), dot(Z, d1),  # Eq. 21–23: points coincide
        dot(Y, on_axis), -dot(X, on_axis),  # Eq. 28–31: B's origin on A's axis
        dot(Z1, d1),  # planar joint: B's origin in A's x-y plane (Eq. 32 form)
        dot(X, parallel), dot(Y, parallel),  # Eq. 25–27: axes parallel
        dot(RA1[..., 1], RB1[..., 0]),  # Eq. 32–33: y_A . x_B = 0 (prismatic, weld)
        dot(RA1[..., 0], RB1[..., 1]),  # Eq. 32–33: x_A . y_B = 0 (universal)
    ], -1)


class HuangFrames(eqx.Module):
    """Joint frames and lever arms at time t (world frame), shared by the system and the update."""

    RA: jax.Array  # (nj, 3, 3) frame A
    RB: jax.Array  # (nj, 3, 3) frame B
    arm_a: jax.Array  # (nj, 3) from body a's centre of mass to A's origin
    arm_b: jax.Array  # (nj, 3) from body b's centre of mass to B's origin
    point: jax.Array  # (nj, 3) B's origin: where the reactions act
    axes: jax.Array  # (nr, 3) direction of each row's reaction
    is_moment: jax.Array  # (nr,) 1 for moment rows, 0 for force rows


def joint_frames(model: Model, joints: HuangJoints, state: MaximalState) -> HuangFrames:
    """World poses of every joint frame of ``joints`` at ``state``."""
    R, _ = body_poses(model, state)
    Rw, c = _with_world(R, "eye"), _with_world(state.r)
    com = _with_world(model.com.astype(c.dtype))
    a, b = np.asarray(joints.body_a, np.int32), np.asarray(joints.body_b, np.int32)
    RA = spatial.matmul(take(Rw, a), joints.rotation_a)
    RB = spatial.matmul(take(Rw, b), joints.rotation_b)
    arm_a = spatial.matvec(take(Rw, a), joints.translation_a - take(com, a))
    arm_b = spatial.matvec(take(Rw, b), joints.translation_b - take(com, b))
    form = np.asarray(joints.row_form, np.int32)
    axes = jnp.take_along_axis(take(RA, np.asarray(joints.row_joint, np.int32)),
                               _REACTION[form, 1][:, None, None], axis=-1)[..., 0]
    return HuangFrames(RA, RB, arm_a, arm_b, take(c, b) + arm_b, axes,
                       jnp.asarray(_REACTION[form, 0], c.dtype))


def reaction_wrenches(model: Model, joints: HuangJoints, frames: HuangFrames, state: MaximalState, Q):
    """Force and moment about the centre of mass (world axes) on each body, (nb, 3) each, of
    the reactions Q (nr,): +Q on body b and -Q on body a at B's origin (Eq. 34–35)."""
    nb = model.nbodies
    rows = np.asarray(joints.row_joint, np.int32)
    vec = Q[:, None] * frames.axes
    force, couple = vec * (1.0 - frames.is_moment)[:, None], vec * frames.is_moment[:, None]
    point = take(frames.point, rows)
    c = _with_world(state.r)
    a, b = np.asarray(joints.body_a, np.int32)[rows], np.asarray(joints.body_b, np.int32)[rows]

    def on(bodies, sign):
        moment = jnp.cross(point - take(c, bodies), force) + couple
        f = jax.ops.segment_sum(sign * force, bodies, nb + 1)[:nb]
        return f, jax.ops.segment_sum(sign * moment, bodies, nb + 1)[:nb]

    (fb, nb_), (fa, na) = on(b, 1.0), on(a, -1.0)
    return fb + fa, nb_ + na


def _inverse3(J):
    """Inverses of 3x3 matrices (n, 3, 3) by cofactors (no LAPACK call)."""
    a, b, c = J[..., 0, :], J[..., 1, :], J[..., 2, :]
    cols = jnp.stack([jnp.cross(b, c), jnp.cross(c, a), jnp.cross(a, b)], -1)  # adjugate
    return cols / jnp.sum(a * cols[..., 0], -1)[..., None, None]


def newton_euler(model: Model, state: MaximalState, force, moment):
    """Eq. (9)–(11): accelerations of the centres of mass and angular accelerations (world)
    under total forces and moments about the centres of mass (world axes), plus gravity."""
    R = state.rotation
    acc = force / model.mass[:, None] + model.gravity
    w_body = spatial.matvec(spatial.transpose(R), state.omega)  # ω'
    n_body = spatial.matvec(spatial.transpose(R), moment)  # N'
    Jw = spatial.matvec(model.inertia, w_body)
    alpha_body = spatial.matvec(_inverse3(model.inertia), n_body - jnp.cross(w_body, Jw))
    return acc, spatial.matvec(R, alpha_body)


def joint_equations(model: Model, joints: HuangJoints, frames: HuangFrames, state: MaximalState, acc, alpha, dt):
    """The joint equations f (nr,) at t + Δt, predicted to second order from the bodies'
    accelerations (Eq. 12–33)."""
    a, b = np.asarray(joints.body_a, np.int32), np.asarray(joints.body_b, np.int32)
    v, w = _with_world(state.r_dot), _with_world(state.omega)
    acc, alpha = _with_world(acc), _with_world(alpha)

    def moved(bodies, arm, R):
        vb, wb, ab, alb = take(v, bodies), take(w, bodies), take(acc, bodies), take(alpha, bodies)
        # Eq. 12: Δr^c = (ṙ + ω x d) Δt + (a + α x d + ω x (ω x d)) Δt²/2
        shift = vb * dt + 0.5 * dt * dt * ab + _expand(arm, wb, alb, dt)
        # Eq. 18: the frame's axes (columns of R), q + Δq
        R1 = R + jnp.swapaxes(_expand(jnp.swapaxes(R, -1, -2), wb[:, None], alb[:, None], dt), -1, -2)
        return shift, R1

    shift_a, RA1 = moved(a, frames.arm_a, frames.RA)
    shift_b, RB1 = moved(b, frames.arm_b, frames.RB)
    c = _with_world(state.r)
    d1 = (take(c, b) + frames.arm_b + shift_b) - (take(c, a) + frames.arm_a + shift_a)
    rows = _candidate_rows(frames.RA, RA1, RB1, d1)
    return rows[np.asarray(joints.row_joint, np.int32), np.asarray(joints.row_form, np.int32)]


def applied_loads(model: Model, state: MaximalState, q, tau, f_ext=None):
    """Forces and moments about the centres of mass (world axes, (nb, 3) each) of the joint
    torques ``tau`` (nv,) and the external wrenches ``f_ext`` (nb, 6, body axes, about the body
    origin), without gravity.

    Joint i's generalized force acts as the wrench ``S (S^T S)^-1 tau_i`` (child frame, about
    the child's origin: a motor's torque about its axis) on the child and its opposite on the
    parent.
    """
    nb = model.nbodies
    R, o = body_poses(model, state)

    def joint_wrench(g):
        S = g.joint.motion_subspace(take(model.joint_axis, as_index(g.body)), rows(q, g.q))  # (n, nv_j, 6)
        gram = jnp.einsum("nai,nbi->nab", S, S)
        coef = jnp.linalg.solve(gram, rows(tau, g.v)[..., None])[..., 0]
        return jnp.einsum("na,nai->ni", coef, S)

    wrench = map_joints(model.topology, joint_wrench, "body")
    F, N = spatial.matvec(R, wrench[:, :3]), spatial.matvec(R, wrench[:, 3:])
    parent = np.asarray([p if p >= 0 else nb for p in model.parents], np.int32)
    c_parent = take(_with_world(state.r), parent)
    force = F - jax.ops.segment_sum(F, parent, nb + 1)[:nb]
    moment = N + jnp.cross(o - state.r, F) - jax.ops.segment_sum(N + jnp.cross(o - c_parent, F), parent, nb + 1)[:nb]
    if f_ext is not None:
        fe = spatial.matvec(R, f_ext[:, :3])
        force = force + fe
        moment = moment + spatial.matvec(R, f_ext[:, 3:]) + jnp.cross(o - state.r, fe)
    return force, moment


def huang_system_from(model: Model, joints: HuangJoints, state: MaximalState, force, moment, dt):
    """Eq. (36): the matrix ``∂f/∂Q`` (nr, nr) and right-hand side ``Ψ = -f(Q = 0)`` (nr,),
    with the applied ``force`` and ``moment`` (from :func:`applied_loads`), and the frames."""
    frames = joint_frames(model, joints, state)

    def equations(Q):  # Eq. 9–33 as functions of the reactions
        fr, mr = reaction_wrenches(model, joints, frames, state, Q)
        acc, alpha = newton_euler(model, state, force + fr, moment + mr)
        return joint_equations(model, joints, frames, state, acc, alpha, dt)

    f0, linear = jax.linearize(equations, jnp.zeros(joints.nrows, state.r.dtype))  # Eq. 4
    matrix = jax.vmap(linear, out_axes=1)(jnp.eye(joints.nrows, dtype=f0.dtype))
    return matrix, -f0, frames


def advance(state: MaximalState, acc, alpha, dt) -> MaximalState:
    """The state at t + Δt from the accelerations, to second order (Eq. 5–12)."""
    turn = spatial.quat_exp(state.omega * dt + 0.5 * dt * dt * alpha)  # R <- exp(ω Δt + α Δt²/2) R
    return MaximalState(state.r + state.r_dot * dt + 0.5 * dt * dt * acc, spatial.quat_multiply(turn, state.quat),
                        state.r_dot + acc * dt, state.omega + alpha * dt)


def step_bodies(model: Model, joints: HuangJoints, state: MaximalState, force, moment, dt):
    """One step of the stepper on a maximal state: ``(new state, Q (nr,), frames)``."""
    matrix, rhs, frames = huang_system_from(model, joints, state, force, moment, dt)
    Q = jnp.linalg.solve(matrix, rhs)  # Gaussian elimination (Sec. 10)
    fr, mr = reaction_wrenches(model, joints, frames, state, Q)
    acc, alpha = newton_euler(model, state, force + fr, moment + mr)
    return advance(state, acc, alpha, dt), Q, frames


def joint_wrenches(joints: HuangJoints, frames: HuangFrames, Q):
    """(force, moment) (nj, 6) each joint exerts on its body b, about the origin of joint frame
    B, in world axes (body a receives the opposite)."""
    vec = Q[:, None] * frames.axes
    both = jnp.concatenate([vec * (1.0 - frames.is_moment)[:, None], vec * frames.is_moment[:, None]], -1)
    return jax.ops.segment_sum(both, np.asarray(joints.row_joint, np.int32), len(joints.names))


@eqx.filter_jit
def huang_system(model: Model, closures: LoopClosures | None, q, qd, tau, dt, f_ext=None):
    """The linear system of Eq. (36) at the joint-space state (q, qd).

    **Arguments:** ``closures`` (or ``None`` for a tree), ``q`` (nq,), ``qd`` (nv,), ``tau``
    (nv,) joint torques, ``dt`` the step, ``f_ext`` (nbodies, 6) optional.

    **Returns:** ``(matrix (nr, nr), rhs (nr,))`` with ``matrix @ Q = rhs`` for the reactions
    Q, rows and unknowns in the order of ``huang_joints(model, closures).row_names``.
    """
    q, qd, tau = check_state(model, q, qd=qd, tau=tau)
    state = maximal_state_from(model, q, qd)
    force, moment = applied_loads(model, state, q, tau + passive_forces_from(model, q, qd),
                                  check_external_forces(model, f_ext))
    matrix, rhs, _ = huang_system_from(model, huang_joints(model, closures), state, force, moment,
                                       jnp.asarray(dt, qd.dtype))
    return matrix, rhs
