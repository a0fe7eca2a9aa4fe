"""Physics identities on random kinematic trees (see random_models.py), in float64.

Each Hypothesis example draws a tree *structure*; one compiled function then evaluates
BATCH models of that structure (different axes, placements, inertias, gravity), each at its
own random state. Compiling costs seconds per structure on a CPU (about 2 s per joint type
present, for the dynamics below), so the identities that share a compiled function are
checked together in one test, each by a named helper whose failure message says which
identity broke, and the example counts are small (see ``hypothesis_settings``).

Tolerances: the identities are exact in real arithmetic, so they are checked to 1e-9
relative to the size of the quantities compared (what float64 rounding leaves is ~1e-13 for
these trees, whose mass matrices have condition numbers up to ~1e5); only the
finite-difference checks of frame velocities have their own, derived bound (FD_TOL).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import mbjax
from random_models import (
    assert_close,
    build_batch,
    flow,
    hypothesis_settings,
    is_floating_base,
    richardson,
    time_derivative,
    tree_specs,
    unstack,
)

BATCH = 8  # models (and states) per drawn structure
RTOL = 1e-9
FD_TOL = 1e-9  # finite differences of frame poses, see test_frame_jacobians
REFERENCES = ("world", "local", "local_world_aligned")


def _gravities(rng, batch):
    """Random gravity vectors (|g| = 9.81, any direction), every second one (from the
    first) zero."""
    g = rng.normal(size=(batch, 3))
    g *= 9.81 / np.linalg.norm(g, axis=-1, keepdims=True)
    g[0::2] = 0.0
    return g


def _keys(spec):
    return jax.random.split(jax.random.PRNGKey(spec.seed % 2**31), BATCH)


def _to_numpy(tree):
    return jax.tree_util.tree_map(np.asarray, tree)


def _vee(W):
    """Axial vector of the skew part of W (..., 3, 3)."""
    A = 0.5 * (W - np.swapaxes(W, -1, -2))
    return np.stack([A[..., 2, 1], A[..., 0, 2], A[..., 1, 0]], -1)


# ------------------------------------------------------------------ dynamics identities
def _dynamics(model, key, qd, tau, qdd, f_ext):
    """Everything the dynamics identities compare, for one model at a random state."""
    q = mbjax.random_configuration(model, key)
    zero = jnp.zeros_like(qd)
    acc = mbjax.aba(model, q, qd, tau)
    acc_f = mbjax.aba(model, q, qd, tau, f_ext)
    motion = flow(model, q, qd, acc)

    def along(t):  # quantities whose rates along the motion are checked
        q_t, qd_t = motion(t)
        return dict(T=mbjax.kinetic_energy(model, q_t, qd_t), V=mbjax.potential_energy(model, q_t),
                    com=mbjax.center_of_mass(model, q_t))

    return dict(
        M=mbjax.crba(model, q),
        acc=acc,
        tau_back=mbjax.rnea(model, q, qd, acc),
        acc_f=acc_f,
        tau_back_f=mbjax.rnea(model, q, qd, acc_f, f_ext),
        fd_aba=mbjax.forward_dynamics(model, q, qd, tau, method="aba"),
        fd_crba=mbjax.forward_dynamics(model, q, qd, tau, method="crba"),
        fd_crba_f=mbjax.forward_dynamics(model, q, qd, tau, f_ext, method="crba"),
        rnea=mbjax.rnea(model, q, qd, qdd),
        nle=mbjax.nonlinear_effects(model, q, qd),
        gravity=mbjax.generalized_gravity(model, q),
        rnea_static=mbjax.rnea(model, q, zero, zero),
        T=mbjax.kinetic_energy(model, q, qd),
        rate=time_derivative(along, q.dtype),
        h_world=mbjax.momentum(model, q, qd, about="world"),
        h_com=mbjax.momentum(model, q, qd, about="com"),
        A_G=mbjax.centroidal_momentum_matrix(model, q),
        com=mbjax.center_of_mass(model, q),
        J_com=mbjax.center_of_mass_jacobian(model, q),
    )


_evaluate_dynamics = jax.jit(jax.vmap(_dynamics))


def _check_mass_matrix(o):
    M = o["M"]
    assert_close(M, M.T, RTOL, what="M symmetric")
    eig = np.linalg.eigvalsh(M)
    assert eig[0] > 0, f"M is not positive definite: eigenvalues {eig}"


def _check_inverse_dynamics(o, tau, f_ext):
    # rnea(aba(tau)) == tau, up to the rounding of the terms that cancel in rnea
    scale = np.max(np.abs(tau)) + np.max(np.abs(o["nle"]))
    assert_close(o["tau_back"], tau, RTOL, scale=scale, what="rnea(q, qd, aba(q, qd, tau))")
    assert_close(o["tau_back_f"], tau, RTOL, scale=scale + np.max(np.abs(f_ext)),
                 what="rnea(q, qd, aba(q, qd, tau, f_ext), f_ext)")


def _check_forward_dynamics(o):
    assert_close(o["fd_crba"], o["fd_aba"], RTOL, what="forward_dynamics: method='crba' vs method='aba'")
    assert_close(o["fd_aba"], o["acc"], RTOL, what="forward_dynamics(method='aba') vs aba")
    assert_close(o["fd_crba_f"], o["acc_f"], RTOL, what="forward_dynamics(f_ext, method='crba') vs aba(f_ext)")


def _check_equation_of_motion(o, qd, qdd):
    # rnea(q, qd, qdd) == M qdd + h(q, qd); g(q) == rnea(q, 0, 0); T == qd^T M qd / 2
    Mqdd = o["M"] @ qdd
    assert_close(o["rnea"], Mqdd + o["nle"], RTOL, scale=np.max(np.abs(Mqdd)) + np.max(np.abs(o["nle"])),
                 what="rnea == M qdd + nonlinear_effects")
    assert_close(o["gravity"], o["rnea_static"], RTOL, what="generalized_gravity == rnea(q, 0, 0)")
    assert_close(o["T"], 0.5 * qd @ o["M"] @ qd, RTOL, what="kinetic_energy == qd^T M qd / 2")


def _check_energy_balance(o, qd, tau, gravity_off):
    # power of the joint torques: d(T + V)/dt == qd . tau (V == 0 without gravity)
    dT, dV = o["rate"]["T"], o["rate"]["V"]
    power = qd @ tau
    scale = np.max(np.abs(qd * tau)) + abs(dT) + abs(dV)
    assert_close(dT + dV, power, RTOL, scale=scale, what="d(T + V)/dt == qd . tau")
    if gravity_off:
        assert dV == 0.0, f"dV/dt = {dV} without gravity"
        assert_close(dT, power, RTOL, scale=scale, what="dT/dt == qd . tau (no gravity)")


def _check_momentum(o, qd, total_mass):
    h, hG, c, dcom = o["h_world"], o["h_com"], o["com"], o["rate"]["com"]
    scale = np.max(np.abs(h)) + np.max(np.abs(hG))
    assert_close(hG[:3], h[:3], RTOL, scale=scale, what="linear momentum: about the CoM vs the origin")
    assert_close(hG[3:], h[3:] - np.cross(c, h[:3]), RTOL, scale=scale,
                 what="angular momentum about the CoM == about the origin - c x l")
    assert_close(o["A_G"] @ qd, hG, RTOL, scale=scale,
                 what="centroidal_momentum_matrix @ qd == momentum(about='com')")
    assert_close(o["J_com"] @ qd, dcom, RTOL, what="center_of_mass_jacobian @ qd == d/dt center_of_mass")
    assert_close(h[:3], total_mass * dcom, RTOL, what="linear momentum == total mass * d/dt center_of_mass")


@hypothesis_settings(2)
@given(tree_specs(min_bodies=8, max_bodies=30, all_joint_types=True))
def test_dynamics_identities(spec):
    """M SPD; rnea inverts aba (with and without f_ext); forward dynamics by crba == by aba;
    rnea == M qdd + h; g == rnea(q, 0, 0); T == qd^T M qd / 2; energy balance with and
    without gravity; momentum about the origin vs the CoM; CoM Jacobian vs d/dt CoM.
    Every tree has every joint type."""
    rng = np.random.default_rng(spec.seed)
    gravities = _gravities(rng, BATCH)
    models = build_batch(spec, BATCH, gravities)
    nv, nb = unstack(models, 0).nv, unstack(models, 0).nbodies
    qd = rng.normal(size=(BATCH, nv))
    tau = 5.0 * rng.normal(size=(BATCH, nv))
    qdd = rng.normal(size=(BATCH, nv))
    f_ext = rng.normal(size=(BATCH, nb, 6))
    out = _to_numpy(_evaluate_dynamics(models, _keys(spec), qd, tau, qdd, f_ext))
    for k in range(BATCH):
        o = unstack(out, k)
        _check_mass_matrix(o)
        _check_inverse_dynamics(o, tau[k], f_ext[k])
        _check_forward_dynamics(o)
        _check_equation_of_motion(o, qd[k], qdd[k])
        _check_energy_balance(o, qd[k], tau[k], gravity_off=not np.any(gravities[k]))
        _check_momentum(o, qd[k], np.sum(models.mass[k]))


# ------------------------------------------------------- floating base: momentum balance
def _floating(model, key, qd, f_ext):
    """Momentum and its rate of change along the free motion (tau = 0) under f_ext."""
    q = mbjax.random_configuration(model, key)
    acc = mbjax.aba(model, q, qd, jnp.zeros_like(qd), f_ext)
    motion = flow(model, q, qd, acc)
    R, p = mbjax.forward_kinematics(model, q)
    return dict(
        h=mbjax.momentum(model, q, qd),
        dh=time_derivative(lambda t: mbjax.momentum(model, *motion(t)), q.dtype),
        R=R, p=p, com=mbjax.center_of_mass(model, q),
    )


_evaluate_floating = jax.jit(jax.vmap(_floating))


@hypothesis_settings(2)
@given(tree_specs(max_bodies=30, floating=True, armature=False))
def test_floating_base_momentum_balance(spec):
    """With the world attached by one free joint and tau = 0, the spatial momentum about the
    world origin changes at the rate of the external wrench: gravity (m g, c x m g) plus the
    f_ext on the bodies. The first model has neither and conserves its momentum.

    Without armature: armature is rotor inertia on the mass matrix's diagonal with no
    momentum of its own, so it exchanges momentum with the bodies (not a physical system)."""
    rng = np.random.default_rng(spec.seed)
    gravities = _gravities(rng, BATCH)  # the first one is zero
    models = build_batch(spec, BATCH, gravities)
    assert is_floating_base(unstack(models, 0))
    nv, nb = unstack(models, 0).nv, unstack(models, 0).nbodies
    qd = rng.normal(size=(BATCH, nv))
    f_ext = rng.normal(size=(BATCH, nb, 6))
    f_ext[0] = 0.0
    o = _to_numpy(_evaluate_floating(models, _keys(spec), qd, f_ext))
    # body-frame wrenches (force, moment about the body origin) -> world frame, about the origin
    force = np.einsum("...ij,...j->...i", o["R"], f_ext[..., :3])
    moment = np.einsum("...ij,...j->...i", o["R"], f_ext[..., 3:]) + np.cross(o["p"], force)
    weight = np.sum(models.mass, axis=-1)[:, None] * gravities
    expected = np.concatenate([force.sum(-2) + weight, moment.sum(-2) + np.cross(o["com"], weight)], -1)
    assert not np.any(expected[0])
    for k in range(BATCH):
        # dh/dt sums terms of the size of |h| |v| (velocity products) and of the wrenches
        scale = np.max(np.abs(o["h"][k])) * (1.0 + np.max(np.abs(qd[k]))) + np.max(np.abs(expected[k]))
        what = "d/dt momentum == external wrench" if k else "momentum conservation"
        assert_close(o["dh"][k], expected[k], RTOL, scale=scale, what=what)


# ---------------------------------------------------------------------- frame Jacobians
H = 1e-5  # finite-difference step along q (+) t qd


def _frames(model, key, qd, frames):
    """Jacobians of ``frames`` in every reference; the poses of all frames at q and at
    q (+) t qd for t = +-H, +-2H, and their exact rate along q (+) t qd."""
    q = mbjax.random_configuration(model, key)

    def along(t):
        return mbjax.frame_placements(model, mbjax.integrate(model, q, t * qd))

    return dict(
        J={ref: jnp.stack([mbjax.frame_jacobian(model, q, f, ref) for f in frames]) for ref in REFERENCES},
        v={ref: jnp.stack([mbjax.frame_velocity(model, q, qd, f, ref) for f in frames]) for ref in REFERENCES},
        pose=along(0.0),
        steps=jax.vmap(along)(jnp.array([H, -H, 2 * H, -2 * H], q.dtype)),
        d_pose=time_derivative(along, q.dtype),
    )


@functools.partial(jax.jit, static_argnames="frames")
def _evaluate_frames(models, keys, qd, frames):
    return jax.vmap(functools.partial(_frames, frames=frames))(models, keys, qd)


def _velocities(R, p, p_dot, omega):
    """Velocities in each reference of frames with poses (R, p) (..., 3, 3), (..., 3) whose
    origins move with p_dot and which turn with omega (world axes)."""
    Rt = np.swapaxes(R, -1, -2)
    return {
        "local_world_aligned": np.concatenate([p_dot, omega], -1),
        # velocity of the body point at the world origin
        "world": np.concatenate([p_dot - np.cross(omega, p), omega], -1),
        "local": np.concatenate([np.einsum("...ij,...j->...i", Rt, p_dot),
                                 np.einsum("...ij,...j->...i", Rt, omega)], -1),
    }


@hypothesis_settings(2)
@given(tree_specs(max_bodies=30), st.data())
def test_frame_jacobians(spec, data):
    """frame_jacobian(q, f, ref) @ qd is the velocity of frame f moving along q (+) t qd, in
    all three references: exactly (jax.jvp of frame_placements) and by central differences;
    frame_velocity == frame_jacobian @ qd."""
    models = build_batch(spec, BATCH)
    model = unstack(models, 0)
    frames = tuple(data.draw(st.lists(st.integers(0, model.nframes - 1), min_size=1, max_size=4, unique=True),
                             label="frames"))
    qd = np.random.default_rng(spec.seed).normal(size=(BATCH, model.nv))
    o = _to_numpy(_evaluate_frames(models, _keys(spec), qd, frames))
    idx = list(frames)
    R, p = o["pose"][0][:, idx], o["pose"][1][:, idx]

    # exact: (dR/dt R^T, dp/dt) from forward-mode differentiation of the poses
    dR, dp = o["d_pose"][0][:, idx], o["d_pose"][1][:, idx]
    exact = _velocities(R, p, dp, _vee(dR @ np.swapaxes(R, -1, -2)))

    # central differences with steps h = H, 2H: p_dot = (p(h) - p(-h)) / 2h, and omega from
    # R(h) R(-h)^T = exp(2h [omega] + O(h^3)), whose skew part's axial vector is
    # 2h omega + O(h^3); both O(h^2) errors cancel in the Richardson extrapolation
    Rs, ps = o["steps"][0][:, :, idx], o["steps"][1][:, :, idx]  # (BATCH, step, frame, ...)

    def central(i, h):  # steps i (at +h) and i + 1 (at -h)
        omega = _vee(Rs[:, i] @ np.swapaxes(Rs[:, i + 1], -1, -2)) / (2 * h)
        return (ps[:, i] - ps[:, i + 1]) / (2 * h), omega

    (v1, w1), (v2, w2) = central(0, H), central(2, 2 * H)
    fd = _velocities(R, p, richardson(v1, v2), richardson(w1, w2))

    for ref in REFERENCES:
        Jqd = np.einsum("bfij,bj->bfi", o["J"][ref], qd)
        assert_close(o["v"][ref], Jqd, RTOL, what=f"frame_velocity == J qd ({ref})")
        assert_close(Jqd, exact[ref], RTOL, what=f"J qd == d/dt frame pose, exact ({ref})")
        # after Richardson extrapolation the truncation error is O(H^4) (negligible) and the
        # rounding is ~eps |p| / H ~ 1e-10 for positions up to ~5 m, i.e. ~1e-11 relative to
        # velocities of order 1-10 (worst seen: 3e-11); FD_TOL = 1e-9 leaves a margin of ~30x
        assert_close(Jqd, fd[ref], FD_TOL, atol=FD_TOL,
                     what=f"J qd == d/dt frame pose, central differences ({ref})")
