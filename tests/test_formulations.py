"""Mufti's maximal-coordinate formulations (mbjax.formulations) against independent references.

- Accelerations: every method against ``aba`` (fixed base) or against the joint-space
  equations M qdd + h = tau of a bigger model whose root body is driven along the prescribed
  motion (moving base, Remark 3), solved with crba and rnea.
- Body accelerations: against d/dt of ``maximal_state`` along the joint-space motion.
- Hinge forces and torques: against the wrench each joint transmits in RNEA (the sum of the
  bodies' Newton-Euler forces over the joint's subtree, computed here from mbjax's world
  inertias, not from the formulations).
- Gauss's principle (Eq. 39): the accelerations minimise the Gauss function over the motions
  the joints allow, solved here as a small least-squares problem in the null-space form
  (scipy.linalg), which uses no constraint force at all.
- Gradients of every method against finite differences; Baumgarte's Remark 4 on drifted
  states; round trips of maximal_state / joint_state.

Every check runs in float64 at 1e-9 relative (what is left is ~1e-13 rounding); one compiled
program per structure evaluates a batch of models and states.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import mbjax
from mbjax import spatial
from mbjax.dynamics.bodies import body_terms, gravity_acceleration
from mbjax.formulations import (
    MaximalState,
    PrescribedBase,
    constraint_violation,
    joint_state,
    maximal_dynamics,
    maximal_state,
    maximal_state_derivative,
)
from mbjax.kinematics import tree_kinematics
from mbjax.model.model import Model
from mbjax.model.topology import Topology
from random_models import (
    TreeSpec,
    assert_close,
    build_batch,
    build_model,
    flow,
    richardson,
    time_derivative,
    unstack,
)

RTOL = 1e-9
BATCH = 4
ALL = ("kkt", "sparse_kkt", "schur", "barycentric")
TRANSLATING = ("kkt", "sparse_kkt", "schur")  # barycentric needs joints that lock translation


def _spec(n, joints, seed, root_free=False):
    """A random tree of n bodies with joints drawn from ``joints`` (fixed structure per seed)."""
    rng = np.random.default_rng(seed)
    parents = [-1] + [int(rng.integers(max(0, i - 3), i)) for i in range(1, n)]
    types = [str(rng.choice(joints)) for _ in range(n)]
    for k, jt in enumerate(joints):  # every type at least once
        types[1 + k] = jt
    if root_free:
        types[0] = "free"
    return TreeSpec(tuple(parents), tuple(types), (False,) * n, (False,) * n, (), seed)


# ----------------------------------------------------------------------- references
def transmitted_wrenches(model, q, qd, qdd, f_ext):
    """World wrench (force, moment about the origin) that each joint passes from parent to
    child: the subtree sum of I_i a_i + v_i x* I_i v_i - f_ext,i (RNEA's forward and
    backward passes, written out with mbjax's kinematics)."""
    topo = model.topology
    tk = tree_kinematics(model, q)
    t = body_terms(model, tk, q, qd, f_ext)
    A = jnp.asarray(topo.ancestors, qd.dtype)
    a = jnp.asarray(topo.dof_ancestors, qd.dtype) @ (tk.S * qdd[:, None]) + A @ t.c + gravity_acceleration(model)
    return A.T @ (spatial.inertia_apply(*t.inertia, a) + t.p), tk


def mufti_hinge(F, hinge):
    """Mufti's (f, g) (acting + on the parent, about the hinge) from the transmitted wrench F."""
    return -F[:, :3], -(F[:, 3:] - jnp.cross(hinge, F[:, :3]))


def _fixed_base(model, key, qd, tau, f_ext, methods):
    q = mbjax.random_configuration(model, key)
    qdd = mbjax.aba(model, q, qd, tau, f_ext)
    F, tk = transmitted_wrenches(model, q, qd, qdd, f_ext)
    f, g = mufti_hinge(F, tk.p)
    state = maximal_state(model, q, qd)
    rate = time_derivative(lambda t: maximal_state(model, *flow(model, q, qd, qdd)(t)), q.dtype)
    sols = {m: maximal_dynamics(model, state, tau, f_ext, method=m) for m in methods}
    fd = {m: mbjax.forward_dynamics(model, q, qd, tau, f_ext, method=m) for m in methods}
    back = joint_state(model, state)
    return dict(qdd=qdd, f=f, g=g, r_ddot=rate.r_dot, omega_dot=rate.omega, sols=sols, fd=fd,
                dq=mbjax.difference(model, q, back[0]), qd_back=back[1], violation=constraint_violation(model, state))


def _check_solution(sol, o, what):
    assert_close(sol.qdd, o["qdd"], RTOL, what=f"{what}: qdd vs reference")
    assert_close(sol.r_ddot, o["r_ddot"], RTOL, what=f"{what}: r_ddot vs d/dt maximal_state")
    assert_close(sol.omega_dot, o["omega_dot"], RTOL, what=f"{what}: omega_dot vs d/dt maximal_state")
    scale = max(np.max(np.abs(o["f"])), np.max(np.abs(o["g"])))
    assert_close(sol.f, o["f"], RTOL, scale=scale, what=f"{what}: hinge forces vs RNEA")
    assert_close(sol.g, o["g"], RTOL, scale=scale, what=f"{what}: hinge torques vs RNEA")


FIXED_CASES = [
    ("every joint type, free root",
     ("spherical", "universal", "revolute", "continuous", "prismatic", "cylindrical", "planar"), TRANSLATING),
    ("ball-universal-pin", ("spherical", "universal", "revolute", "continuous"), ALL),
]


@pytest.mark.usefixtures("runtime_checks_off")  # dozens of checked calls under one vmap, see conftest
@pytest.mark.parametrize("name,joints,methods", FIXED_CASES, ids=[c[0] for c in FIXED_CASES])
def test_fixed_base_matches_aba_and_rnea(name, joints, methods):
    """qdd == aba, body accelerations == d/dt maximal_state, hinge wrenches == RNEA's, for every
    method, on a batch of random trees (random gravity, torques, external wrenches)."""
    spec = _spec(len(joints) + 2, joints, seed=len(name), root_free=name.endswith("free root"))
    rng = np.random.default_rng(spec.seed)
    g = rng.normal(size=(BATCH, 3))
    g[0] = 0.0
    models = build_batch(spec, BATCH, g)
    m0 = unstack(models, 0)
    qd = rng.normal(size=(BATCH, m0.nv))
    tau = 3.0 * rng.normal(size=(BATCH, m0.nv))
    f_ext = rng.normal(size=(BATCH, m0.nbodies, 6))
    keys = jax.random.split(jax.random.PRNGKey(spec.seed), BATCH)
    # one tree after another (lax.map), not vmapped: vmapped, this program hung in CI runs (all
    # XLA:CPU threads idle), as batched LAPACK calls did elsewhere (benchmarks/README.md, session 15)
    run = jax.jit(lambda *a: jax.lax.map(lambda b: _fixed_base(*b, methods), a))
    out = jax.tree_util.tree_map(np.asarray, run(models, keys, qd, tau, f_ext))
    for k in range(BATCH):
        o = unstack(out, k)
        for m in methods:
            _check_solution(o["sols"][m], o, f"{name}, model {k}, method={m!r}")
            assert_close(o["fd"][m], o["qdd"], RTOL, what=f"forward_dynamics(method={m!r})")
        assert_close(o["dq"], 0 * o["dq"], 1e-12, atol=1e-12, what="joint_state(maximal_state(q)) == q")
        assert_close(o["qd_back"], qd[k], 1e-12, what="joint_state(maximal_state(qd)) == qd")
        assert np.max(o["violation"][0]) < 1e-12 and np.max(o["violation"][1]) < 1e-12 * np.max(np.abs(qd[k]))


@pytest.mark.usefixtures("runtime_checks_off")
def test_sparse_kkt_deep_chain():
    """sparse_kkt and aba down a 64-body chain (24 ball joints, then 40 pins) against crba (a
    Cholesky solve of M): both recursions feed each level's 6 x 6 blocks into the next
    level's, so an error that builds up along them shows in deep chains and not in small
    trees (asymmetric rounding did: to 1e-5 relative here in sparse_kkt, 4e-7 in aba)."""
    n = 64
    joints = ("spherical",) * 24 + ("revolute",) * (n - 24)
    spec = TreeSpec(tuple(range(-1, n - 1)), joints, (False,) * n, (False,) * n, (), 3)
    models = build_batch(spec, 2)
    nv = unstack(models, 0).nv
    rng = np.random.default_rng(3)
    qd, tau = rng.normal(size=(2, nv)), 3.0 * rng.normal(size=(2, nv))
    methods = ("crba", "aba", "sparse_kkt")

    def run(model, key, qd, tau):
        q = mbjax.random_configuration(model, key)
        return [mbjax.forward_dynamics(model, q, qd, tau, method=m) for m in methods]

    ref, *outs = jax.jit(jax.vmap(run))(models, jax.random.split(jax.random.PRNGKey(3), 2), qd, tau)
    for m, out in zip(methods[1:], outs):
        for k in range(2):
            assert_close(out[k], ref[k], RTOL, what=f"{m} vs crba, 64-body chain, model {k}")


# ------------------------------------------------------------------ prescribed moving base
def drop_root(model: Model) -> Model:
    """The tree of ``model`` without body 0 (a free-floating root): its children become roots,
    attached to the frame where body 0 was."""
    topo = model.topology
    keep = [k for k, b in enumerate(topo.frame_bodies) if b != 0]
    sub = Topology(
        name=topo.name + "_on_base", body_names=topo.body_names[1:],
        parents=tuple(p - 1 for p in topo.parents[1:]), joint_names=topo.joint_names[1:],
        joint_types=topo.joint_types[1:], frame_names=tuple(topo.frame_names[k] for k in keep),
        frame_bodies=tuple(topo.frame_bodies[k] - 1 for k in keep),
    )
    nq0, nv0 = topo.joints[0].nq, topo.joints[0].nv
    return Model(
        sub, model.joint_rotation[1:], model.joint_translation[1:], model.joint_axis[1:], model.mass[1:],
        model.com[1:], model.inertia[1:], model.armature[nv0:], model.damping[nv0:], model.stiffness[nv0:],
        model.spring_reference[nq0:], model.lower[nq0:], model.upper[nq0:],
        model.velocity_limit[nv0:], model.effort_limit[nv0:], model.frame_rotation[np.asarray(keep, int)],
        model.frame_translation[np.asarray(keep, int)], model.gravity,
    )


def _moving_base(big, key, qd, qdd_base, tau, f_ext, methods):
    """Body 0 of ``big`` (free joint) is the base, driven with body-frame acceleration qdd_base;
    the rest must move as the joint-space equations of ``big`` say."""
    small = drop_root(big)
    q = mbjax.random_configuration(big, key)
    M = mbjax.crba(big, q)
    h = mbjax.rnea(big, q, qd, jnp.zeros_like(qd), f_ext)  # bias forces, external wrenches included
    qdd_rest = jnp.linalg.solve(M[6:, 6:], tau - h[6:] - M[6:, :6] @ qdd_base)
    qdd = jnp.concatenate([qdd_base, qdd_rest])
    F, tk = transmitted_wrenches(big, q, qd, qdd, f_ext)
    f, g = mufti_hinge(F[1:], tk.p[1:])
    # the base's motion, classical, in the inertial frame
    big_state = maximal_state(big, q, qd)
    R0, p0 = tk.R[0], tk.p[0]
    w0 = big_state.omega[0]
    v0 = spatial.transform_motion(R0, p0, qd[:6])  # spatial, at the origin
    a0 = spatial.transform_motion(R0, p0, qdd_base)
    pdot = v0[:3] + jnp.cross(w0, p0)
    base = PrescribedBase(R0, p0, pdot, w0, a0[:3] + jnp.cross(a0[3:], p0) + jnp.cross(w0, pdot), a0[3:])
    state = maximal_state(small, q[7:], qd[6:], base)
    rate = time_derivative(lambda t: maximal_state(big, *flow(big, q, qd, qdd)(t)), q.dtype)
    sols = {m: maximal_dynamics(small, state, tau, f_ext[1:], base, method=m) for m in methods}
    back = joint_state(small, state, base)
    return dict(qdd=qdd_rest, f=f, g=g, r_ddot=rate.r_dot[1:], omega_dot=rate.omega[1:], sols=sols,
                same_state=jax.tree_util.tree_map(lambda a, b: jnp.max(jnp.abs(a - b[1:])), state, big_state),
                dq=mbjax.difference(small, q[7:], back[0]), qd_back=back[1])


MOVING_CASES = [
    ("ball-universal-pin", ("spherical", "universal", "revolute"), ALL),
    ("with prismatic", ("spherical", "universal", "revolute", "continuous", "prismatic"), TRANSLATING),
]


@pytest.mark.usefixtures("runtime_checks_off")  # dozens of checked calls under one vmap, see conftest
@pytest.mark.parametrize("name,joints,methods", MOVING_CASES, ids=[c[0] for c in MOVING_CASES])
def test_moving_base_matches_joint_space(name, joints, methods):
    """Remark 3: a tree on a base moving along a prescribed trajectory (position, velocity,
    acceleration), against M qdd + h = tau of the model with the base as a free root body."""
    spec = _spec(len(joints) + 2, joints, seed=100 + len(name), root_free=True)
    rng = np.random.default_rng(spec.seed)
    models = build_batch(spec, BATCH, rng.normal(size=(BATCH, 3)))
    m0 = unstack(models, 0)
    qd = rng.normal(size=(BATCH, m0.nv))
    qdd_base = 2.0 * rng.normal(size=(BATCH, 6))
    tau = 3.0 * rng.normal(size=(BATCH, m0.nv - 6))
    f_ext = rng.normal(size=(BATCH, m0.nbodies, 6))
    keys = jax.random.split(jax.random.PRNGKey(spec.seed), BATCH)
    run = jax.jit(jax.vmap(lambda *a: _moving_base(*a, methods)))
    out = jax.tree_util.tree_map(np.asarray, run(models, keys, qd, qdd_base, tau, f_ext))
    for k in range(BATCH):
        o = unstack(out, k)
        assert max(jax.tree_util.tree_leaves(o["same_state"])) < 1e-12, "maximal_state with a base"
        for m in methods:
            _check_solution(o["sols"][m], o, f"moving base, {name}, model {k}, method={m!r}")
        assert_close(o["dq"], 0 * o["dq"], 1e-12, atol=1e-12, what="joint_state with a base")
        assert_close(o["qd_back"], qd[k, 6:], 1e-12, what="joint_state with a base: qd")


# ----------------------------------------------------------------- Gauss's principle
def test_gauss_principle():
    """Eq. (39): the accelerations minimise the Gauss function
    sum_i 1/2 |x_i - M_i^-1 u_i|^2_{M_i} - tau . qdd over the accelerations the joints allow,
    x = J qdd + b (J, b: derivatives of maximal_state along the motion). The minimiser is found
    by scipy.linalg on the null-space form (no multipliers, nothing from the formulations)."""
    spec = _spec(7, ("spherical", "universal", "revolute"), seed=7)
    model = build_model(spec, gravity=(0.3, -1.0, -9.81))
    rng = np.random.default_rng(3)
    q = mbjax.random_configuration(model, jax.random.PRNGKey(3))
    qd, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)

    @jax.jit
    def evaluate(q, qd, tau):
        def body_acc(qdd):
            rate = time_derivative(lambda t: maximal_state(model, *flow(model, q, qd, qdd)(t)), q.dtype)
            return jnp.concatenate([rate.r_dot, rate.omega], -1).reshape(-1)

        z = jnp.zeros(model.nv)
        state = maximal_state(model, q, qd)
        return body_acc(z), jax.jacfwd(body_acc)(z), state, {m: maximal_dynamics(model, state, tau, method=m) for m in ALL}

    b, J, state, sols = jax.tree_util.tree_map(np.asarray, evaluate(q, qd, tau))
    R = np.asarray(state.rotation)
    I = np.einsum("nij,njk,nlk->nil", R, np.asarray(model.inertia), R)
    m = np.asarray(model.mass)
    w = np.asarray(state.omega)
    u = np.concatenate([m[:, None] * np.asarray(model.gravity), -np.cross(w, np.einsum("nij,nj->ni", I, w))], -1)
    Mb = scipy.linalg.block_diag(*[scipy.linalg.block_diag(mi * np.eye(3), Ii) for mi, Ii in zip(m, I)])
    # d/d qdd of the Gauss function = J^T M (J qdd + b) - J^T u - tau = 0
    qdd_gauss = scipy.linalg.solve(J.T @ Mb @ J, J.T @ (u.reshape(-1) - Mb @ b) + tau, assume_a="pos")
    gauss = lambda x: 0.5 * (x - np.linalg.solve(Mb, u.reshape(-1))) @ Mb @ (x - np.linalg.solve(Mb, u.reshape(-1)))  # noqa: E731
    for method in ALL:
        sol = sols[method]
        assert_close(sol.qdd, qdd_gauss, RTOL, what=f"Gauss minimiser vs method={method!r}")
        x = np.concatenate([sol.r_ddot, sol.omega_dot], -1).reshape(-1)
        assert_close(x, J @ qdd_gauss + b, RTOL, what=f"body accelerations, method={method!r}")
        # and it is a minimum: any allowed change raises the Gauss function
        for dq in rng.normal(size=(3, model.nv)):
            dx = J @ (1e-3 * dq)
            assert gauss(x + dx) - tau @ (sol.qdd + 1e-3 * dq) > gauss(x) - tau @ sol.qdd


