"""Parameter identification (mbjax.identify): the regressor against rnea and Pinocchio, base
parameters, least squares and physically consistent fits on Pinocchio-generated panda data,
output-error identification of the double pendulum.

Numbers measured on this machine (float64) are in the issue note; the tests assert the
issue's bounds.
"""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax
from mbjax import identify
from mbjax.dynamics.passive import passive_forces_from
from mbjax.dynamics.rnea import rnea_from
from mbjax.identify.consistent import _loss, _setup
from mbjax.identify.inverse_dynamics import regressor_from
from mbjax.kinematics import tree_kinematics
from random_models import TreeSpec, assert_close, build_batch, random_configurations, unstack

pin = pytest.importorskip("pinocchio", reason="Pinocchio (pip install pin) generates the reference data")

#: every joint type, a branch, a second root and a fixed joint (merged into its parent)
SPEC = TreeSpec(parents=(-1, 0, 1, 1, 3, 4, -1, 6, 7, 2), joints=("free", "revolute", "spherical", "universal",
                "prismatic", "cylindrical", "planar", "continuous", "fixed", "revolute"),
                armature=(False, True, True, False, True, False, True, True, False, True),
                limited=(False,) * 10, frames=(), seed=11)


def layout_all(model):
    return identify.ParameterLayout.of(model, armature=True, viscous=True, coulomb=True)


# ------------------------------------------------------------------------------ regressor
def test_regressor_reproduces_rnea_random_trees():
    """Y theta == rnea for random (not even physical) parameters theta set into random trees
    with every joint type, at random states; the friction columns match the Model's damping as
    simulate applies it (passive forces) and Coulomb's sign(qd)."""
    B, S = 3, 4
    models = build_batch(SPEC, B)
    model0 = unstack(models, 0)
    layout = layout_all(model0)
    rng = np.random.default_rng(0)
    thetas = rng.normal(size=(B, layout.size))
    thetas[:, : 10 * model0.nbodies: 10] = rng.uniform(0.5, 2.0, size=(B, model0.nbodies))  # masses != 0
    qs = np.stack([np.asarray(random_configurations(model0, jax.random.PRNGKey(k), S)) for k in range(B)])
    qds, qdds = rng.normal(size=(2, B, S, model0.nv))

    def errors(model, theta, q, qd, qdd):
        params = layout.unpack(theta)
        other = identify.with_dynamic_parameters(model, params)
        tau = rnea_from(other, tree_kinematics(other, q), q, qd, qdd) - passive_forces_from(other, q, qd)
        tau = tau + params.coulomb * jnp.sign(qd)
        return regressor_from(model, layout, q, qd, qdd) @ theta, tau

    f = jax.jit(jax.vmap(jax.vmap(errors, in_axes=(None, None, 0, 0, 0))))
    got, want = f(models, thetas, qs, qds, qdds)
    assert_close(got, want, rtol=1e-10, what="Y theta vs rnea")
    # the Model's own parameters: Y theta(model) == rnea exactly (default layout: with armature)
    model = unstack(models, 1)
    theta = identify.ParameterLayout.of(model).pack(identify.dynamic_parameters(model))
    Y = identify.regressor(model, qs[1, 0], qds[1, 0], qdds[1, 0])
    assert_close(Y @ theta, mbjax.rnea(model, qs[1, 0], qds[1, 0], qdds[1, 0]), rtol=1e-10, what="own parameters")


@pytest.mark.parametrize("name", ["panda", "solo12"])
def test_regressor_matches_pinocchio(name):
    """The inertial columns equal pin.computeJointTorqueRegressor (Pinocchio's parameter order)."""
    floating = mbjax.robots.EXAMPLE_ROBOTS[name][1]
    path = str(mbjax.example_robot_path(name))
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(path)
    pd = pm.createData()
    model = mbjax.load_urdf(path, floating_base=floating, mimic="independent", joint_order="pinocchio")
    rng = np.random.default_rng(1)
    qs = np.asarray(random_configurations(model, jax.random.PRNGKey(1), 3))
    vs, as_ = rng.normal(size=(2, 3, model.nv))
    Y = np.asarray(identify.stacked_regressor(model, qs, vs, as_))
    ref = np.concatenate([pin.computeJointTorqueRegressor(pm, pd, mbjax.to_pinocchio_configuration(model, q), v, a)
                          for q, v, a in zip(qs, vs, as_)])
    assert_close(Y[:, : 10 * model.nbodies], ref, rtol=1e-10, what=f"{name} regressor")
    theta = np.concatenate([pm.inertias[i].toDynamicParameters() for i in range(1, pm.njoints)])
    assert_close(identify.ParameterLayout.of(model, armature=False).pack(identify.dynamic_parameters(model)), theta,
                 rtol=1e-12, what="inertial parameters")


