"""Free-floating robots in the momentum coordinates of Wilde et al. 2018 (after Yoshida).

The state of a manipulator on a free-floating base (spacecraft, drone, floating humanoid) is
written as ``xd = (V_0, w_0, phid)``: the velocity of the base's centre of mass and the base's
angular velocity, both in world axes, then the joint rates. mbjax's free joint uses the
body-frame velocity of the base frame's origin instead (as Pinocchio's free-flyer), so

    V_0 = R_0 (v_b + w_b x c_0),   w_0 = R_0 w_b,   phid = qd[6:]            (xd = A qd)

with ``R_0`` the base orientation and ``c_0`` the base CoM in the base frame. In these
coordinates the kinetic energy is ``1/2 xd^T H xd`` with the blocks of Eq. (24):

    H_0    = [[M E, M [r_0g]x^T], [M [r_0g]x, H_W]]                            (Eq. 20)
    H_0m   = [J_Tw; H_Wphi]                                                    (Eq. 23)
    H_W    = sum_i (I_i + m_i [r_0i]x^T [r_0i]x)
    J_Tw   = sum_i m_i J_Ti,   H_Wphi = sum_i (m_i [r_0i]x J_Ti + I_i J_Ri)
    H_m    = sum_i (J_Ri^T I_i J_Ri + m_i J_Ti^T J_Ti)

where J_Ti, J_Ri are the translational and rotational Jacobians of body i's CoM with respect to
the joints that move it (``J_Ti[:, j] = k_j x (r_i - p_j)`` for a revolute joint; any joint type
is handled through its motion subspace). The sums are over every body, the base included.

The momentum is ``(P, L_0) = H_0 x0d + H_0m phid`` (Eq. 21), with L_0 about the base CoM;
about the world origin ``L = L_0 + r_0 x P`` (Eq. 17) and about the system CoM
``L_g = L - r_g x P`` (Eq. 12). (Eq. 19 as printed adds ``r_g x P``; the consistent term,
from Eq. 17, is ``r_0 x P``.)

The equations of motion are ``H xdd + c = (F_b, tau)`` (Eq. 38-39), extended by Eq. (41) with
an input map B(q) u, contact forces J_c^T F_c and joint friction F_f. Here c (the paper's
(c_b, c_m)) also holds gravity (``-tau_g`` of Eq. 41) and the body wrenches f_ext, and is
computed by one RNEA pass: ``c = A^-T rnea(q, qd, -A^-1 Adot qd)``.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import spatial
from ..checks import check_external_forces, check_state
from ..dynamics.rnea import rnea_from
from ..kinematics import frame_id, frame_jacobian_from, frame_placements_from, tree_kinematics
from ..model.model import Model
from ..model.tree import take


class FloatingInertia(NamedTuple):
    """Blocks of the kinetic-energy matrix of Eq. (24) in momentum coordinates."""

    H0: jax.Array  # (6, 6) base inertia, Eq. (20)
    H0m: jax.Array  # (6, n) base-manipulator coupling, Eq. (23)
    Hm: jax.Array  # (n, n) manipulator inertia

    @property
    def matrix(self):
        """The full (6 + n, 6 + n) matrix ``[[H_0, H_0m], [H_0m^T, H_m]]`` of Eq. (24)-(27)."""
        return jnp.block([[self.H0, self.H0m], [self.H0m.T, self.Hm]])

    @property
    def generalized(self):
        """``H* = H_m - H_0m^T H_0^-1 H_0m`` (n, n): the joint-space inertia of the arm with the
        base free (Yoshida's generalized inertia matrix)."""
        return self.Hm - self.H0m.T @ jnp.linalg.solve(self.H0, self.H0m)


class GeneralizedJacobian(NamedTuple):
    """End-effector velocity ``(V_r, w_n) = J phid + drift`` of a free-floating robot."""

    J: jax.Array  # (6, n) J* = J_m - J_s H_0^-1 H_0m
    drift: jax.Array  # (6,) J_s H_0^-1 (P, L_0): zero when the momentum is zero


def check_free_floating(model: Model):
    """Raise unless body 0 is the only root and is attached to the world by a free joint."""
    topo = model.topology
    roots = [i for i, p in enumerate(topo.parents) if p < 0]
    if roots != [0] or topo.joint_types[0] != "free":
        raise ValueError(
            f"model {model.name!r} is not free-floating: the momentum formulation needs body 0 "
            "to be the only body attached to the world, by a 'free' joint (load the URDF with "
            "floating_base=True, or add the base with joint_type='free')"
        )


# ------------------------------------------------------------------ coordinate maps
def _base_map(model: Model, tk):
    """``(A_b, A_b^-1)`` (6, 6): base part of ``xd = A qd`` (the joint part is the identity)."""
    R0, c0 = tk.R[0], model.com[0]
    C = spatial.skew(c0)
    Z = jnp.zeros((3, 3), R0.dtype)
    A = jnp.block([[R0, -R0 @ C], [Z, R0]])
    A_inv = jnp.block([[R0.T, C @ R0.T], [Z, R0.T]])
    return A, A_inv


def _apply_base(Ab, x):
    return jnp.concatenate([Ab @ x[:6], x[6:]])


def _base_bias(model: Model, tk, qd):
    """``Adot qd`` (nv,): only V_0 has one, ``R_0 (w_b x (v_b + w_b x c_0))``."""
    v, w = qd[:3], qd[3:6]
    acc = tk.R[0] @ jnp.cross(w, v + jnp.cross(w, model.com[0]))
    return jnp.concatenate([acc, jnp.zeros(qd.shape[0] - 3, qd.dtype)])


@eqx.filter_jit
def to_floating(model: Model, q, qd, qdd=None):
    """Joint-space velocity (and acceleration) -> momentum coordinates ``xd`` (and ``xdd``).

    **Arguments:** ``q`` (nq,), ``qd`` (nv,), optionally ``qdd`` (nv,).

    **Returns:** ``xd = (V_0, w_0, phid)`` (nv,), or ``(xd, xdd)`` when ``qdd`` is given.
    """
    check_free_floating(model)
    q, qd = check_state(model, q, qd=qd)
    tk = tree_kinematics(model, q)
    A, _ = _base_map(model, tk)
    xd = _apply_base(A, qd)
    if qdd is None:
        return xd
    return xd, _apply_base(A, jnp.asarray(qdd, qd.dtype)) + _base_bias(model, tk, qd)


@eqx.filter_jit
def from_floating(model: Model, q, xd, xdd=None):
    """Momentum coordinates ``xd`` (and ``xdd``) -> joint-space ``qd`` (and ``qdd``)."""
    check_free_floating(model)
    q, xd = check_state(model, q, qd=xd)
    tk = tree_kinematics(model, q)
    _, A_inv = _base_map(model, tk)
    qd = _apply_base(A_inv, xd)
    if xdd is None:
        return qd
    return qd, _apply_base(A_inv, jnp.asarray(xdd, xd.dtype) - _base_bias(model, tk, qd))


# ------------------------------------------------------------------------ inertia
def _body_sums(model: Model, tk):
    """H_0, H_0m, H_m of Eq. (20)-(24) from the per-body sums (no armature)."""
    m = model.mass
    r = spatial.matvec(tk.R, model.com) + tk.p  # r_i: CoM of each body, world frame
    inertia = 0.5 * (model.inertia + spatial.transpose(model.inertia))
    I = spatial.matmul(spatial.matmul(tk.R, inertia), spatial.transpose(tk.R))  # I_i about r_i
    M = jnp.sum(m)
    r_0g = jnp.sum(m[:, None] * r, axis=0) / M - r[0]
    r_0i = r - r[0]
    # J_Ti, J_Ri (nb, 3, n): the arm's world-frame subspace columns, masked by the joints that
    # move each body; the CoM velocity of column j is v_O,j + w_j x r_i
    S = tk.S[6:]
    mask = jnp.asarray(model.topology.dof_ancestors[:, 6:], S.dtype)[:, None, :]
    J_R = mask * S[None, :, 3:].swapaxes(1, 2)
    J_T = mask * (S[None, :, :3] + jnp.cross(S[None, :, 3:], r[:, None, :])).swapaxes(1, 2)
    E = jnp.eye(3, dtype=r.dtype)
    # [r]x^T [r]x = |r|^2 E - r r^T
    rr = jnp.sum(r_0i**2, -1)[:, None, None] * E - r_0i[:, :, None] * r_0i[:, None, :]
    H_W = jnp.sum(I + m[:, None, None] * rr, axis=0)
    Rg = spatial.skew(r_0g)
    H0 = jnp.block([[M * E, M * Rg.T], [M * Rg, H_W]])  # Eq. (20)
    J_Tw = jnp.einsum("i,ijk->jk", m, J_T)
    H_Wphi = jnp.einsum("i,ijl,ilk->jk", m, spatial.skew(r_0i), J_T) + jnp.einsum("ijl,ilk->jk", I, J_R)
    H0m = jnp.concatenate([J_Tw, H_Wphi])  # Eq. (23)
    Hm = jnp.einsum("ilj,ilp,ipk->jk", J_R, I, J_R) + jnp.einsum("i,ilj,ilk->jk", m, J_T, J_T)
    return H0, H0m, Hm


def floating_inertia_from(model: Model, tk) -> FloatingInertia:
    H0, H0m, Hm = _body_sums(model, tk)
    # armature adds diag(a) to the joint-space matrix, i.e. A^-T diag(a) A^-1 in these
    # coordinates (only the base block changes shape; a free joint rarely has any)
    _, A_inv = _base_map(model, tk)
    H0 = H0 + A_inv.T @ (model.armature[:6, None] * A_inv)
    return FloatingInertia(H0, H0m, Hm + jnp.diag(model.armature[6:]))


@eqx.filter_jit
def floating_inertia(model: Model, q) -> FloatingInertia:
    """The blocks H_0, H_0m, H_m of Eq. (24) at configuration ``q`` (armature included).

    ``floating_inertia(model, q).matrix`` is the kinetic-energy matrix in momentum
    coordinates: ``T = 1/2 xd^T H xd`` (Eq. 26).
    """
    check_free_floating(model)
    q = check_state(model, q)
    return floating_inertia_from(model, tree_kinematics(model, q))


# ----------------------------------------------------------------------- momentum
@eqx.filter_jit
def floating_momentum(model: Model, q, xd, about: str = "base"):
    """Linear and angular momentum ``(P, L)`` (3,), (3,) in world axes, Eq. (6)-(19).

    **Arguments:** ``xd = (V_0, w_0, phid)`` (nv,); ``about``: ``"base"`` (the base CoM,
    L_0 of Eq. 18), ``"com"`` (the system CoM, L_g of Eq. 15) or ``"world"`` (the world
    origin, L of Eq. 10).
    """
    check_free_floating(model)
    q, xd = check_state(model, q, qd=xd)
    tk = tree_kinematics(model, q)
    H0, H0m, _ = _body_sums(model, tk)
    h = H0 @ xd[:6] + H0m @ xd[6:]  # (P, L_0), Eq. (21)
    P, L0 = h[:3], h[3:]
    r = spatial.matvec(tk.R, model.com) + tk.p
    r_0 = r[0]
    if about == "base":
        return P, L0
    if about == "world":
        return P, L0 + jnp.cross(r_0, P)  # Eq. (17)
    if about == "com":
        r_g = jnp.sum(model.mass[:, None] * r, axis=0) / jnp.sum(model.mass)
        return P, L0 - jnp.cross(r_g - r_0, P)  # Eq. (12) and (17)
    raise ValueError(f"unknown reference {about!r}; use 'base', 'com' or 'world'")


@eqx.filter_jit
def base_velocity(model: Model, q, phid, base_momentum=None):
    """Base velocity ``x0d = (V_0, w_0)`` (6,) of a floating robot whose joints move at ``phid``.

    Eq. (21) solved for the base: ``x0d = H_0^-1 ((P, L_0) - H_0m phid)``, with the momentum
    ``base_momentum = (P, L_0)`` (6,) conserved (None: zero). With zero momentum the base
    attitude is ``w_0 = -[H_0^-1 H_0m]_w phid``: not integrable, so a closed path of the joints
    can leave the base turned (the non-holonomic effect).
    """
    check_free_floating(model)
    n = model.nv - 6
    phid = jnp.asarray(phid)
    if phid.shape != (n,):
        raise ValueError(f"phid has shape {phid.shape}; expected ({n},): one rate per joint coordinate of the arm")
    q = check_state(model, q)
    H0, H0m, _ = _body_sums(model, tree_kinematics(model, q))
    h = -H0m @ phid if base_momentum is None else jnp.asarray(base_momentum, phid.dtype) - H0m @ phid
    return jnp.linalg.solve(H0, h)


# ------------------------------------------------------------------------ Jacobians
def _floating_jacobians_from(model: Model, tk, f):
    _, p = frame_placements_from(model, tk)
    p_0r = take(p, f) - (tk.R[0] @ model.com[0] + tk.p[0])
    E = jnp.eye(3, dtype=p_0r.dtype)
    Z = jnp.zeros((3, 3), E.dtype)
    J_s = jnp.block([[E, -spatial.skew(p_0r)], [Z, E]])
    J_m = frame_jacobian_from(model, tk, f, "local_world_aligned")[:, 6:]
    return J_s, J_m


def floating_jacobians(model: Model, q, frame):
    """``(J_s, J_m)`` of Eq. (5): ``(V_r, w_n) = J_s (V_0, w_0) + J_m phid`` for a frame.

    ``V_r`` is the velocity of the frame's origin and ``w_n`` its angular velocity, world axes.
    ``J_s = [[E, -[p_r - r_0]x], [0, E]]`` (6, 6); ``J_m`` (6, n) is the fixed-base Jacobian.
    """
    return _floating_jacobians(model, q, frame_id(model, frame))


@eqx.filter_jit
def _floating_jacobians(model, q, f):
    check_free_floating(model)
    q = check_state(model, q)
    return _floating_jacobians_from(model, tree_kinematics(model, q), f)


def generalized_jacobian(model: Model, q, frame, base_momentum=None) -> GeneralizedJacobian:
    """Yoshida's generalized Jacobian ``J* = J_m - J_s H_0^-1 H_0m`` (6, n) of a frame.

    Momentum conservation gives ``x0d = H_0^-1 ((P, L_0) - H_0m phid)`` (Eq. 21), hence the
    frame velocity ``J* phid + J_s H_0^-1 (P, L_0)``. ``base_momentum`` is ``(P, L_0)`` (6,)
    (see :func:`floating_momentum` with ``about="base"``); None means zero momentum.
    """
    return _generalized_jacobian(model, q, frame_id(model, frame), base_momentum)


@eqx.filter_jit
def _generalized_jacobian(model, q, f, base_momentum):
    check_free_floating(model)
    q = check_state(model, q)
    tk = tree_kinematics(model, q)
    H0, H0m, _ = _body_sums(model, tk)
    J_s, J_m = _floating_jacobians_from(model, tk, f)
    J = J_m - J_s @ jnp.linalg.solve(H0, H0m)
    if base_momentum is None:
        return GeneralizedJacobian(J, jnp.zeros(6, J.dtype))
    return GeneralizedJacobian(J, J_s @ jnp.linalg.solve(H0, jnp.asarray(base_momentum, J.dtype)))


@eqx.filter_jit
def reaction_null_space(model: Model, q):
    """Orthonormal basis (n, n - 3) of the joint rates that leave the base attitude unchanged.

    With zero momentum the base turns at ``w_0 = -[H_0^-1 H_0m]_{rows 4-6} phid`` (Eq. 21); the
    reaction null space is the kernel of those three rows (an SVD; assumes they have rank 3,
    the generic case for n >= 3).
    """
    check_free_floating(model)
    n = model.nv - 6
    if n <= 3:
        raise ValueError(f"a reaction null space needs more than 3 joints; model has {n}")
    q = check_state(model, q)
    H0, H0m, _ = _body_sums(model, tree_kinematics(model, q))
    W = jnp.linalg.solve(H0, H0m)[3:]
    _, _, Vt = jnp.linalg.svd(W)
    return Vt[3:].T


# ------------------------------------------------------------------------ dynamics
def floating_bias_from(model: Model, tk, q, qd, f_ext=None):
    """``c`` (nv,) of Eq. (38) in momentum coordinates, gravity and f_ext included.

    ``c = A^-T rnea(q, qd, qdd)`` with ``qdd = -A^-1 Adot qd``, the joint-space acceleration
    at which ``xdd = 0``.
    """
    _, A_inv = _base_map(model, tk)
    qdd0 = -_apply_base(A_inv, _base_bias(model, tk, qd))
    return _apply_base(A_inv.T, rnea_from(model, tk, q, qd, qdd0, f_ext))


def floating_forward_dynamics_from(model: Model, tk, q, qd, rhs, f_ext=None):
    """Solve ``H xdd = rhs - c`` (Eq. 39) by the base Schur complement:
    ``H* phidd = r_m - H_0m^T H_0^-1 r_b``, then ``x0dd = H_0^-1 (r_b - H_0m phidd)``."""
    H = floating_inertia_from(model, tk)
    r = rhs - floating_bias_from(model, tk, q, qd, f_ext)
    r_b, r_m = r[:6], r[6:]
    H0 = jax.scipy.linalg.cho_factor(H.H0)
    Y = jax.scipy.linalg.cho_solve(H0, jnp.concatenate([H.H0m, r_b[:, None]], axis=1))
    H0inv_H0m, H0inv_rb = Y[:, :-1], Y[:, -1]
    Hstar = H.Hm - H.H0m.T @ H0inv_H0m
    phidd = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(Hstar), r_m - H.H0m.T @ H0inv_rb)
    return jnp.concatenate([H0inv_rb - H0inv_H0m @ phidd, phidd])


