"""Derivatives of inverse and forward dynamics with respect to the state, in Pinocchio's
conventions (``computeRNEADerivatives``, ``computeABADerivatives``), by the analytic recursion
of Carpentier & Mansard, "Analytical derivatives of rigid body dynamics algorithms" (RSS 2018).

Derivatives with respect to q are taken along the tangent space: column j is
d/de f(q (+) e e_j) at e = 0, with (+) :func:`mbjax.integrate` (so a free joint's columns are
body-frame twists, as in Pinocchio). Moving coordinate j along its tangent turns the subtree of
its joint rigidly by the twist S_j (world frame); everything attached to that subtree is carried
along (x -> S_j x x), except that the parent's velocity v_l and acceleration a_l stay put.
With all quantities in world coordinates (RNEA: f_i = I_i a_i + v_i x* I_i v_i - f_ext,i,
F_i the subtree sums, tau_k = S_k . F_k) this gives, for coordinates k, j (Sec. III):

    dV/dq_j = v_l x S_j,   dA/dq_j = a_l x S_j + v_l x dV/dq_j,   dA/dqd_j = dV/dq_j + v_j x S_j
    B_i = v_i x* I_i - I_i v_i x + (u -> u x* h_i),  h_i = I_i v_i   (d f_i along a velocity change)
    Y_k, B_k, F_k: sums of I_i, B_i, f_i over the subtree of body(k)

    body(j) <= body(k):  dtau_k/dq_j  = (Y_k S_k) . dA/dq_j  + (B_k^T S_k) . dV/dq_j
                         dtau_k/dqd_j = (Y_k S_k) . dA/dqd_j + (B_k^T S_k) . S_j
    body(k) <  body(j):  dtau_k/dq_j  = S_k . (S_j x* F_j + Y_j dA/dq_j + B_j dV/dq_j)
                         dtau_k/dqd_j = S_k . (B_j S_j + Y_j dA/dqd_j)

(l: the parent body of joint j, the world with a_0 = -g for a root; "<=": ancestor or same body;
gravity enters as a_0, the external wrenches through f). dtau/dqdd = M. The two passes run
level by level with the states in the last axis (:mod:`.levels`); the entries are then
products of 6-vectors, kept for the pairs of coordinates in ancestor relation (the others are zero).

Forward dynamics follows from inverse dynamics (Sec. IV): differentiating
ID(q, qd, FD(q, qd, tau)) = tau gives

    d qdd / d(q, qd) = -M^-1 d ID / d(q, qd) at qdd = FD(q, qd, tau),   d qdd / d tau = M^-1.

The recursion assumes joint motion subspaces that are constant in the child frame; a model with
a joint whose subspace turns with its own coordinates (``universal``) takes d ID by forward mode
through RNEA instead (all 2 nv unit tangents at once), and M by the CRBA.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..checks import checked
from ..cholesky import cho_inverse, cholesky, spd_solve
from ..compilation import jit
from ..configuration import integrate_from
from ..kinematics import tree_kinematics
from ..model.model import Model
from .articulated import aba_kernel, accelerate, articulated_inertias, unit_accelerations
from .bodies import body_terms, gravity_acceleration
from .crba import cholesky_dynamics, crba_kernel, unpack
from .levels import T, coordinates, cross_force, cross_motion, gather, joints, level_bodies, mv, one_state
from .levels import inertia_matrix, parent_rows, routed, sweep_down, sweep_up, to_parents
from .rnea import body_accelerations, rnea_kernel


def _body_terms(inertia, v, a, p_bias):
    """What each body adds to its subtree's sums: I, the variation V = v x* I - I v x
    (symmetric: with Z = v x* I, V = Z + Z^T), the momentum h = I v and f = I a + p_bias.
    B = V + (u -> u x* h), and that second part is antisymmetric, so sums of V and h carry B."""
    Z = T(cross_force(v[..., None, :, :], inertia))  # row c: v x* (column c of I)
    return inertia, Z + T(Z), mv(inertia, v), mv(inertia, a) + p_bias


def _columns(S, v_parent, a_parent, v, Y, V, h, F):
    """Per coordinate (..., 8, 6, C): S, Y S, B^T S, dV/dq, dA/dq, dA/dqd and the two columns
    S x* F + Y dA/dq + B dV/dq, B S + Y dA/dqd, from the coordinate's S, the velocity and
    acceleration of its joint's parent and child, and the child's subtree sums Y, V, h, F
    (B u = V u + u x* h, B^T u = V u - u x* h)."""
    dV = cross_motion(v_parent, S)
    dA = cross_motion(a_parent, S) + cross_motion(v_parent, dV)
    dAv = dV + cross_motion(v, S)
    VS, Sh = mv(V, S), cross_force(S, h)
    G = cross_force(S, F) + mv(Y, dA) + mv(V, dV) + cross_force(dV, h)
    return jnp.stack((S, mv(Y, S), VS - Sh, dV, dA, dAv, G, VS + Sh + mv(Y, dAv)), -3)


def _coordinate_terms(model: Model, q, qd, f_ext, qdd=None, tau=None):
    """:func:`_columns` of every coordinate (nv, 8, 6, C) for C states in the last axis, level
    by level: accelerations root to leaves, body terms and subtree sums leaves to root. Given
    ``tau`` instead of ``qdd``, the accelerations are the ABA's: its articulated inertias in
    one more pass leaves to root first, on the same body terms, with the unit torques' forces
    for M^-1 (:mod:`.articulated`). Returns the columns and the joint accelerations (nv, C):
    ``qdd`` as given, or the ABA's and M^-1 (nv, nv, C)."""
    sw = model.topology.sweep
    b0, rest = level_bodies(model, joints(model, q, qd, f_ext), qd)
    C, dtype = qd.shape[-1], qd.dtype
    root = sw.root
    n0 = len(root.bodies)
    inverse = tau is not None
    # motion(b, (a', P'), terms): (joint accelerations, rows of M^-1), the bodies' (a, P); P: the
    # unit torques' accelerations, with ``tau`` only
    if not inverse:
        qdd_rows = jnp.pad(qdd, ((0, 1), (0, 0)))
        levels_terms = [seg.dofs for seg in sw.segments]
        root_terms = root.dofs

        def motion(b, parent, dofs):
            return ((), ()), (parent[0] + b.c + mv(T(b.S), gather(qdd_rows, dofs)),)
    else:
        root_terms, levels_terms = articulated_inertias(model, b0, rest, tau, inverse=True)

        def motion(b, parent, terms):
            U, Dinv, u, rows = terms
            qdd_level, a = accelerate(parent[0], b.c, b.S, U, Dinv, u)
            rows, P = unit_accelerations(parent[1], b.S, U, Dinv, rows)
            return (qdd_level, rows), (a, P)

    def backward(b, a, v_parent, a_parent, below):
        own = _body_terms(inertia_matrix(*b.inertia), b.v, a, b.p_bias)
        sums = tuple(x + y for x, y in zip(own, below))
        return sums, _columns(b.S, v_parent[:, None], a_parent[:, None], b.v[:, None], *(x[:, None] for x in sums))

    v_world = jnp.zeros((n0, 6, C), dtype)
    a_world = jnp.broadcast_to(gravity_acceleration(model)[:, None], (n0, 6, C))
    units = (jnp.zeros((n0, model.nv, 6, C), dtype),) if inverse else ()
    (qdd0, rows0), a0 = motion(b0, (a_world,) + units, root_terms)
    zero_sums = lambda n: (jnp.zeros((n, 6, 6, C), dtype),) * 2 + (jnp.zeros((n, 6, C), dtype),) * 2  # noqa: E731
    rest = [b._replace(R=None, p=None) for b in rest]

    def down(prev, b, terms, P):
        v_parent, a_parent = parent_rows(P, prev[0]), tuple(parent_rows(P, x) for x in prev[1:])
        out, a = motion(b, a_parent, terms)
        return (b.v,) + a, ((a[0], v_parent, a_parent[0]), out)

    levels = list(zip(rest, levels_terms))
    accelerations, outs = zip(*sweep_down(model, down, (b0.v,) + a0, levels)) if rest else ((), ())

    def up(below, b, acc, P):
        sums, cols = backward(b, *acc, below)
        return tuple(to_parents(P, x) for x in sums), cols

    below, cols = sweep_up(model, up, zero_sums, list(zip(rest, accelerations)))
    below = below if rest else zero_sums(n0)
    cols = coordinates(model, backward(b0, a0[0], v_world, a_world, below)[1], cols)
    if not inverse:
        return cols, qdd
    qdds, rows = zip(*outs) if rest else ((), ())
    return cols, coordinates(model, qdd0, list(qdds)), coordinates(model, rows0, list(rows))


