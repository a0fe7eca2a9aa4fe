"""The batch-minor kernels behind ``jax.vmap`` of aba, rnea and crba (mbjax/dynamics/levels.py).

A vmap over states runs the level sweeps with the states in the last axis, in chunks (padded
to a whole number of chunks); crba's computes only the structurally nonzero entries of M, so
its comparison with the full matrix also checks the zeros. These tests check that path against the *matrix forms* of the
same quantities (``rnea_from`` and ``mass_matrix_from``: ancestor-matrix products, no level
sweep) on a tree with every joint type, armature and external wrenches; with chunk sizes that
leave a partial chunk; with arguments shared across the batch; nested vmaps and a vmap over
models; and their derivatives against finite differences. Pinocchio checks the same path on
its robots in test_pinocchio.py (its evaluation is vmapped over states).
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax
from mbjax.dynamics import levels
from mbjax.dynamics.crba import mass_matrix_from
from mbjax.dynamics.rnea import rnea_from
from mbjax.kinematics import tree_kinematics
from hypothesis import given
from random_models import TreeSpec, build_model, hypothesis_settings, random_configurations, tree_specs

# every joint type, a free root, branches of unequal depth (padded levels), armature on some joints
SPEC = TreeSpec(
    parents=(-1, 0, 1, 1, 0, 4, 5, 2, 3),
    joints=("free", "revolute", "spherical", "universal", "cylindrical", "planar", "prismatic", "continuous",
            "revolute"),
    armature=(False, True, False, True, False, False, True, True, False),
    limited=(False,) * 9,
    frames=(),
    seed=3,
)
B = 37  # with chunks of 8: four full chunks and a padded one


@pytest.fixture(scope="module")
def model():
    return build_model(SPEC)


@pytest.fixture(scope="module")
def states(model):
    rng = np.random.default_rng(0)
    q = random_configurations(model, jax.random.PRNGKey(1), B)
    qd, x = (jnp.asarray(rng.normal(size=(B, model.nv))) for _ in range(2))
    f_ext = jnp.asarray(rng.normal(size=(B, model.nbodies, 6)))
    return q, qd, x, f_ext


@pytest.fixture
def small_chunks(batching):
    """The level sweeps for any batch (the small ones the tests use fall back to a vmap of the
    one-state function otherwise), in chunks of 8 states."""
    with batching(CHUNK=8, DERIVATIVE_CHUNK=8, MIN_BATCH=1, SWEEP_BODIES=0):
        yield


def _reference(model, q, qd, x, f_ext):
    """Matrix forms at one state: tau = rnea(q, qd, x), M, and qdd = M^-1 (x - h)."""
    tk = tree_kinematics(model, q)
    M = mass_matrix_from(model, tk)
    h = rnea_from(model, tk, q, qd, jnp.zeros_like(qd), f_ext)
    return rnea_from(model, tk, q, qd, x, f_ext), M, jnp.linalg.solve(M, x - h)


def test_vmapped_kernels_match_matrix_forms(model, states, small_chunks):
    q, qd, x, f_ext = states
    tau_ref, M_ref, qdd_ref = jax.vmap(_reference, in_axes=(None, 0, 0, 0, 0))(model, q, qd, x, f_ext)
    batched = lambda f, *axes: jax.jit(jax.vmap(f, in_axes=(None,) + axes))  # noqa: E731
    tau = batched(mbjax.rnea, 0, 0, 0, 0)(model, q, qd, x, f_ext)
    M = batched(mbjax.crba, 0)(model, q)
    qdd = batched(mbjax.aba, 0, 0, 0, 0)(model, q, qd, x, f_ext)
    np.testing.assert_allclose(tau, tau_ref, rtol=0, atol=1e-11 * np.abs(tau_ref).max())
    np.testing.assert_allclose(M, M_ref, rtol=0, atol=1e-12 * np.abs(M_ref).max())
    np.testing.assert_allclose(qdd, qdd_ref, rtol=0, atol=1e-10 * np.abs(qdd_ref).max())
    # the chunked path and the one-state path agree to rounding
    one = jax.jit(lambda q, qd, x, f: mbjax.aba(model, q, qd, x, f))(q[B - 1], qd[B - 1], x[B - 1], f_ext[B - 1])
    np.testing.assert_allclose(one, qdd[B - 1], rtol=0, atol=1e-12 * np.abs(qdd_ref).max())


def test_shared_arguments_nested_vmap_and_model_batch(model, states, small_chunks):
    q, qd, x, _ = states
    ref = jax.vmap(lambda q: _reference(model, q, qd[0], x[0], None)[2])(q)
    # qd and tau shared by the whole batch (broadcast inside the rule)
    shared = jax.jit(jax.vmap(mbjax.aba, in_axes=(None, 0, None, None)))(model, q, qd[0], x[0])
    np.testing.assert_allclose(shared, ref, rtol=0, atol=1e-10 * np.abs(ref).max())
    # a vmap inside a vmap: (4, 9) states
    nested = jax.jit(jax.vmap(jax.vmap(mbjax.aba, in_axes=(None, 0, None, None)), in_axes=(None, 0, None, None)))
    out = nested(model, q[:36].reshape(4, 9, -1), qd[0], x[0])
    np.testing.assert_allclose(out.reshape(36, -1), ref[:36], rtol=0, atol=1e-10 * np.abs(ref).max())
    # a vmap over models (the gravity of each) falls back to the one-state kernel
    g = jnp.stack([model.gravity, 2.0 * model.gravity])
    models = jax.vmap(lambda g: eqx.tree_at(lambda m: m.gravity, model, g))(g)
    out = jax.jit(jax.vmap(mbjax.rnea, in_axes=(0, None, None, None)))(models, q[0], qd[0], x[0])
    for k in range(2):
        other = jax.tree_util.tree_map(lambda a: a[k], models)
        np.testing.assert_allclose(out[k], _reference(other, q[0], qd[0], x[0], None)[0], rtol=0, atol=1e-11)


def test_derivatives_through_the_batched_path(model, states, small_chunks):
    """Reverse mode (the custom vmap is no obstacle to jax.grad), forward mode under vmap,
    and both with respect to the model, against central differences."""
    q, qd, x, f_ext = states
    n = 11

    def loss(model, qd):
        qdd = jax.vmap(mbjax.aba, in_axes=(None, 0, 0, 0, 0))(model, q[:n], qd, x[:n], f_ext[:n])
        tau = jax.vmap(mbjax.rnea, in_axes=(None, 0, 0, 0))(model, q[:n], qd, x[:n])
        M = jax.vmap(mbjax.crba, in_axes=(None, 0))(model, q[:n])
        return jnp.sum(jnp.sin(qdd)) + jnp.sum(jnp.cos(tau)) + jnp.sum(M**2)

    # the differences take their values from the gradient's program: no second compilation
    value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    value = lambda m, v: value_and_grad(m, v)[0]  # noqa: E731
    g_model, g_qd = value_and_grad(model, qd[:n])[1]
    h = 1e-6
    direction = jnp.asarray(np.random.default_rng(2).normal(size=qd[:n].shape))
    fd = (value(model, qd[:n] + h * direction) - value(model, qd[:n] - h * direction)) / (2 * h)
    # central differences with h = 1e-6: truncation O(h^2) and rounding O(eps / h) ~ 1e-10 relative
    np.testing.assert_allclose(jnp.vdot(g_qd, direction), fd, rtol=1e-7)
    dm = 1e-6 * jnp.ones_like(model.mass)
    bump = lambda s: eqx.tree_at(lambda m: m.mass, model, model.mass + s * dm)  # noqa: E731
    fd = (value(bump(1.0), qd[:n]) - value(bump(-1.0), qd[:n])) / 2.0
    np.testing.assert_allclose(jnp.vdot(g_model.mass, dm), fd, rtol=1e-6)
    # forward mode under vmap: per-state Jacobians of aba with respect to qd
    jacobians = jax.jit(jax.vmap(jax.jacfwd(mbjax.aba, argnums=2), in_axes=(None, 0, 0, 0)))
    jac = jacobians(model, q[:n], qd[:n], x[:n])
    k = 5
    e = jnp.zeros(model.nv).at[3].set(1e-6)
    fd = (mbjax.aba(model, q[k], qd[k] + e, x[k]) - mbjax.aba(model, q[k], qd[k] - e, x[k])) / 2e-6
    np.testing.assert_allclose(jac[k][:, 3], fd, rtol=0, atol=1e-7 * np.abs(fd).max())


def test_second_derivatives_through_the_batched_path(small_chunks):
    """jax.vmap(jax.hessian(...)) through aba (its derivative rule differentiated again; it hung
    in session 43, docs/errors.md) against JAX's Hessians of the matrix form (qdd = M^-1 (x -
    h) by a dense solve) and against central differences of the gradient. A tree without
    universal joints: the analytic rule (the forward-mode one compiles for a minute here)."""
    model = build_model(dataclasses.replace(SPEC, parents=(-1, 0, 1, 1, 0), joints=(
        "free", "revolute", "spherical", "prismatic", "revolute"), armature=(False, True, False, False, True),
        limited=(False,) * 5))
    rng = np.random.default_rng(5)
    q = random_configurations(model, jax.random.PRNGKey(2), B)
    qd, x = (jnp.asarray(rng.normal(size=(B, model.nv))) for _ in range(2))
    f_ext = jnp.asarray(rng.normal(size=(B, model.nbodies, 6)))

    def loss(forward):
        return lambda q, v, u, f: jnp.sum(jnp.sin(forward(q, v, u, f)))

    mbjax_loss = loss(lambda *s: mbjax.aba(model, *s))
    hessians = jax.jit(jax.vmap(jax.hessian(mbjax_loss, argnums=(1, 2))))(q, qd, x, f_ext)
    reference = jax.jit(jax.vmap(jax.hessian(loss(lambda *s: _reference(model, *s)[2]), argnums=(1, 2))))(q, qd, x, f_ext)
    # two exact computations (level sweeps, matrix form): rounding, amplified by two solves with M
    for a, b in zip(jax.tree_util.tree_leaves(hessians), jax.tree_util.tree_leaves(reference)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9 * np.abs(b).max())
    k, h = 4, 1e-6
    e = jnp.zeros(model.nv).at[2].set(h)
    grad = jax.jit(jax.grad(mbjax_loss, argnums=(1, 2)))
    fd = [(p - m) / (2 * h) for p, m in zip(grad(q[k], qd[k] + e, x[k], f_ext[k]), grad(q[k], qd[k] - e, x[k], f_ext[k]))]
    # central differences with h = 1e-6 of a gradient: truncation O(h^2), rounding O(eps / h) ~ 1e-10
    # of the gradient's scale, which the Hessian's columns can be small against
    for H, d in zip((hessians[0][0][k], hessians[1][0][k]), fd):  # d/dqd_2 of the gradient's two parts
        np.testing.assert_allclose(H[:, 2], d, rtol=0, atol=1e-6 * np.abs(d).max())


def test_float32_batch(model, states):
    q, qd, x, _ = states
    m32 = model.astype(jnp.float32)
    out = jax.jit(jax.vmap(mbjax.aba, in_axes=(None, 0, 0, 0)))(m32, *(a.astype(jnp.float32) for a in (q, qd, x)))
    ref = jax.vmap(lambda q, qd, x: _reference(model, q, qd, x, None)[2])(q, qd, x)
    assert out.dtype == jnp.float32
    # float32 keeps ~7 digits; a 9-body tree with a free root loses about two more to conditioning
    np.testing.assert_allclose(out, ref, rtol=0, atol=2e-4 * np.abs(ref).max())


@pytest.mark.parametrize("universal", [False, True], ids=["analytic", "universal-forward-mode"])
def test_state_derivatives(model, states, small_chunks, universal):
    """aba_derivatives / rnea_derivatives, single (matrix form) and vmapped (level sweeps), and
    jax.jacfwd of aba (its custom_jvp uses the same recursion) against jax.jacfwd through the
    matrix forms (autodiff of rnea_from and of M^-1 (tau - h): no custom rule). A universal
    joint (motion subspace turning with its own coordinate) takes the forward-mode path."""
    if not universal:  # a cylindrical joint in its place: the same nq and nv, so the same states
        model = build_model(dataclasses.replace(SPEC, joints=tuple(
            "cylindrical" if j == "universal" else j for j in SPEC.joints)))
    q, qd, x, f_ext = states
    n = 9

    def by_jacfwd(q, qd, x, f):
        """The Jacobians of tau and of qdd (each a tuple: by q, qd and x), one program for both."""
        def g(e, v, a):
            tau, _, qdd = _reference(model, mbjax.integrate(model, q, e), v, a, f)
            return tau, qdd
        return jax.jacfwd(g, argnums=(0, 1, 2))(jnp.zeros(model.nv), qd, x)

    def aba_jacfwd(q, qd, x, f):
        g = lambda e, v, a: mbjax.aba(model, mbjax.integrate(model, q, e), v, a, f)  # noqa: E731
        return jax.jacfwd(g, argnums=(0, 1, 2))(jnp.zeros(model.nv), qd, x)

    args = (q[:n], qd[:n], x[:n], f_ext[:n])
    rnea_ref, aba_ref = jax.jit(jax.vmap(by_jacfwd))(*args)
    for fn, ref in ((mbjax.aba_derivatives, aba_ref), (mbjax.rnea_derivatives, rnea_ref)):
        batched = jax.jit(jax.vmap(fn, in_axes=(None, 0, 0, 0, 0)))(model, *args)
        single = jax.jit(fn)(model, *(a[0] for a in args))
        outs = (batched, single) + ((jax.jit(jax.vmap(aba_jacfwd))(*args),) if ref is aba_ref else ())
        for k in range(3):
            scale = np.abs(ref[k]).max()
            np.testing.assert_allclose(batched[k], ref[k], rtol=0, atol=1e-10 * scale)
            np.testing.assert_allclose(single[k], ref[k][0], rtol=0, atol=1e-10 * scale)
            if len(outs) == 3:
                np.testing.assert_allclose(outs[2][k], ref[k], rtol=0, atol=1e-10 * scale)


def test_deep_chain_of_ball_joints(small_chunks):
    """The level sweeps down a 64-body chain (24 ball joints, then 40 pins) against the matrix
    forms: the ABA feeds each level's articulated inertia into its parent's, so an error that
    builds up level by level shows in deep chains and not in small trees (4e-12 relative here)."""
    n = 64
    joints = ("spherical",) * 24 + ("revolute",) * (n - 24)
    model = build_model(TreeSpec(tuple(range(-1, n - 1)), joints, (False,) * n, (False,) * n, (), 3))
    rng = np.random.default_rng(3)
    q = random_configurations(model, jax.random.PRNGKey(4), 11)
    qd, x = (jnp.asarray(rng.normal(size=(11, model.nv))) for _ in range(2))
    qdd = jax.jit(jax.vmap(mbjax.aba, in_axes=(None, 0, 0, 0)))(model, q, qd, x)
    ref = jax.jit(jax.vmap(lambda *a: _reference(model, *a, None)[2]))(q, qd, x)
    # M of a 64-body chain has condition numbers ~1e6: 1e-9 relative leaves room for its rounding
    np.testing.assert_allclose(qdd, ref, rtol=0, atol=1e-9 * np.abs(ref).max())


@hypothesis_settings(2)
@given(tree_specs(min_bodies=8, max_bodies=30, all_joint_types=True))
def test_random_trees_through_the_sweeps(small_chunks, spec):
    """aba, rnea and crba vmapped over states (the level sweeps: runs of levels with their own
    widths, bodies in their parents' slots where they can be) against the matrix forms, on
    random trees (several roots, branches at any depth, every joint type)."""
    model = build_model(spec)
    rng = np.random.default_rng(spec.seed % 2**31)
    n = 11
    q = random_configurations(model, jax.random.PRNGKey(spec.seed % 2**31), n)
    qd, x = (jnp.asarray(rng.normal(size=(n, model.nv))) for _ in range(2))
    f_ext = jnp.asarray(rng.normal(size=(n, model.nbodies, 6)))

    def run(q, qd, x, f):
        return (mbjax.aba(model, q, qd, x, f), mbjax.rnea(model, q, qd, x, f), mbjax.crba(model, q)), \
            tuple(_reference(model, q, qd, x, f)[i] for i in (2, 0, 1))

    (qdd, tau, M), (qdd_ref, tau_ref, M_ref) = jax.jit(jax.vmap(run))(q, qd, x, f_ext)
    # qdd: the ABA against a Cholesky solve, which differ by up to cond(M) eps (cond(M) ~1e4 here)
    for out, ref, tol in ((tau, tau_ref, 1e-12), (M, M_ref, 1e-12), (qdd, qdd_ref, 1e-10)):
        np.testing.assert_allclose(out, ref, rtol=0, atol=tol * np.abs(ref).max())


def test_small_batches_fall_back_to_one_state(model, states, batching):
    """Below ``levels.min_batch`` states a vmap runs the one-state functions (matrix forms),
    vmapped: the same values as the level sweeps to rounding. (Here with the threshold at
    ``levels.MIN_BATCH`` whatever the model's size.)"""
    q, qd, x, f_ext = states
    n = levels.MIN_BATCH - 1
    args = (q[:n], qd[:n], x[:n], f_ext[:n])

    def run():
        batched = lambda f, *axes: jax.jit(jax.vmap(f, in_axes=(None,) + axes))(model, *args[:len(axes)])  # noqa: E731
        return (batched(mbjax.aba, 0, 0, 0, 0), batched(mbjax.rnea, 0, 0, 0, 0), batched(mbjax.crba, 0),
                batched(mbjax.aba_derivatives, 0, 0, 0, 0))

    def chunked():  # whether the batched aba runs the level sweeps' chunks (a loop) or not
        return "while" in jax.jit(jax.vmap(mbjax.aba, in_axes=(None, 0, 0, 0))).lower(model, *args[:3]).as_text()

    def nested(shape):  # vmaps within a vmap: the states of all of them are one batch
        m = int(np.prod(shape))
        return jax.jit(jax.vmap(jax.vmap(mbjax.aba, in_axes=(None, 0, 0, 0)), in_axes=(None, 0, 0, 0)))(
            model, *(a[:m].reshape(shape + a.shape[1:]) for a in (q, qd, x))).reshape(m, -1)

    with batching(SWEEP_BODIES=0):
        assert not chunked()
        fallback = run() + (nested((3, 5)), nested((4, 5)))
    with batching(SWEEP_BODIES=0, MIN_BATCH=1):
        assert chunked()
        sweeps = run() + (nested((3, 5)),)
    for a, b in zip(jax.tree_util.tree_leaves(fallback), jax.tree_util.tree_leaves(sweeps)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-11 * np.abs(b).max())
    # (4, 5) states are 20: the level sweeps, the same values as one by one
    ref = jax.vmap(lambda *a: _reference(model, *a, None)[2])(q[:20], qd[:20], x[:20])
    np.testing.assert_allclose(fallback[-1], ref, rtol=0, atol=1e-10 * np.abs(ref).max())


def test_state_derivatives_match_pinocchio(small_chunks):
    """Pinocchio's computeABADerivatives / computeRNEADerivatives on a floating-base robot
    (its q derivative along the tangent space, free-flyer twists in the body frame)."""
    pin = pytest.importorskip("pinocchio", reason="Pinocchio (pip install pin, in the test extra) is the reference")
    name = "solo12"
    model = mbjax.load_example_robot(name, joint_order="pinocchio")
    pm = pin.buildModelFromUrdf(str(mbjax.example_robot_path(name)), pin.JointModelFreeFlyer())
    pd = pm.createData()
    n = 5
    rng = np.random.default_rng(4)
    q = random_configurations(model, jax.random.PRNGKey(5), n)
    qd, x = (jnp.asarray(rng.normal(size=(n, model.nv))) for _ in range(2))
    qp = mbjax.to_pinocchio_configuration(model, np.asarray(q))
    fd = jax.jit(jax.vmap(mbjax.aba_derivatives, in_axes=(None, 0, 0, 0)))(model, q, qd, x)
    id_ = jax.jit(jax.vmap(mbjax.rnea_derivatives, in_axes=(None, 0, 0, 0)))(model, q, qd, x)
    sym = lambda A: np.triu(A) + np.triu(A, 1).T  # noqa: E731  (Pinocchio fills the upper triangle)
    for i in range(n):
        pin.computeABADerivatives(pm, pd, qp[i], np.asarray(qd[i]), np.asarray(x[i]))
        ref = (pd.ddq_dq, pd.ddq_dv, sym(pd.Minv))
        for k in range(3):
            np.testing.assert_allclose(fd[k][i], ref[k], rtol=0, atol=1e-10 * np.abs(ref[k]).max())
        pin.computeRNEADerivatives(pm, pd, qp[i], np.asarray(qd[i]), np.asarray(x[i]))
        ref = (pd.dtau_dq, pd.dtau_dv, sym(pd.M))
        for k in range(3):
            np.testing.assert_allclose(id_[k][i], ref[k], rtol=0, atol=1e-11 * np.abs(ref[k]).max())