def test_parameters_round_trip_and_log_cholesky():
    """pi <-> (m, c, I_c), pi <-> pseudo-inertia <-> log-Cholesky are inverse maps, any phi is
    a real body, and the log-Cholesky map is differentiable (vs central differences)."""
    model = unstack(build_batch(SPEC, 1), 0)
    rng = np.random.default_rng(2)
    wild, direction = rng.normal(scale=2.0, size=(50, 10)), rng.normal(size=(model.nbodies, 10))
    h = 1e-6

    @jax.jit
    def evaluate(model, wild, direction):
        pi = identify.dynamic_parameters(model).inertial
        phi = identify.log_cholesky_from_parameters(pi)
        to_pi = identify.parameters_from_log_cholesky
        bad = pi.at[0, 4].set(-pi[0, 4])  # link 0's I_xx negative: triangle inequality broken
        return dict(
            inertia=identify.inertia_from_parameters(pi), pi=pi, phi=phi, round_trip=to_pi(phi),
            consistent=identify.is_physically_consistent(pi), wild=identify.is_physically_consistent(to_pi(wild)),
            bad=identify.is_physically_consistent(bad),
            repaired=identify.is_physically_consistent(identify.nearest_consistent(bad)),
            jvp=jax.jvp(to_pi, (phi,), (direction,))[1],
            fd=(to_pi(phi + h * direction) - to_pi(phi - h * direction)) / (2 * h))

    out = evaluate(model, wild, direction)
    m, c, Ic = out["inertia"]
    assert_close(m, model.mass, rtol=1e-13)
    assert_close(c, model.com, rtol=1e-13)
    assert_close(Ic, model.inertia, rtol=1e-13)
    assert bool(jnp.all(out["consistent"])) and bool(jnp.all(out["wild"])) and bool(jnp.all(out["repaired"]))
    assert not bool(out["bad"][0])
    assert_close(out["round_trip"], out["pi"], rtol=1e-12, what="log-Cholesky round trip")
    assert_close(jnp.exp(2 * out["phi"][:, 0]), model.mass, rtol=1e-13, what="m = exp(2 alpha)")
    assert_close(out["jvp"], out["fd"], rtol=1e-8, what="d pi / d phi (error O(h^2) = 1e-12)")


def test_fourier_trajectory_derivatives():
    """qd and qdd of the Fourier series are the time derivatives of q (forward mode)."""
    traj = identify.FourierTrajectory.random(jax.random.PRNGKey(0), jnp.zeros(3), harmonics=4, period=5.0)
    t = jnp.asarray(0.7)
    q, qd, qdd = traj(t)
    dq = jax.jvp(lambda s: traj(s)[0], (t,), (jnp.ones(()),))[1]
    dqd = jax.jvp(lambda s: traj(s)[1], (t,), (jnp.ones(()),))[1]
    assert_close(dq, qd, rtol=1e-13)
    assert_close(dqd, qdd, rtol=1e-13)
    q_end = traj(traj.period)[0]
    assert_close(q_end, traj(0.0)[0], rtol=1e-12, what="periodic")


# ------------------------------------------------------------------ panda data from Pinocchio
class Panda:
    """Panda with the gripper locked (7 revolute joints), in mbjax (kinematics, CAD values) and
    in Pinocchio (the "real" robot: perturbed inertias, armature; friction added here)."""

    def __init__(self, seed):
        rng = np.random.default_rng(seed)
        urdf = mbjax.example_robot_path("panda").read_text()
        urdf = re.sub(r'(<joint name="panda_finger_joint\d" type=)"prismatic"', r'\1"fixed"', urdf)
        self.model = mbjax.load_urdf(urdf, mimic="independent", joint_order="pinocchio")
        self.layout = layout_all(self.model)
        self.real = pin.buildModelFromXML(urdf)
        self.data = self.real.createData()
        for i in range(1, self.real.njoints):
            inertia = self.real.inertias[i]
            R = pin.exp3(rng.normal(size=3) * 0.1)
            self.real.inertias[i] = pin.Inertia(inertia.mass * (1 + 0.1 * rng.uniform(-1, 1)),
                                                inertia.lever + rng.uniform(-0.01, 0.01, 3),
                                                R @ inertia.inertia @ R.T * (1 + 0.2 * rng.uniform(-1, 1)))
        self.real.armature[:] = rng.uniform(0.05, 0.2, 7)
        self.viscous, self.coulomb = rng.uniform(0.05, 0.3, 7), rng.uniform(0.1, 0.6, 7)
        pis = np.stack([self.real.inertias[i].toDynamicParameters() for i in range(1, self.real.njoints)])
        self.theta = np.asarray(self.layout.pack(identify.DynamicParameters(
            pis, np.asarray(self.real.armature), self.viscous, self.coulomb)))

    def torques(self, q, qd, qdd):
        tau = np.stack([pin.rnea(self.real, self.data, *x) for x in zip(q, qd, qdd)])
        return tau + self.viscous * qd + self.coulomb * np.sign(qd)

    def samples(self, key, n):
        """n samples of one period of a random Fourier trajectory about mid-range."""
        mid = 0.5 * (self.model.lower + self.model.upper)
        traj = identify.FourierTrajectory.random(jax.random.PRNGKey(key), mid, 5, 10.0, velocity=0.5)
        return traj, [np.asarray(x) for x in traj.sample(jnp.linspace(0.0, 10.0, n, endpoint=False))]


