"""Huang et al.'s (2000) singularity-free stepper: convergence, reactions, the matrix of
Eq. (36) at the double pendulum's singular configuration, gradients, the Stewart platform and
the four-bar's change point."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax
from mbjax.constraints import DOUBLE_PENDULUM, four_bar, huang_double_pendulum, huang_system, stewart_platform
from mbjax.constraints.stepping import step_from

P = DOUBLE_PENDULUM
DTS = np.array([4e-3, 2e-3, 1e-3])
T = 0.4  # seconds of the convergence runs


def _masked_rollout(model, closures, q0, qd0, tau, dt, n, nmax):
    """``n`` Huang steps of ``dt`` inside a scan of ``nmax`` (so runs with different dt vmap)."""

    def body(state, k):
        out = step_from(model, closures, *state, tau, dt, None, None)
        return jax.tree.map(lambda new, old: jnp.where(k < n, new, old), (out.q, out.qd), state), None

    return jax.lax.scan(body, (q0, qd0), jnp.arange(nmax))[0]


@pytest.fixture(scope="module")
def pendulum():
    model = huang_double_pendulum()
    q0, qd0 = jnp.array([0.3, 0.0]), jnp.zeros(2)  # theta1 = theta2: the paper's singular configuration
    ns = np.round(T / DTS).astype(int)
    runs = jax.jit(jax.vmap(lambda dt, n: _masked_rollout(model, None, q0, qd0, jnp.zeros(2), dt, n, ns.max())))(
        jnp.asarray(DTS), jnp.asarray(ns))
    ref = mbjax.simulate(model, q0, qd0, 0.0, T, solver=diffrax.Dopri8(), rtol=1e-12, atol=1e-12,
                         saveat=jnp.array([T]))
    return model, q0, runs, ref


def test_double_pendulum_converges_at_first_order(pendulum):
    model, q0, (q, qd), ref = pendulum
    err = np.abs(np.asarray(q) - np.asarray(ref.q[-1])).max(axis=1)
    order = np.log2(err[:-1] / err[1:])
    # explicit second-order Taylor steps (Eq. 12) with v += a dt: global error O(dt), the
    # constraint residual of each step O(dt^3) (measured: orders 0.98, 0.99)
    assert np.all(np.abs(order - 1.0) < 0.05), (err, order)
    # the scheme's own O(dt) error at dt = 1e-3 after 0.4 s (measured 1.6e-3 rad), not a loose
    # numerical tolerance: the order above is the accuracy check
    assert err[-1] < 5e-3


def _exact_reactions(model, q, qd):
    """Hinge forces (world) on link 1 from the ground and on link 2 from link 1, by Newton's
    second law from the exact accelerations (ABA): an independent check of Q."""
    qdd = mbjax.aba(model, q, qd, jnp.zeros(2))

    def com(s):  # centres of mass along q(t) to second order; d2/ds2 at 0 = J qdd + Jdot qd
        return mbjax.maximal_state(model, q + s * qd + 0.5 * s * s * qdd, qd).r

    acc = jax.jacfwd(jax.jacfwd(com))(0.0)
    g = model.gravity
    r2 = P["mass"] * (acc[1] - g)
    r1 = P["mass"] * (acc[0] - g) + r2
    return jnp.stack([r1, r2])


def test_reactions_match_newton(pendulum):
    model, *_ = pendulum
    q, qd = jnp.array([0.7, -0.4]), jnp.array([1.5, -2.0])
    exact = _exact_reactions(model, q, qd)
    huang = jax.jit(jax.vmap(lambda dt: step_from(model, None, q, qd, jnp.zeros(2), dt, None, None).joint_wrench))(
        jnp.array([1e-3, 5e-4]))
    err = np.abs(np.asarray(huang[:, :, :3]) - np.asarray(exact)[None]).max(axis=(1, 2))
    # on the constraint manifold the point-coincidence rows are exact second-order Taylor
    # polynomials, so Q is the exact reaction at the start of the step, whatever dt; what is
    # left is round-off amplified by the dt^2 scaling of Eq. (36) (measured 8e-12, 3e-11)
    assert err.max() < 1e-9 * np.abs(exact).max(), err
    assert np.abs(np.asarray(huang[:, :, 5])).max() < 1e-9


def _in_plane_block(model, q, dt):
    matrix, _ = huang_system(model, None, q, jnp.zeros(2), jnp.zeros(2), dt)
    names = mbjax.constraints.huang_joints(model).row_names
    inside = [names.index(n) for n in ("joint1/x", "joint1/y", "joint2/x", "joint2/y")]
    outside = [i for i in range(len(names)) if i not in inside]
    matrix = np.asarray(matrix)
    return matrix[np.ix_(inside, inside)], matrix[np.ix_(inside, outside)], matrix[np.ix_(outside, inside)]


def test_equation_36_regular_at_theta1_equal_theta2(pendulum):
    model, *_ = pendulum
    dt, th = 1e-3, 0.3
    block, coupling_a, coupling_b = _in_plane_block(model, jnp.array([th, 0.0]), dt)
    # in-plane reactions decouple from the out-of-plane ones in a planar state
    assert np.abs(coupling_a).max() < 1e-12 * np.abs(block).max()
    assert np.abs(coupling_b).max() < 1e-12 * np.abs(block).max()
    # independent construction from Eq. (14a) in world axes: block (c, k) of link i is
    # dt^2/2 (E/m + u_c u_k^T / J) with u = e_z x d (lever arm d from the centre of mass)
    m, J, half = P["mass"], P["inertia"], P["half_length"]
    e = np.array([np.cos(th), np.sin(th)])
    u = np.array([-e[1], e[0]]) * half  # e_z x d for d = +half e; the opposite end has -u

    def blk(uc, uk):
        return 0.5 * dt**2 * (np.eye(2) / m + np.outer(uc, uk) / J)

    # joint 1 (ground, end -u of link 1), joint 2 (end +u of link 1, end -u of link 2, Q2 = -R2)
    expected = np.block([[blk(-u, -u), blk(-u, u)], [blk(u, -u), blk(u, u) + blk(-u, -u)]])
    np.testing.assert_allclose(np.linalg.svd(block, compute_uv=False), np.linalg.svd(expected, compute_uv=False),
                               rtol=1e-9)
    k = m * half**2 / J  # = 3.99 with the paper's data (4 in its printed matrices)
    det = abs(np.linalg.det(block))
    np.testing.assert_allclose(det, (0.5 * dt**2 / m) ** 4 * (k * k + 6 * k + 1), rtol=1e-9)
    # the printed (9/2) dt^2 is off in its power of dt (a 4x4 matrix with every entry
    # proportional to dt^2/2 has det ~ dt^8) and drops the sign of Q2 = -R2
    assert det > 0


def test_gradients_through_300_steps(pendulum):
    model, *_ = pendulum

    def final_angle(x):  # initial rate of link 1 and a constant hinge-2 torque
        q, qd = _masked_rollout(model, None, jnp.array([0.3, 0.2]), jnp.array([x[0], 0.0]), jnp.array([0.0, x[1]]),
                                2e-3, 300, 300)
        return q[1] + 0.1 * qd[0]

    x0 = jnp.array([0.5, 1.0])
    h = 1e-3  # Richardson-extrapolated central differences (steps h, h/2): error O(h^4)
    shifts = jnp.concatenate([s * jnp.eye(2) * k for k in (h, h / 2) for s in (1.0, -1.0)])

    @jax.jit
    def both(x):
        return jax.grad(final_angle)(x), jax.vmap(final_angle)(x + shifts)

    grad, f = both(x0)
    f = np.asarray(f).reshape(2, 2, 2)  # (h, sign, coordinate)
    d = (f[:, 0] - f[:, 1]) / (2 * np.array([h, h / 2]))[:, None]
    fd = (4 * d[1] - d[0]) / 3
    np.testing.assert_allclose(np.asarray(grad), fd, rtol=1e-7, atol=1e-9)


def test_stewart_platform_short_run(runtime_checks_off):
    model, closures, q0, tau = stewart_platform()
    assert mbjax.constraints.huang_joints(model, closures).nrows == 39
    assert np.abs(np.asarray(mbjax.loop_residual(model, closures, q0))).max() < 1e-12
    traj, reactions = mbjax.constraints.rollout(model, closures, q0, jnp.zeros(model.nv), jnp.asarray(tau), 0.002, 150)
    res = np.abs(np.asarray(traj.residual)).max()
    assert np.isfinite(np.asarray(traj.q)).all() and np.isfinite(np.asarray(reactions)).all()
    assert res < 1e-5, res  # measured 2.7e-6 m over 0.3 s (cranks at ~25 rad/s)
    # the first step agrees with the multiplier solution (the platform's heave acceleration)
    kkt = mbjax.constrained_forward_dynamics(model, closures, q0, jnp.zeros(model.nv), jnp.asarray(tau))
    # Eq. (36) imposes the joint equations at the end of the step, so the step's mean acceleration
    # differs from the instantaneous (KKT) one by O(dt): a physics tolerance, not a loose one
    np.testing.assert_allclose(traj.qd[1] / 0.002, kkt.qdd, atol=1e-4 * np.abs(np.asarray(kkt.qdd)).max())


def test_four_bar_near_a_change_point():
    """The parallelogram four-bar of examples/four_bar_singular.py: theta(t) = w t exactly, and
    Phi_q loses rank at every crank angle k pi (change points), where the KKT solve fails.

    Measured (dt = 1e-3, from theta = 0.3): Huang's stepper follows w t to 1e-10 up to
    1.3 s; near the change point at 1.42 s its Eq. (36) matrix is regular only through its
    O(dt) terms, and the motion leaves the parallelogram (0.08 rad at 1.9 s; with dt = 2.5e-4
    it diverges). The paper's claim of a singularity-free passage is not borne out here.
    """
    model, closures = four_bar(ground=1.0, crank=0.5, coupler=1.0, rocker=0.5)
    model = eqx.tree_at(lambda m: m.gravity, model, jnp.zeros(3))
    w, dt, n, th = 2.0, 1e-3, 1300, 0.3
    traj, _ = mbjax.constraints.rollout(model, closures, jnp.array([th, -th, th]), jnp.array([w, -w, w]),
                                        jnp.zeros(3), dt, n)
    err = np.abs(np.asarray(traj.q[:, 0]) - th - w * np.asarray(traj.ts)).max()
    assert err < 1e-8, err
    assert np.abs(np.asarray(traj.residual)).max() < 1e-9
