"""The free-floating formulation of Wilde et al. 2018 (mbjax.formulations.free_floating), in float64.

Checked against things independent of it: Pinocchio's mass matrix and centroidal momentum
mapped to the paper's coordinates by a map built here from Pinocchio's kinematics; mbjax's
aba (a different algorithm) with equivalent joint-space forces; frame velocities from the
joint-space Jacobian; momentum conservation; finite differences.
"""

from __future__ import annotations

import importlib.util

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given

import mbjax
from mbjax.formulations import free_floating as ff
from random_models import (
    assert_close,
    build_batch,
    hypothesis_settings,
    richardson,
    tree_specs,
    unstack,
)

HAS_PIN = importlib.util.find_spec("pinocchio") is not None
RTOL = 1e-10
BATCH = 6


def _skew(v):
    return np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])


def _velocity_map(R0, c0, nv):
    """A with xd = A qd: V_0 = R_0 (v_b + w_b x c_0), w_0 = R_0 w_b (built here, in NumPy)."""
    A = np.eye(nv)
    A[:3, :3] = R0
    A[:3, 3:6] = -R0 @ _skew(c0)
    A[3:6, 3:6] = R0
    return A


def _random_state(model, seed):
    rng = np.random.default_rng(seed)
    q = np.asarray(mbjax.random_configuration(model, jax.random.PRNGKey(seed)))
    return q, rng.normal(size=model.nv), rng.normal(size=model.nv - 6), rng


# ------------------------------------------------------------ random free-floating trees
@pytest.mark.usefixtures("runtime_checks_off")  # many checked calls under one vmap, see conftest
@given(spec=tree_specs(min_bodies=2, max_bodies=12, floating=True, max_joint_types=3))
@hypothesis_settings(max_examples=2)
def test_random_trees_momentum_form(spec):
    """On random free-floating trees: Eq. (24) is A^-T M A^-1, the momentum form's
    accelerations are aba's, and (P, L_g) is the centroidal momentum."""
    models = build_batch(spec, BATCH, gravity=(0.4, -1.0, -9.81))
    model0 = unstack(models, 0)
    rng = np.random.default_rng(spec.seed)
    qs = jax.vmap(lambda k: mbjax.random_configuration(model0, k))(jax.random.split(jax.random.PRNGKey(1), BATCH))
    qds = rng.normal(size=(BATCH, model0.nv))
    taus = rng.normal(size=(BATCH, model0.nv))
    fext = rng.normal(size=(BATCH, model0.nbodies, 6))

    @jax.jit
    @jax.vmap
    def evaluate(model, q, qd, tau, f):
        R, _ = mbjax.forward_kinematics(model, q)
        return dict(
            R0=R[0],
            M=mbjax.crba(model, q),
            H=ff.floating_inertia(model, q).matrix,
            xd=ff.to_floating(model, q, qd),
            qdd_aba=mbjax.aba(model, q, qd, tau, f),
            qdd_mom=mbjax.forward_dynamics(model, q, qd, tau, f, method="momentum"),
            h_com=mbjax.momentum(model, q, qd, about="com"),
            PL=jnp.concatenate(ff.floating_momentum(model, q, ff.to_floating(model, q, qd), about="com")),
        )

    out = jax.tree_util.tree_map(np.asarray, evaluate(models, qs, qds, taus, fext))
    for k in range(BATCH):
        A = _velocity_map(out["R0"][k], np.asarray(models.com)[k, 0], model0.nv)
        A_inv = np.linalg.inv(A)
        assert_close(out["H"][k], A_inv.T @ out["M"][k] @ A_inv, RTOL, what="Eq. (24) vs A^-T M A^-1")
        assert_close(out["xd"][k], A @ qds[k], RTOL, what="to_floating")
        assert_close(out["qdd_mom"][k], out["qdd_aba"][k], RTOL, what="momentum form vs aba")
        assert_close(out["PL"][k], out["h_com"][k], RTOL, what="(P, L_g) vs centroidal momentum")


# ------------------------------------------------------------------- the space robot
@pytest.fixture(scope="module")
def space_robot():
    return mbjax.load_bundled("space_robot")