N = 150  # samples per trajectory (one stacked-regressor compilation for all)


@pytest.fixture(scope="module")
def panda():
    robot = Panda(seed=0)
    rng = np.random.default_rng(0)
    q = np.asarray(random_configurations(robot.model, jax.random.PRNGKey(0), N))
    W = identify.stacked_regressor(robot.model, q, *rng.normal(size=(2, N, 7)), robot.layout)
    robot.base = identify.base_parameters(W)
    robot.random_W = np.asarray(W)
    return robot


def test_base_parameters(panda):
    """The base map is exact (W theta == W_b theta_b for any theta), its rank is the numerical
    rank of W, and noise-free exciting data give back the true base parameters."""
    base, W = panda.base, panda.random_W
    assert base.rank == np.linalg.matrix_rank(W)
    theta = np.random.default_rng(5).normal(size=panda.layout.size)
    assert_close(base.regressor(W) @ base(theta), W @ theta, rtol=1e-11, what="W theta vs W_b theta_b")
    assert len(base.names(panda.layout)) == base.rank
    traj, (q, qd, qdd) = panda.samples(1, N)
    cond = identify.condition_number(panda.model, traj, jnp.linspace(0, 10, N, endpoint=False), base, panda.layout)
    print(f"condition number of the base regressor (random Fourier coefficients): {float(cond):.4g}")
    Wb = base.regressor(identify.stacked_regressor(panda.model, q, qd, qdd, panda.layout))
    fit = identify.least_squares(Wb, panda.torques(q, qd, qdd))
    truth = base(panda.theta)
    error = float(np.abs(fit.theta - truth).max() / np.abs(truth).max())
    print(f"noise-free base parameters: max error / max |theta_b| = {error:.3e}")
    assert error <= 1e-8


def test_entropic_divergence_in_the_fit_loss(panda):
    """The fit's divergence from U's diagonal (no factorisation) equals the log-det formula."""
    pi, pi0 = identify.dynamic_parameters(panda.model).inertial, panda.layout.unpack(panda.theta).inertial
    W = panda.random_W
    x0, data = _setup(W, np.ones((N, 7)), panda.layout, pi, pi0, jnp.asarray(1.0))
    data["scale"] = 0.0 * data["scale"]  # the divergence alone

    @eqx.filter_jit  # one program, not one compilation per operation
    def both(x0, data, pi, pi0):
        return (_loss(x0, panda.layout, **data), jnp.sum(identify.entropic_divergence(pi, pi0)),
                identify.entropic_divergence(pi0, pi0))

    loss, divergence, zero = both(x0, data, pi, pi0)
    assert_close(loss, divergence, rtol=1e-11)
    assert float(jnp.abs(zero).max()) < 1e-12


def test_physically_consistent_fit_beats_least_squares(panda):
    """With 1 % torque noise, over several seeds: every body of the consistent fit is a real
    body, and it predicts the torques of a held-out trajectory better than least squares."""
    _, test = panda.samples(100, N)
    W_test = np.asarray(identify.stacked_regressor(panda.model, *test, panda.layout))
    tau_test = panda.torques(*test).reshape(-1)
    nominal = identify.dynamic_parameters(panda.model)
    rms = lambda x: float(np.sqrt(np.mean(np.square(x))))  # noqa: E731
    for seed in range(3):
        _, train = panda.samples(10 + seed, N)
        W = np.asarray(identify.stacked_regressor(panda.model, *train, panda.layout))
        tau = panda.torques(*train)
        sigma = 0.01 * np.sqrt(np.mean(tau**2, axis=0))
        tau = tau + sigma * np.random.default_rng(seed).normal(size=tau.shape)
        ls = identify.least_squares(panda.base.regressor(W), tau, weights=1 / sigma)
        pc = identify.physically_consistent(W, tau, panda.layout, nominal, steps=400, progress=False)
        e_ls = rms(panda.base.regressor(W_test) @ np.asarray(ls.theta) - tau_test)
        e_pc = rms(W_test @ np.asarray(panda.layout.pack(pc.params)) - tau_test)
        eig = np.asarray(jnp.linalg.eigvalsh(identify.pseudo_inertia(pc.params.inertial))[:, 0])
        print(f"seed {seed}: held-out RMS torque error: least squares {e_ls:.4e}, consistent {e_pc:.4e} N m "
              f"(true RMS {rms(tau_test):.3g}); smallest pseudo-inertia eigenvalue {eig.min():.3e}; "
              f"{len(pc.losses)} iterations")
        assert np.all(eig > 0) and np.all(np.asarray(pc.params.inertial[:, 0]) > 0)
        assert e_pc < e_ls