# ------------------------------------------------------------------------ gradients
def test_gradients_match_finite_differences():
    """Derivatives (forward mode) of w . qdd with respect to (q tangent, qd, tau, body masses), for
    every method, along random directions, against Richardson-extrapolated central differences
    (truncation O(h^4) ~ 1e-12, rounding ~ eps / h ~ 1e-13: 1e-7 leaves a wide margin).
    kkt, sparse_kkt and schur on a tree with prismatic, universal and pin joints, barycentric on
    one with ball, universal and pin joints."""
    cases = [(TRANSLATING, build_model(_spec(3, ("prismatic", "universal"), seed=11))),
             (("barycentric",), build_model(_spec(3, ("spherical", "universal"), seed=12)))]
    rng = np.random.default_rng(5)
    inputs = []
    for _, model in cases:
        q = mbjax.random_configuration(model, jax.random.PRNGKey(5))
        args = (jnp.zeros(model.nv), jnp.asarray(rng.normal(size=model.nv)), jnp.asarray(rng.normal(size=model.nv)),
                jnp.zeros(model.nbodies))
        flat, unravel = jax.flatten_util.ravel_pytree(args)
        inputs.append((q, flat, unravel, jnp.asarray(rng.normal(size=model.nv)), jnp.asarray(rng.normal(size=(2, flat.size)))))

    def scalar(model, q, weights, method, dq, qd, tau, dmass):
        m = eqx.tree_at(lambda m: m.mass, model, model.mass + dmass)
        return weights @ mbjax.forward_dynamics(m, mbjax.integrate(model, q, dq), qd, tau, method=method)

    @jax.jit
    def evaluate(xs):
        out = []
        for (methods, model), (q, _, unravel, weights, directions), x in zip(cases, inputs, xs):
            f = lambda y: jnp.stack([scalar(model, q, weights, m, *unravel(y)) for m in methods])  # noqa: E731,B023
            grads = jax.vmap(lambda e: jax.jvp(f, (x,), (e,))[1], out_axes=1)(directions)  # noqa: B023
            d = lambda s: jax.vmap(lambda e: (f(x + s * e) - f(x - s * e)) / (2 * s))(directions)  # noqa: E731,B023
            out.append((grads, richardson(d(1e-3), d(2e-3))))
        return out

    for (methods, _), (grads, fd) in zip(cases, evaluate([i[1] for i in inputs])):
        for k, m in enumerate(methods):
            assert_close(grads[k], fd[:, k], 1e-7, what=f"gradient of method={m!r} vs finite differences")