def _coordinate_terms_one(model: Model, q, qd, qdd, f_ext):
    """:func:`_columns` of every coordinate (nv, 8, 6) for one state, in matrix form (all
    bodies at once, sums over paths and subtrees as products with the ancestor matrix): a
    few large operations instead of two sweeps (the cheaper program for a single state)."""
    topo = model.topology
    one = lambda x: x[..., None]  # noqa: E731  (the batch-minor helpers' layout, C = 1)
    tk = tree_kinematics(model, q)
    t = body_terms(model, tk, q, qd, f_ext)
    a = body_accelerations(model, tk, t.c, qdd)
    own = _body_terms(one(spatial.inertia_matrix(*t.inertia)), one(t.v), one(a), one(t.p))
    A = jnp.asarray(topo.ancestors, qd.dtype)
    sums = [jnp.tensordot(A.T, x, axes=1)[topo.dof_body] for x in own]  # subtree sums at each coordinate
    parent = np.asarray(topo.parents)[topo.dof_body]
    world = jnp.stack([jnp.zeros(6, qd.dtype), gravity_acceleration(model)])  # velocity, acceleration
    v_parent, a_parent = (jnp.concatenate([x, w[None]])[parent] for x, w in zip((t.v, a), world))
    cols = _columns(one(tk.S), one(v_parent), one(a_parent), one(t.v[topo.dof_body]), *sums)
    return cols[..., 0]