# ------------------------------------------------------------------------ output error
def test_output_error_double_pendulum():
    """Masses and lengths of the bundled double pendulum (+15 %, -12.5 %, +10 %, -10 %) come back
    from simulated trajectories driven by known torques."""
    nominal = mbjax.load_bundled("double_pendulum")
    radius = 0.02  # the URDF's rods are solid cylinders of radius 2 cm

    def make_model(p):
        m = jnp.exp(p["log_m"]) * nominal.mass
        L = jnp.exp(p["log_L"]) * jnp.array([0.4, 0.35])
        com = jnp.stack([jnp.zeros(2), jnp.zeros(2), -L / 2], -1)
        Ixx = m * (3 * radius**2 + L**2) / 12
        inertia = jax.vmap(lambda a, c: jnp.diag(jnp.stack([a, a, c])))(Ixx, m * radius**2 / 2)
        placement = nominal.joint_translation.at[1, 2].set(-L[0])
        return eqx.tree_at(lambda mo: (mo.mass, mo.com, mo.inertia, mo.joint_translation), nominal,
                           (m, com, inertia, placement))

    start = {"log_m": jnp.zeros(2), "log_L": jnp.zeros(2)}
    # the parametrisation reproduces the URDF at the start
    q = jnp.array([0.3, -0.5])
    assert_close(mbjax.crba(make_model(start), q), mbjax.crba(nominal, q), rtol=1e-9)
    truth = {"log_m": jnp.log(jnp.array([1.15, 0.875])), "log_L": jnp.log(jnp.array([1.1, 0.9]))}
    rng = np.random.default_rng(0)
    B, ts = 2, jnp.linspace(0.0, 1.0, 21)
    tau = jnp.asarray(rng.normal(size=(B, 2)) * np.array([1.0, 0.4]))  # constant torques, one pair per run
    q0, qd0 = rng.uniform(-0.5, 0.5, (B, 2)), np.zeros((B, 2))
    measured = mbjax.simulate_batch(make_model(truth), q0, qd0, 0.0, 1.0, tau=tau, batch_tau=True, saveat=ts,
                                    rtol=1e-11, atol=1e-11)
    fit = identify.output_error(start, make_model, ts, q0, qd0, measured.q, tau=tau, rtol=1e-9, atol=1e-9,
                                progress=False)
    error = max(float(np.abs(np.exp(fit.params[k] - truth[k]) - 1).max()) for k in truth)
    print(f"output error: mean squared residual {fit.loss:.3e} rad^2 after {fit.steps} steps; "
          f"max relative parameter error {error:.2e}")
    assert error < 1e-6


# ---------------------------------------------------------------------------- bad input
def test_errors(panda):
    model, layout = panda.model, panda.layout
    with pytest.raises(ValueError, match="ParameterLayout.of"):
        identify.regressor(model, jnp.zeros(7), jnp.zeros(7), jnp.zeros(7),
                           identify.ParameterLayout.of(mbjax.load_bundled("double_pendulum")))
    with pytest.raises(ValueError, match="theta has shape"):
        layout.unpack(jnp.zeros(3))
    with pytest.raises(ValueError, match="N, nq"):
        identify.stacked_regressor(model, jnp.zeros(7), jnp.zeros(7), jnp.zeros(7))
    with pytest.raises(ValueError, match="base regressor"):
        identify.physically_consistent(panda.base.regressor(panda.random_W), np.zeros(len(panda.random_W)), layout,
                                       identify.dynamic_parameters(model))
    with pytest.raises(ValueError, match="more samples"):
        identify.least_squares(panda.random_W[:10], np.zeros(10))
    floating = mbjax.load_bundled("quadruped")
    traj = identify.FourierTrajectory.random(jax.random.PRNGKey(0), jnp.zeros(floating.nv))
    with pytest.raises(ValueError, match="vector space"):
        identify.condition_number(floating, traj, jnp.linspace(0, 1, 5), panda.base)