# ----------------------------------------------------------------- Baumgarte (Remark 4)
def test_baumgarte_on_drifted_state():
    """Off the constraint manifold, the stabilised accelerations make the hinge separation xi of
    ball joints obey xi_ddot + alpha xi_dot + beta xi = 0 (Remark 4), for every method."""
    spec = _spec(5, ("spherical",), seed=21)
    model = build_model(spec)
    rng = np.random.default_rng(1)
    q = mbjax.random_configuration(model, jax.random.PRNGKey(1))
    state = maximal_state(model, q, jnp.asarray(rng.normal(size=model.nv)))
    drift = lambda x: x + 1e-2 * rng.normal(size=x.shape)  # noqa: E731
    state = MaximalState(drift(state.r), state.quat, drift(state.r_dot), drift(state.omega))
    tau = jnp.asarray(rng.normal(size=model.nv))
    alpha, beta = mbjax.constraints.critical(0.05)
    parents = np.asarray(model.parents)

    def separation(s):  # hinge on the child - hinge on the parent, and its rate
        R = s.rotation
        o = s.r - jnp.einsum("nij,nj->ni", R, model.com)
        Rp = jnp.concatenate([R, jnp.eye(3)[None]])[parents]
        op = jnp.concatenate([o, jnp.zeros((1, 3))])[parents]
        return o - (op + jnp.einsum("nij,nj->ni", Rp, model.joint_translation))

    @jax.jit
    def evaluate(state):
        out = {}
        for method in ALL:
            rhs = lambda s: maximal_state_derivative(model, s, tau, method=method, alpha=alpha, beta=beta)  # noqa: E731
            xi, xi_dot = jax.jvp(separation, (state,), (rhs(state),))
            xi_ddot = jax.jvp(lambda s: jax.jvp(separation, (s,), (rhs(s),))[1], (state,), (rhs(state),))[1]
            out[method] = (xi, xi_dot, xi_ddot)
        return out

    for method, (xi, xi_dot, xi_ddot) in evaluate(state).items():
        assert np.max(np.abs(xi)) > 1e-3  # really drifted
        assert_close(xi_ddot, -alpha * xi_dot - beta * xi, RTOL, what=f"Remark 4, method={method!r}")


# ----------------------------------------------------------------------------- errors
def test_errors():
    model = build_model(_spec(3, ("prismatic", "revolute"), seed=1))
    q, z = mbjax.neutral(model), jnp.zeros(model.nv)
    with pytest.raises(ValueError, match="barycentric"):
        mbjax.forward_dynamics(model, q, z, z, method="barycentric")
    with pytest.raises(ValueError, match="unknown method"):
        mbjax.forward_dynamics(model, q, z, z, method="lagrange")
    with pytest.raises(Exception, match="armature"):
        mbjax.forward_dynamics(eqx.tree_at(lambda m: m.armature, model, model.armature + 0.1), q, z, z, method="kkt").block_until_ready()
    with pytest.raises(ValueError, match="MaximalState.r"):
        s = maximal_state(model, q, z)
        maximal_dynamics(model, MaximalState(s.r[:2], s.quat, s.r_dot, s.omega), z)