@pytest.mark.skipif(not HAS_PIN, reason="Pinocchio (pip install pin, in the test extra) is the reference")
def test_space_robot_against_pinocchio(space_robot):
    """Eq. (24) equals Pinocchio's CRBA mapped to (V_0, w_0, phid); P and L_g equal
    Pinocchio's centroidal momentum; L (world) and L_0 (base CoM) follow Eq. (17)."""
    import pinocchio as pin

    model = space_robot
    pm = pin.buildModelFromUrdf(str(mbjax.bundled_model_path("space_robot")), pin.JointModelFreeFlyer())
    pd = pm.createData()
    for seed in range(3):
        q, qd, _, _ = _random_state(model, seed)
        qp = mbjax.to_pinocchio_configuration(model, q)
        M = pin.crba(pm, pd, qp)
        M = np.triu(M) + np.triu(M, 1).T
        pin.forwardKinematics(pm, pd, qp)
        R0, p0 = pd.oMi[1].rotation, pd.oMi[1].translation
        A = _velocity_map(R0, pm.inertias[1].lever, model.nv)
        A_inv = np.linalg.inv(A)
        H = ff.floating_inertia(model, q)
        assert_close(H.matrix, A_inv.T @ M @ A_inv, RTOL, what="Eq. (24) vs Pinocchio")
        assert_close(H.generalized, H.Hm - H.H0m.T @ np.linalg.solve(H.H0, H.H0m), RTOL, what="H*")

        xd = A @ qd
        hg = pin.computeCentroidalMomentum(pm, pd, qp, qd)
        P, L_g = ff.floating_momentum(model, q, xd, about="com")
        assert_close(np.concatenate([P, L_g]), hg.vector, RTOL, what="(P, L_g) vs Pinocchio")
        c = pin.centerOfMass(pm, pd, qp)
        r0 = R0 @ pm.inertias[1].lever + p0
        _, L = ff.floating_momentum(model, q, xd, about="world")
        _, L_0 = ff.floating_momentum(model, q, xd, about="base")
        assert_close(L, hg.angular + np.cross(c, hg.linear), RTOL, what="L about the world origin")
        assert_close(L_0, hg.angular + np.cross(c - r0, hg.linear), RTOL, what="L_0 about the base CoM")


@pytest.mark.parametrize("name, frame", [("space_robot", "tool"), ("quadruped", "FL_FOOT")])
def test_jacobians_and_generalized_jacobian(name, frame):
    """Eq. (5) reproduces the frame velocity; J* phid (+ drift) is the frame velocity of a
    free-floating robot with zero (or any) momentum; the reaction null space leaves w_0 = 0."""
    model = mbjax.load_bundled(name)
    n = model.nv - 6
    for seed in range(2):
        q, qd, phid, _ = _random_state(model, seed)
        xd = np.asarray(ff.to_floating(model, q, qd))
        v_frame = np.asarray(mbjax.frame_velocity(model, q, qd, frame))
        J_s, J_m = ff.floating_jacobians(model, q, frame)
        assert_close(J_s @ xd[:6] + J_m @ xd[6:], v_frame, RTOL, what="Eq. (5)")

        # the base velocity that gives zero momentum, from the joint-space momentum matrix
        A_G = np.asarray(mbjax.centroidal_momentum_matrix(model, q))
        qd0 = np.concatenate([np.linalg.solve(A_G[:, :6], -A_G[:, 6:] @ phid), phid])
        assert_close(ff.base_velocity(model, q, phid), ff.to_floating(model, q, qd0)[:6], RTOL,
                     what="base velocity at zero momentum")
        gj = ff.generalized_jacobian(model, q, frame)
        assert_close(gj.J @ phid, mbjax.frame_velocity(model, q, qd0, frame), RTOL, what="J* (zero momentum)")
        assert np.all(np.asarray(gj.drift) == 0.0)

        P, L_0 = ff.floating_momentum(model, q, xd, about="base")
        assert_close(ff.base_velocity(model, q, xd[6:], np.concatenate([P, L_0])), xd[:6], RTOL,
                     what="base velocity from the momentum")
        gj = ff.generalized_jacobian(model, q, frame, base_momentum=np.concatenate([P, L_0]))
        assert_close(gj.J @ xd[6:] + gj.drift, v_frame, RTOL, what="J* + drift (any momentum)")

        N = np.asarray(ff.reaction_null_space(model, q))
        assert N.shape == (n, n - 3)
        assert_close(N.T @ N, np.eye(n - 3), RTOL, what="orthonormal null-space basis")
        z = np.random.default_rng(seed).normal(size=n - 3)
        phid = N @ z
        qd0 = np.concatenate([np.linalg.solve(A_G[:, :6], -A_G[:, 6:] @ phid), phid])
        xd0 = np.asarray(ff.to_floating(model, q, qd0))
        assert np.max(np.abs(xd0[3:6])) <= RTOL * np.max(np.abs(phid)), "base turns in the reaction null space"