def _rnea_derivatives_from(model: Model, cols):
    """(dtau/dq, dtau/dqd, M), each (nv, nv, ...), from the per-coordinate terms (nv, 8, 6, ...):
    products of 6-vectors for every pair of coordinates, kept where the two are in ancestor
    relation (``topology.dof_pairs``): dense products (a batched matrix product each) beat
    gathering the pairs."""
    S, A, Bt, dV, dA, dAv, G, H = jnp.moveaxis(cols, 1, 0)
    below, above = (jnp.asarray(m.reshape(m.shape + (1,) * (cols.ndim - 3)), cols.dtype)
                    for m in model.topology.dof_pairs)
    outer = lambda x, y: jnp.einsum("kx...,jx...->kj...", x, y)  # noqa: E731  (k, j) -> x_k . y_j
    U = jnp.concatenate([A, Bt], 1)
    dq = below * outer(U, jnp.concatenate([dA, dV], 1)) + above * outer(S, G)
    dv = below * outer(U, jnp.concatenate([dAv, S], 1)) + above * outer(S, H)
    M = below * outer(A, S) + above * outer(S, A)
    arm = jnp.diag(model.armature)
    return dq, dv, M + arm.reshape(arm.shape + (1,) * (cols.ndim - 3))


def _state_jacobians(model: Model, q, qd, qdd, f_ext):
    """d ID / d(q tangent) and d ID / d qd, each (nv, nv, C), by ``jax.jvp`` of the RNEA kernel
    along the 2 nv unit tangents (batched with ``jax.vmap``)."""
    nv = model.nv
    eye = jnp.broadcast_to(jnp.eye(nv, dtype=qd.dtype)[..., None], (nv,) + qd.shape)
    zero = jnp.zeros_like(eye)
    tangents = (jnp.concatenate([eye, zero]), jnp.concatenate([zero, eye]))  # (2 nv, nv, C)
    integrate = jax.vmap(lambda q, e: integrate_from(model, q, e), in_axes=(-1, -1), out_axes=-1)

    def f(e, v):
        return rnea_kernel(model, integrate(q, e), v, qdd, f_ext)

    cols = jax.vmap(lambda de, dv: jax.jvp(f, (jnp.zeros_like(qd), qd), (de, dv))[1])(*tangents)
    cols = jnp.moveaxis(cols, 0, 1)  # (nv out, 2 nv tangents, C)
    return cols[:, :nv], cols[:, nv:]


def _rnea_derivatives_kernel(model: Model, q, qd, qdd, f_ext=None):
    """(dtau/dq, dtau/dqd, M), each (nv, nv, C), for C states in the last axis."""
    if model.topology.sweep is None:
        return (jnp.zeros((0, 0) + qdd.shape[1:], qdd.dtype),) * 3
    if model.topology.has_bias:  # d ID by forward mode, and M alone by the CRBA (not the whole recursion)
        return _state_jacobians(model, q, qd, qdd, f_ext) + (unpack(model, crba_kernel(model, q), axis=0),)
    return _rnea_derivatives_from(model, _coordinate_terms(model, q, qd, f_ext, qdd=qdd)[0])


def _rnea_derivatives_one(model: Model, q, qd, qdd, f_ext=None):
    """(dtau/dq, dtau/dqd, M), each (nv, nv), for one state (matrix form)."""
    if model.topology.has_bias or model.topology.sweep is None:
        return one_state(_rnea_derivatives_kernel)(model, q, qd, qdd, f_ext)
    return _rnea_derivatives_from(model, _coordinate_terms_one(model, q, qd, qdd, f_ext))


