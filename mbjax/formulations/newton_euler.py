"""Per-body Newton-Euler equations with the hinge wrenches as Lagrange multipliers (Mufti
1983, Eqs. 2-10, 44-49, Remarks 3-5), and what every solver returns.

Unknowns: per body i the accelerations x_i = (r_i ddot, omega_i dot) (world frame, Eq. 10),
and per joint j the multipliers lambda_j of its constraint rows. With Mufti's sign (hinge
wrench W_j = (f_j, g_j) acts with + on the parent j+ and with - on the child j-, Sec. 3) and
Phi(l) = [[E, -[l]x], [0, E]] moving a wrench at the hinge to a body's centre of mass through
its lever arm l (Phi^T (f, g) = (f, g + l x f)):

    M_i x_i = u_i + sum_j c_ij Phi(l_ij)^T W_j,     W_j = Q_j lambda_j - w_j      (Eqs. 4-5)
    Q_j^T (Phi(l_jj) x_j - Phi(l_pj) x_p) = gamma_j                      (Eqs. 8, 48, Remark 5)

M_i = diag(m_i E, I_i) (I_i about the centre of mass, world axes); u_i = (F_i, G_i - omega_i
x I_i omega_i) holds gravity, external wrenches and the gyroscopic term; Q_j (6 x n'_j) spans
the wrenches the joint transmits without doing work (the complement of its motion subspace
S_j: force rows for locked translations, torque rows for locked rotations, Eq. 44 and
Remark 5); w_j = S_j (S_j^T S_j)^-1 tau_j is the actuator wrench on the child (S_j^T w_j =
tau_j). In matrix form this is the symmetric KKT system of Eq. (10)/(49):

    [[M, -G], [-G^T, 0]] (x, lambda) = (u - actuation, gamma),
    G = blocks -Phi(l_jj)^T Q_j (child row), +Phi(l_pj)^T Q_j (parent row).

The constraint rows come from the spatial form a_child - a_parent = S qdd + c (c the
velocity-product acceleration), which Q_j^T annihilates exactly whatever the joint type:
with a_i^o = Phi(l_i) x_i - (omega_i x r_i dot, 0) the spatial acceleration of body i at the
hinge point, gamma_j = Q_j^T (c_j + (omega_j x r_j dot - omega_p x r_p dot, 0)).

Rows of every joint are padded to 6 (3 force, 3 torque): ``active`` says which are real;
padded multipliers are zero.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..dynamics.stabilization import baumgarte
from ..linalg import spd_inverse
from ..model.model import Model
from ..model.tree import take
from .maximal import (
    MaximalState,
    base_or_fixed,
    body_poses,
    gather_dofs,
    joint_frames_on_parents,
    joint_tables,
    neutral_subspaces,
    scatter_dofs,
)


class NewtonEuler(NamedTuple):
    """The terms of Mufti's equations at one maximal state (see the module docstring).

    Body arrays have nb rows; joint arrays have nb rows too (joint j is the joint of body j),
    with ``parent[j] == nb`` for a joint on the base. Row nb of ``x_base`` stands for the
    base, whose accelerations are prescribed. The index tables (NumPy) are static.
    """

    M: jax.Array  # (nb, 6, 6) diag(m E, I), I about the CoM in world axes
    u: jax.Array  # (nb, 6) (F, G - omega x I omega): gravity, external wrench, gyroscopic
    u_total: jax.Array  # (nb, 6) u with the actuator wrenches added
    lever_child: jax.Array  # (nb, 3) l_jj: from the child's CoM to hinge j
    lever_parent: jax.Array  # (nb, 3) l_pj: from the parent's CoM (base origin) to hinge j
    hinge: jax.Array  # (nb, 3) hinge points (child frame origins)
    S: jax.Array  # (nb, w, 6) motion subspace rows at the hinge, world axes, zero padded
    gram_inv: jax.Array  # (nb, w, w) (S S^T)^-1, with 1 on the diagonal of padding rows
    Q: jax.Array  # (nb, 6, 6) constraint wrench columns (3 force, 3 torque), zero padded
    G_child: jax.Array  # (nb, 6, 6) -Phi(l_jj)^T Q_j
    G_parent: jax.Array  # (nb, 6, 6) +Phi(l_pj)^T Q_j
    gamma: jax.Array  # (nb, 6) right-hand side of the constraint rows (base motion included)
    actuation: jax.Array  # (nb, 6) w_j, actuator wrench on the child at the hinge
    c: jax.Array  # (nb, 6) velocity-product acceleration of each joint at its hinge
    stabilization: jax.Array  # (nb, 6) Remark 4's change of gamma, as a relative acceleration
    x_base: jax.Array  # (6,) prescribed (acceleration, angular acceleration) of the base
    v_hinge: jax.Array  # (nb, 6) relative spatial velocity child - parent at the hinge
    xi: jax.Array  # (nb, 6) separation of the hinge points along the locked translations
    active: np.ndarray  # (nb, 6) real constraint rows
    parent: np.ndarray  # (nb,) parent body, nb for the base
    dofs: np.ndarray  # (nb, w) velocity index of each row, nv = pad
    nv: int


class MaximalSolution(eqx.Module):
    """What a maximal-coordinate method solves for.

    - ``r_ddot``, ``omega_dot`` (nb, 3): accelerations of the centres of mass and angular
      accelerations, world frame (Mufti's r ddot and R omega dot).
    - ``f``, ``g`` (nb, 3): hinge force and torque of each joint, about its hinge point (the
      child's frame origin), world axes, with Mufti's sign: they act with + on the parent
      (or the base) and with - on the child. They include the actuator's share.
    - ``g_c`` (nb, 3): the constraint torque g^c = Q lambda (Eq. 53), the part of g that the
      joint's locked rotations transmit (zero for ball joints).
    - ``lam`` (nb, 6): multipliers of each joint's constraint rows (3 force, 3 torque rows;
      zero where a row is not a constraint of that joint type).
    - ``qdd`` (nv,): joint accelerations.
    """

    r_ddot: jax.Array
    omega_dot: jax.Array
    f: jax.Array
    g: jax.Array
    g_c: jax.Array
    lam: jax.Array
    qdd: jax.Array


# --------------------------------------------------------------------------- helpers
def phi_transpose(lever, W):
    """Phi(l)^T W: a wrench (f, g) at the hinge moved to the centre of mass: (f, g + l x f)."""
    return jnp.concatenate([W[..., :3], W[..., 3:] + jnp.cross(lever, W[..., :3])], -1)


def phi(lever, x):
    """Phi(l) x = (r ddot + omega dot x l, omega dot) (the transpose of :func:`phi_transpose`)."""
    return jnp.concatenate([x[..., :3] + jnp.cross(x[..., 3:], lever), x[..., 3:]], -1)


def _blocks(lever, Q):
    """Phi(l)^T Q column by column: (nb, 6, 6)."""
    return jax.vmap(phi_transpose, in_axes=(None, -1), out_axes=-1)(lever, Q)


def _unit(v):
    n2 = jnp.sum(v * v, -1, keepdims=True)
    return v / jnp.sqrt(jnp.where(n2 > 0, n2, 1.0))


def _complement(a1, a2, k, R, a1_world, a2_world):
    """Orthonormal basis (nb, 3, 3) (columns, zero padded) of the complement of the first
    ``k[i]`` (static) of the directions a1, a2 in R^3.

    a1, a2 are given in the child frame, whose orientation is R, and the basis turns with the
    child (then Remark 4's velocity-level stabilisation is exact, see ``newton_euler``); two
    directions (a universal joint: one turns with the parent) are crossed in world axes.
    """
    ks = set(np.asarray(k).tolist())  # static: build only the cases the model has
    cases = {}
    if 0 in ks:
        cases[0] = R
    if 1 in ks:
        # the coordinate axis least aligned with a1, made orthogonal to it, and a1 x that
        e = jax.nn.one_hot(jnp.argmin(jnp.abs(a1), -1), 3, dtype=a1.dtype)
        b1 = _unit(e - jnp.sum(e * a1, -1, keepdims=True) * a1)
        cases[1] = spatial.matmul(R, jnp.stack([b1, jnp.cross(a1, b1), jnp.zeros_like(b1)], -1))
    if 2 in ks:
        cases[2] = jnp.pad(_unit(jnp.cross(a1_world, a2_world))[..., None], ((0, 0), (0, 0), (0, 2)))
    if len(cases) == 1 and ks == set(cases):
        return cases.popitem()[1]
    k = np.asarray(k)[:, None, None]
    out = jnp.zeros_like(R)
    for kk, basis in cases.items():
        out = jnp.where(k == kk, basis, out)
    return out


def _rows(X, idx):
    """Rows idx (nb, k) (static) of X (nb, w, 3): a slice where all joints pick the same rows."""
    if (idx == idx[:1]).all():
        return X[:, idx[0]]
    return jnp.take_along_axis(X, idx[:, :, None], 1)


def _active_rows(n_lin, n_ang):
    cols = np.arange(3)
    return np.concatenate([cols[None] < (3 - n_lin)[:, None], cols[None] < (3 - n_ang)[:, None]], -1)


# ------------------------------------------------------------------------------ the terms
def newton_euler(model: Model, state: MaximalState, tau, f_ext=None, base=None, alpha=0.0, beta=0.0,
                 rotation=None) -> NewtonEuler:
    """Assemble :class:`NewtonEuler` at a maximal state (no input checks).

    ``rotation``: the body orientations (nb, 3, 3) when the caller has them (then the state's
    quaternions are not read).

    ``alpha``, ``beta``: Baumgarte gains of Remark 4 (zero: none): the translational rows
    become xi_ddot + alpha xi_dot + beta xi = 0 with xi the separation of the hinge points
    along the locked directions, the rotational rows v_dot + alpha v = 0 with v the relative
    angular velocity along the locked axes (Remark 4 stabilises Eq. 48 at velocity level).
    """
    topo = model.topology
    nb, dtype = topo.nbodies, state.r.dtype
    base = base_or_fixed(base, dtype)
    w, dofs, pad, lin, n_lin, ang, n_ang, on_parent = joint_tables(model)
    parent = np.asarray([p if p >= 0 else nb for p in topo.parents], dtype=np.int32)
    with_base = lambda x, b: jnp.concatenate([x, b[None]])  # noqa: E731 (row nb: the base)

    # bodies: M_i = diag(m E, I_i), u_i = (F_i, G_i - omega x I omega)   (Eqs. 2-3)
    R, o = body_poses(model, state, rotation)
    inertia = 0.5 * (model.inertia + spatial.transpose(model.inertia))
    I = spatial.matmul(spatial.matmul(R, inertia), spatial.transpose(R))
    eye3 = jnp.eye(3, dtype=dtype)
    zero3 = jnp.zeros((nb, 3, 3), dtype)
    M = jnp.concatenate([
        jnp.concatenate([model.mass[:, None, None] * eye3, zero3], -1),
        jnp.concatenate([zero3, I], -1),
    ], -2)
    F = model.mass[:, None] * model.gravity
    G = -jnp.cross(state.omega, spatial.matvec(I, state.omega))
    if f_ext is not None:
        fw = spatial.matvec(R, f_ext[:, :3])
        F = F + fw
        G = G + spatial.matvec(R, f_ext[:, 3:]) + jnp.cross(o - state.r, fw)  # moment about the CoM
    u = jnp.concatenate([F, G], -1)

    # hinges: lever arms (Fig. 4) and joint frames on the parents
    Rj, hinge_parent = joint_frames_on_parents(model, R, o, base)
    r_ext = with_base(state.r, base.position)
    lever_child = o - state.r

    # motion subspace at the hinge (world axes), constraint wrenches as its complement
    S0 = neutral_subspaces(model, w, dtype)
    if on_parent.any():
        Rrow = jnp.where(on_parent[..., None, None], Rj[:, None], R[:, None])  # (nb, w, 3, 3)
        S = jnp.einsum("nwij,nwkj->nwki", Rrow, S0.reshape(nb, w, 2, 3)).reshape(nb, w, 6)
    else:
        S = jnp.einsum("nij,nwkj->nwki", R, S0.reshape(nb, w, 2, 3)).reshape(nb, w, 6)
    rows = lambda X, idx, part: _rows(X[..., part], idx)  # noqa: E731
    Sl, Sa = rows(S, lin, slice(0, 3)), rows(S, ang, slice(3, 6))
    S0l, S0a = rows(S0, lin, slice(0, 3)), rows(S0, ang, slice(3, 6))
    Ql = _complement(S0l[:, 0], S0l[:, 1], n_lin, R, Sl[:, 0], Sl[:, 1])  # Remark 5
    Qa = _complement(S0a[:, 0], S0a[:, 1], n_ang, R, Sa[:, 0], Sa[:, 1])  # Eq. 44
    z = jnp.zeros_like(Ql)
    Q = jnp.concatenate([jnp.concatenate([Ql, z], -1), jnp.concatenate([z, Qa], -1)], -2)
    # the hinge point as seen from the parent: its joint frame origin, slid along the joint's
    # free translations to the child's origin (they coincide on the constraint manifold);
    # xi, the separation along the locked translations, is Remark 4's position error
    xi_lin = jnp.einsum("nik,ni->nk", Ql, o - hinge_parent)
    lever_parent = o - spatial.matvec(Ql, xi_lin) - take(r_ext, parent)

    # velocities: spatial velocity of each body at its hinges, relative velocity at each joint
    v_body = lambda lever, rd, w_: jnp.concatenate([rd + jnp.cross(w_, lever), w_], -1)  # noqa: E731
    rd_ext = with_base(state.r_dot, base.velocity)
    w_ext = with_base(state.omega, base.omega)
    v_child = v_body(lever_child, state.r_dot, state.omega)
    v_par = v_body(lever_parent, take(rd_ext, parent), take(w_ext, parent))
    vJ = v_child - v_par
    # joint rates qd = (S S^T)^-1 S vJ (exact on the constraint manifold)
    gram_inv = spd_inverse(jnp.einsum("nai,nbi->nab", S, S) + jnp.asarray(np.eye(w)[None] * pad[:, None, :], dtype))
    qd = jnp.einsum("nab,nbi,ni->na", gram_inv, S, vJ)
    # c = v_child x vJ + (rows turning with the parent: d/dt in the child frame = -vJ x s)
    turning = jnp.where(on_parent, qd, 0.0)
    c = spatial.cross_motion(v_child, vJ) - spatial.cross_motion(vJ, jnp.einsum("nw,nwi->ni", turning, S))

    # constraint rows: Q^T (Phi(l_j) x_j - Phi(l_p) x_p) = gamma_j
    x_base = jnp.concatenate([base.acceleration, base.omega_dot])
    on_base = (parent == nb)[:, None]
    shift = jnp.concatenate([jnp.cross(state.omega, state.r_dot)
                             - jnp.cross(take(w_ext, parent), take(rd_ext, parent)), jnp.zeros((nb, 3), dtype)], -1)
    rhs = c + shift
    # joints that lock translation: the hinge points are fixed in both bodies and Eq. (9)'s
    # centripetal terms are the exact second derivative, on the constraint manifold (where
    # they equal the line above) and off it (which keeps Remark 4 exact for Eq. 8)
    centripetal = lambda w_, l: jnp.cross(w_, jnp.cross(w_, l))  # noqa: E731
    locked = centripetal(take(w_ext, parent), lever_parent) - centripetal(state.omega, lever_child)
    rhs = rhs.at[:, :3].set(jnp.where((n_lin == 0)[:, None], locked, rhs[:, :3]))
    rhs = rhs + jnp.where(on_base, phi(lever_parent, jnp.broadcast_to(x_base, (nb, 6))), 0.0)
    gamma0 = jnp.einsum("nik,ni->nk", Q, rhs)
    # Remark 4: xi along the locked translations, v = Q^T vJ along all locked directions
    xi = jnp.concatenate([xi_lin, jnp.zeros((nb, 3), dtype)], -1)
    gamma = baumgarte(gamma0, jnp.einsum("nik,ni->nk", Q, vJ), xi, alpha, beta)

    # actuators: w_j = S^T (S S^T)^-1 tau_j on the child, -w_j on the parent
    tau_rows = gather_dofs(tau, dofs)
    wa = jnp.einsum("nai,nab,nb->ni", S, gram_inv, tau_rows)
    on_parents = jax.ops.segment_sum(phi_transpose(lever_parent, wa), parent, nb + 1)[:nb]
    u_total = u + phi_transpose(lever_child, wa) - on_parents

    return NewtonEuler(
        M=M, u=u, u_total=u_total, lever_child=lever_child, lever_parent=lever_parent, hinge=o, S=S,
        gram_inv=gram_inv, Q=Q, G_child=-_blocks(lever_child, Q), G_parent=_blocks(lever_parent, Q), gamma=gamma,
        actuation=wa, c=c, stabilization=jnp.einsum("nik,nk->ni", Q, gamma - gamma0), x_base=x_base, v_hinge=vJ, xi=xi, active=_active_rows(n_lin, n_ang), parent=parent,
        dofs=dofs, nv=topo.nv,
    )


def solution(ne: NewtonEuler, state: MaximalState, base, x, lam) -> MaximalSolution:
    """:class:`MaximalSolution` from the accelerations x (nb, 6) and multipliers lam (nb, 6)."""
    base = base_or_fixed(base, x.dtype)
    lam = jnp.where(ne.active, lam, 0.0)
    Wc = jnp.einsum("nik,nk->ni", ne.Q, lam)
    W = Wc - ne.actuation
    # qdd: S^T-fit of a_child - a_parent - c at each hinge
    rd = lambda r_dot, omega: jnp.concatenate([jnp.cross(omega, r_dot), jnp.zeros_like(r_dot)], -1)  # noqa: E731
    x_ext = jnp.concatenate([x, ne.x_base[None]])
    r_dot_ext = jnp.concatenate([state.r_dot, base.velocity[None]])
    omega_ext = jnp.concatenate([state.omega, base.omega[None]])
    a_child = phi(ne.lever_child, x) - rd(state.r_dot, state.omega)
    a_parent = phi(ne.lever_parent, take(x_ext, ne.parent)) - rd(take(r_dot_ext, ne.parent), take(omega_ext, ne.parent))
    rel = a_child - a_parent - ne.c
    qdd = jnp.einsum("nab,nbi,ni->na", ne.gram_inv, ne.S, rel)
    return MaximalSolution(x[:, :3], x[:, 3:], W[:, :3], W[:, 3:], Wc[:, 3:], lam, scatter_dofs(qdd, ne.dofs, ne.nv))
