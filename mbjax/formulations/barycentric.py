"""Augmented bodies and barycentres (Mufti Eqs. 26-38), and the joint-angle form for universal
and pin joints (Eqs. 58-61): the translational constraints and the hinge forces are
eliminated analytically, and a 3n x 3n positive definite system in the angular accelerations
is solved by Cholesky.

When every hinge locks translation (ball, universal and pin joints; a free root), the centre
of mass of each body is a sum of body-fixed vectors along its path from the root's inbound
point: r_i = r_in + sum_k d_ik, with d_ik the vector on body k from its inbound hinge to the
hinge leading to i (to C_i when k = i). Differentiating twice,

    r_ddot = D~^T omega_dot + r^,  r^_i = a_in + sum_k omega_k x (omega_k x d_ik),

with D~^T_ik = -[d_ik]x. For a free-floating subtree the root's own acceleration is replaced
by that of the subtree's centre of mass (Eq. 26): the columns are projected with
mu = E - 1 m^T / m_total, which moves each d_ik to the barycentre of body k (D = -L T_2 mu).
For a subtree hanging from a prescribed base (Remark 3, B = T), mu = E and a_in is the
acceleration of the hinge point on the base. Substituting into the Newton-Euler equations and
projecting out the hinge forces leaves (Eqs. 28-29, 38)

    K omega_dot = u_bar,  K = I + D~ M D~^T,  u_bar = D~ (F - M r^) + G - omega x I omega + C g,

K positive definite (the augmented bodies' inertias, Eqs. 30-35). Universal and pin joints
lock some rotations: then omega = omega_base + T_2^T P gamma_dot (Eq. 60, the relative rates
gamma along the joint axes P), omega_dot = W gamma_ddot + w0, and (Eq. 61)

    (W^T K W) gamma_ddot = W^T (u_bar - K w0),

again positive definite and solved by Cholesky. The hinge forces and torques follow from
the bodies' Newton-Euler residuals summed over each joint's subtree.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..model.model import Model
from .kkt import block_diagonal
from .maximal import JOINT_ROWS, MaximalState
from .newton_euler import NewtonEuler


def _structure(model: Model):
    """Static tables: next_child[i, k] (child of k on the path to i, nb elsewhere), the root
    of each body, which roots are free, and the joint rotation columns."""
    topo = model.topology
    nb = topo.nbodies
    for name, jt, p in zip(model.joint_names, model.joint_types, model.parents):
        if JOINT_ROWS[jt][0] and not (p < 0 and jt == "free"):
            raise ValueError(
                f"method='barycentric' needs hinges that lock translation (ball, universal, pin "
                f"joints, and a free root joint); joint {name!r} is {jt!r}. Use method='kkt', "
                "'sparse_kkt' or 'schur' for it"
            )
    next_child = np.full((nb, nb), nb, dtype=np.int32)
    root = np.zeros(nb, dtype=np.int32)
    for i in range(nb):
        c, k = i, topo.parents[i]
        while k >= 0:
            next_child[i, k] = c
            c, k = k, topo.parents[k]
        root[i] = c
    free = np.asarray([model.joint_types[root[i]] == "free" for i in range(nb)])
    cols = [(j, r) for j, jt in enumerate(model.joint_types) for r in JOINT_ROWS[jt][1]]
    locked_rotation = any(len(JOINT_ROWS[jt][1]) < 3 for jt in model.joint_types)
    return next_child, root, free, cols, locked_rotation


def solve_barycentric(model: Model, ne: NewtonEuler, state: MaximalState, base):
    """Accelerations x (nb, 6) and multipliers lambda (nb, 6) by Eqs. (26)-(38), (58)-(61)."""
    topo = model.topology
    nb, dtype = topo.nbodies, ne.M.dtype
    next_child, root, free, cols, locked_rotation = _structure(model)
    A = jnp.asarray(topo.ancestors, dtype)  # A[i, k] = 1: k on the path to i (-T_2^T, Eq. 25)
    m = model.mass
    u_lin, u_ang = ne.u_total[:, :3], ne.u_total[:, 3:]

    # d_ik: from the inbound hinge of k (its CoM for a free root) to the hinge leading to i
    lever_in = jnp.where(free[:, None] & (root == np.arange(nb))[:, None], 0.0, ne.lever_child)
    lever_out = jnp.concatenate([ne.lever_parent, jnp.zeros((1, 3), dtype)])
    d = (jnp.take(lever_out, next_child, axis=0, mode="clip") - lever_in[None]) * A[..., None]
    Dt = -jnp.transpose(spatial.skew(d), (0, 2, 1, 3))  # (i, a, k, b): D~^T
    w = state.omega
    wwd = jnp.cross(w[None], jnp.cross(w[None], d))  # omega_k x (omega_k x d_ik)
    l0 = ne.lever_parent[root]
    a_in = base.acceleration + jnp.cross(base.omega_dot, l0) + jnp.cross(base.omega, jnp.cross(base.omega, l0))
    # (plus Remark 4's stabilisation of every hinge on the path, zero unless alpha, beta > 0)
    r_hat = jnp.sum(wwd, 1) + jnp.where(free[:, None], 0.0, a_in) + A @ ne.stabilization[:, :3]

    # barycentric projection mu (Eq. 26) on free-floating subtrees
    same = jnp.asarray((root[:, None] == root[None, :]) & free[:, None], dtype)
    m_sub = same @ m
    to_com = same / jnp.where(free, m_sub, 1.0)[:, None]  # a_c = sum over the subtree of F / m
    mu = jnp.eye(nb, dtype=dtype) - to_com * m[None, :]
    Dt = jnp.einsum("il,lakb->iakb", mu, Dt)
    r_hat = mu @ r_hat + to_com @ u_lin

    # K omega_dot = u_bar   (Eqs. 28-29, 38)
    Dm = Dt.reshape(3 * nb, 3 * nb)
    K = block_diagonal(ne.M[:, 3:, 3:]) + Dm.T @ (jnp.repeat(m, 3)[:, None] * Dm)
    u_bar = Dm.T @ (u_lin - m[:, None] * r_hat).reshape(-1) + u_ang.reshape(-1)
    if locked_rotation:  # joint-angle form, Eqs. (58)-(61)
        jc, rc = np.asarray([c[0] for c in cols]), np.asarray([c[1] for c in cols])
        P = ne.S[jc, rc, 3:]  # (ncols, 3): rotation axes, world
        Wm = (A[:, jc][:, None, :] * P.T[None]).reshape(3 * nb, -1)
        w0 = (base.omega_dot + A @ (ne.c[:, 3:] + ne.stabilization[:, 3:])).reshape(-1)
        chol = jax.scipy.linalg.cho_factor(Wm.T @ K @ Wm)
        omega_dot = Wm @ jax.scipy.linalg.cho_solve(chol, Wm.T @ (u_bar - K @ w0)) + w0
    else:
        omega_dot = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(K), u_bar)
    r_ddot = (Dm @ omega_dot).reshape(nb, 3) + r_hat
    x = jnp.concatenate([r_ddot, omega_dot.reshape(nb, 3)], -1)

    # hinge wrenches: each subtree's Newton-Euler residuals, summed about its hinge
    rho = jnp.einsum("nij,nj->ni", ne.M, x) - ne.u
    rho_o = jnp.concatenate([rho[:, :3], rho[:, 3:] + jnp.cross(state.r, rho[:, :3])], -1)
    F = A.T @ rho_o
    W = -jnp.concatenate([F[:, :3], F[:, 3:] - jnp.cross(ne.hinge, F[:, :3])], -1)
    lam = jnp.einsum("nik,ni->nk", ne.Q, W + ne.actuation)
    return x, lam