def forward_derivatives_kernel(model: Model, q, qd, tau, f_ext=None):
    """(qdd, dtau/dq, dtau/dqd, M, M^-1) for C states in the last axis (qdd (nv, C), the others
    (nv, nv, C)): the ABA's accelerations under torques ``tau`` and the derivatives of inverse
    dynamics there, the accelerations and M^-1 inside the derivatives' sweeps (one pass less
    than the ABA's, then :func:`_rnea_derivatives_kernel`, and no factorisation)."""
    if model.topology.sweep is None or model.topology.has_bias:
        qdd = aba_kernel(model, q, qd, tau, f_ext)
        dq, dv, M = _rnea_derivatives_kernel(model, q, qd, qdd, f_ext)
        if model.nv == 0:
            return qdd, dq, dv, M, M
        return qdd, dq, dv, M, jnp.moveaxis(cho_inverse(cholesky(jnp.moveaxis(M, -1, 0))), 0, -1)
    cols, qdd, M_inv = _coordinate_terms(model, q, qd, f_ext, tau=tau)
    return (qdd,) + _rnea_derivatives_from(model, cols) + (M_inv,)


def _aba_derivatives_kernel(model: Model, q, qd, tau, f_ext=None):
    _, dq, dv, _, M_inv = forward_derivatives_kernel(model, q, qd, tau, f_ext)
    return _forward_blocks(dq, dv, jnp.moveaxis(M_inv, -1, 0))


def _aba_derivatives_one(model: Model, q, qd, tau, f_ext=None):
    if model.topology.sweep is None:  # nothing moves
        return (jnp.zeros((0, 0), tau.dtype),) * 3
    qdd, M = cholesky_dynamics(model, q, qd, tau, f_ext)
    dq, dv, _ = _rnea_derivatives_one(model, q, qd, qdd, f_ext)
    return _forward_blocks(dq, dv, M=M)  # M's factor is the accelerations' (one Cholesky)


def _forward_blocks(dq, dv, M_inv=None, M=None):
    """(-M^-1 dID/dq, -M^-1 dID/dqd, M^-1) from dID (nv, nv, ...) and M^-1 (states, if any,
    first): two products (not differentiable, as the batched kernel, whose derivatives are the
    single state's, needs); or, given M (one state), one differentiable solve with the three
    right-hand sides side by side."""
    lead = lambda x: jnp.moveaxis(x, (0, 1), (-2, -1))  # noqa: E731  (..., nv, nv)
    back = lambda x: jnp.moveaxis(x, (-2, -1), (0, 1))  # noqa: E731
    if M is not None:
        n = M.shape[-1]
        X = spd_solve(M, jnp.concatenate([-lead(dq), -lead(dv), jnp.eye(n, dtype=M.dtype)], axis=-1))
        return back(X[..., :n]), back(X[..., n:2 * n]), back(X[..., 2 * n:])
    return -back(M_inv @ lead(dq)), -back(M_inv @ lead(dv)), back(M_inv)


#: one state's derivatives are one function (:mod:`mbjax.fused`, with mbjax's flags) for models
#: with fewer coordinates than this: their (nv, nv) products, XLA's own loops in that function
#: instead of YNNPACK's, cost more than the kernels saved from about nv = 18 (session 39, public
#: ``aba_derivatives``: ur5 22.8 -> 19.0 µs, panda 24.8 -> 22.4, solo12 33.7 -> 48.9)
FUSED_BELOW_NV = 12


#: (dtau/dq, dtau/dqd, M) without input checks (``f_ext`` (nb, 6) or None), each (nv, nv);
#: vmapped, on the level sweeps
state_derivatives = routed(_rnea_derivatives_kernel, _rnea_derivatives_one, derivatives=True)
_aba_derivatives = routed(_aba_derivatives_kernel, _aba_derivatives_one, derivatives=True)


@jit(one_state=True)
def rnea_derivatives(model: Model, q, qd, qdd, f_ext=None):
    """Partial derivatives of inverse dynamics tau = ID(q, qd, qdd, f_ext).

    **Arguments:** ``q`` (nq,), ``qd`` (nv,), ``qdd`` (nv,); ``f_ext`` (nbodies, 6) optional,
    as in :func:`mbjax.rnea`.

    **Returns:** ``(dtau_dq, dtau_dqd, dtau_dqdd)``, each (nv, nv); the q derivative along the
    tangent space, and ``dtau_dqdd = M(q)`` (Pinocchio's ``computeRNEADerivatives``).
    """
    return checked(model, state_derivatives, q, {"qd": qd, "qdd": qdd}, f_ext, fuse_below=FUSED_BELOW_NV)


@jit(one_state=True)
def aba_derivatives(model: Model, q, qd, tau, f_ext=None):
    """Partial derivatives of forward dynamics qdd = FD(q, qd, tau, f_ext).

    **Arguments:** as :func:`mbjax.aba`.

    **Returns:** ``(dqdd_dq, dqdd_dqd, dqdd_dtau)``, each (nv, nv); the q derivative along the
    tangent space, and ``dqdd_dtau = M(q)^-1`` (Pinocchio's ``computeABADerivatives``).
    """
    return checked(model, _aba_derivatives, q, {"qd": qd, "tau": tau}, f_ext, fuse_below=FUSED_BELOW_NV)