@eqx.filter_jit
def floating_inverse_dynamics(model: Model, q, xd, phidd, base_wrench=None, f_ext=None):
    """Joint torques that give the arm the accelerations ``phidd`` while the base floats.

    The base rows of Eq. (39) give the base's reaction, ``x0dd = H_0^-1 (F_b - c_b - H_0m
    phidd)``; the joint rows then give ``tau = H_0m^T x0dd + H_m phidd + c_m``.

    **Returns:** ``(x0dd (6,), tau (n,))``.
    """
    check_free_floating(model)
    n = model.nv - 6
    phidd = jnp.asarray(phidd)
    if phidd.shape != (n,):
        raise ValueError(f"phidd has shape {phidd.shape}; expected ({n},): one acceleration per joint coordinate of the arm")
    q, xd, rhs = check_state(model, q, qd=xd, qdd=jnp.concatenate([jnp.zeros(6, phidd.dtype), phidd]))
    f_ext = check_external_forces(model, f_ext)
    phidd = rhs[6:]
    tk = tree_kinematics(model, q)
    H = floating_inertia_from(model, tk)
    qd = _apply_base(_base_map(model, tk)[1], xd)
    c = floating_bias_from(model, tk, q, qd, f_ext)
    F_b = jnp.zeros(6, c.dtype) if base_wrench is None else jnp.asarray(base_wrench, c.dtype)
    x0dd = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(H.H0), F_b - c[:6] - H.H0m @ phidd)
    return x0dd, H.H0m.T @ x0dd + H.Hm @ phidd + c[6:]