def test_general_form_eq41(space_robot):
    """Eq. (39)/(41): a base wrench, an input map B u, a contact force J_c^T F_c at the tool
    and joint friction give the accelerations aba gives for the same physical forces."""
    model = space_robot
    n = model.nv - 6
    q, qd, _, rng = _random_state(model, 7)
    tau = rng.normal(size=n)
    F_b = rng.normal(size=6)  # force at the base CoM and moment about it, world axes
    B = rng.normal(size=(model.nv, 3))
    u = rng.normal(size=3)
    F_c = rng.normal(size=6)  # force at the tool and moment about it, world axes
    friction = rng.normal(size=model.nv)
    xd = ff.to_floating(model, q, qd)
    J_s, J_m = ff.floating_jacobians(model, q, "tool")
    J_c = np.concatenate([np.asarray(J_s), np.asarray(J_m)], axis=1)
    xdd = ff.floating_forward_dynamics(model, q, xd, tau, base_wrench=F_b, input_map=B, controls=u,
                                       contact_jacobian=J_c, contact_forces=F_c, friction=friction)
    _, qdd = ff.from_floating(model, q, xd, xdd)

    # the same forces for aba: joint-space generalized forces A^T (B u + F_f), and the two
    # wrenches as body-frame f_ext (force, moment about the body origin, body axes)
    R, p = (np.asarray(x) for x in mbjax.forward_kinematics(model, q))
    A = _velocity_map(R[0], np.asarray(model.com[0]), model.nv)
    f_ext = np.zeros((model.nbodies, 6))

    def wrench_at(body, point, F):
        moment = F[3:] + np.cross(point - p[body], F[:3])  # about the body origin
        f_ext[body] += np.concatenate([R[body].T @ F[:3], R[body].T @ moment])

    wrench_at(0, R[0] @ np.asarray(model.com[0]) + p[0], F_b)
    Rt, pt = mbjax.frame_placement(model, q, "tool")
    wrench_at(model.nbodies - 1, np.asarray(pt), F_c)
    tau_joint = np.concatenate([np.zeros(6), tau]) + A.T @ (B @ u + friction)
    expected = mbjax.aba(model, q, qd, tau_joint, f_ext)
    assert_close(qdd, expected, RTOL, what="Eq. (41) vs aba")


def test_inverse_dynamics_of_the_floating_arm(space_robot):
    """The torques of floating_inverse_dynamics, applied through aba, give the arm exactly the
    requested accelerations and the base the predicted one."""
    model = space_robot
    q, qd, phidd, rng = _random_state(model, 11)
    F_b = rng.normal(size=6)
    xd = ff.to_floating(model, q, qd)
    x0dd, tau = ff.floating_inverse_dynamics(model, q, xd, phidd, base_wrench=F_b)
    R, p = (np.asarray(x) for x in mbjax.forward_kinematics(model, q))
    c0 = np.asarray(model.com[0])
    f_ext = np.zeros((model.nbodies, 6))  # F_b as a body-frame wrench on the base
    f_ext[0] = np.concatenate([R[0].T @ F_b[:3], R[0].T @ F_b[3:] + np.cross(c0, R[0].T @ F_b[:3])])
    qdd = mbjax.aba(model, q, qd, np.concatenate([np.zeros(6), tau]), f_ext)
    assert_close(qdd[6:], phidd, RTOL, what="arm accelerations")
    _, xdd = ff.to_floating(model, q, qd, qdd)
    assert_close(xdd[:6], x0dd, RTOL, what="base acceleration")


def test_gradients_match_finite_differences(space_robot):
    """d xdd / d(q, xd, masses) of the momentum form against Richardson central differences."""
    model = space_robot
    q, qd, _, rng = _random_state(model, 3)
    tau = rng.normal(size=model.nv - 6)
    xd = np.asarray(ff.to_floating(model, q, qd))
    dq = rng.normal(size=model.nv)
    dxd = rng.normal(size=model.nv)
    dm = rng.normal(size=model.nbodies)

    def f(t):
        m = eqx.tree_at(lambda m: m.mass, model, model.mass + t * dm)
        return ff.floating_forward_dynamics(m, mbjax.integrate(model, q, t * dq), xd + t * dxd, tau)

    exact = jax.jvp(f, (0.0,), (1.0,))[1]
    h = 1e-3
    d_h = (f(h) - f(-h)) / (2 * h)
    d_2h = (f(2 * h) - f(-2 * h)) / (4 * h)
    assert_close(exact, richardson(d_h, d_2h), 1e-8, what="jvp vs finite differences")
    grad = jax.grad(lambda x: jnp.sum(ff.floating_forward_dynamics(model, q, x, tau) ** 2))(xd)
    assert np.all(np.isfinite(grad))


def test_zero_velocity_identity_rotation_is_finite(space_robot):
    """No NaN at the neutral configuration with zero velocity (gradients included)."""
    model = space_robot
    q = mbjax.neutral(model)
    z = jnp.zeros(model.nv)
    g = jax.jacfwd(lambda x: ff.floating_forward_dynamics(model, q, x, jnp.zeros(model.nv - 6)))(z)
    assert np.all(np.isfinite(np.asarray(g)))


def test_errors(space_robot):
    fixed = mbjax.load_bundled("double_pendulum")
    with pytest.raises(ValueError, match="not free-floating"):
        ff.floating_inertia(fixed, jnp.zeros(2))
    with pytest.raises(ValueError, match="not free-floating"):
        mbjax.forward_dynamics(fixed, jnp.zeros(2), jnp.zeros(2), jnp.zeros(2), method="momentum")
    q = mbjax.neutral(space_robot)
    with pytest.raises(ValueError, match="one torque per joint"):
        ff.floating_forward_dynamics(space_robot, q, jnp.zeros(space_robot.nv), jnp.zeros(space_robot.nv))
    with pytest.raises(ValueError, match="or neither"):
        ff.floating_forward_dynamics(space_robot, q, jnp.zeros(space_robot.nv), None, input_map=np.eye(13))
    with pytest.raises(ValueError, match="unknown reference"):
        ff.floating_momentum(space_robot, q, jnp.zeros(space_robot.nv), about="moon")