@eqx.filter_jit
def floating_forward_dynamics(
    model: Model,
    q,
    xd,
    tau,
    base_wrench=None,
    f_ext=None,
    input_map=None,
    controls=None,
    contact_jacobian=None,
    contact_forces=None,
    friction=None,
):
    """Accelerations ``xdd = (V0dot, w0dot, phidd)`` of Eq. (39)/(41).

    ``H xdd + c = (F_b, tau) + B u + J_c^T F_c + F_f``.

    **Arguments:** ``xd`` (nv,) in momentum coordinates; ``tau`` (n,) joint torques;
    ``base_wrench`` F_b (6,): force at the base CoM and moment about it, world axes;
    ``f_ext`` (nbodies, 6) body-frame wrenches (as in :func:`mbjax.rnea`); ``input_map`` B
    (nv, k) and ``controls`` u (k,); ``contact_jacobian`` J_c (m, nv), mapping ``xd`` to contact
    velocities, and ``contact_forces`` F_c (m,); ``friction`` F_f (nv,) generalized friction.
    Gravity comes from ``model.gravity`` (set it to zero for orbit).
    """
    check_free_floating(model)
    n = model.nv - 6
    tau = jnp.zeros(n) if tau is None else jnp.asarray(tau)
    if tau.shape != (n,):
        raise ValueError(f"tau has shape {tau.shape}; expected ({n},): one torque per joint coordinate of the arm")
    q, xd, tau = check_state(model, q, qd=xd, tau=jnp.concatenate([jnp.zeros(6, tau.dtype), tau]))
    f_ext = check_external_forces(model, f_ext)
    tk = tree_kinematics(model, q)
    rhs = tau
    if base_wrench is not None:
        rhs = rhs.at[:6].add(jnp.asarray(base_wrench, rhs.dtype))
    if (input_map is None) != (controls is None):
        raise ValueError("give both input_map (B) and controls (u), or neither")
    if input_map is not None:
        rhs = rhs + jnp.asarray(input_map, rhs.dtype) @ jnp.asarray(controls, rhs.dtype)
    if (contact_jacobian is None) != (contact_forces is None):
        raise ValueError("give both contact_jacobian (J_c) and contact_forces (F_c), or neither")
    if contact_jacobian is not None:
        rhs = rhs + jnp.asarray(contact_jacobian, rhs.dtype).T @ jnp.asarray(contact_forces, rhs.dtype)
    if friction is not None:
        rhs = rhs + jnp.asarray(friction, rhs.dtype)
    qd = _apply_base(_base_map(model, tk)[1], xd)
    return floating_forward_dynamics_from(model, tk, q, qd, rhs, f_ext)


def momentum_forward_dynamics_from(model: Model, tk, q, qd, tau, f_ext=None):
    """Joint-space accelerations by the momentum form: the generalized forces map as
    ``(F_b, tau) = A^-T tau_joint`` (power is invariant), then ``qdd = A^-1 (xdd - Adot qd)``."""
    _, A_inv = _base_map(model, tk)
    xdd = floating_forward_dynamics_from(model, tk, q, qd, _apply_base(A_inv.T, tau), f_ext)
    return _apply_base(A_inv, xdd - _base_bias(model, tk, qd))
