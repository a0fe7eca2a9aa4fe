"""Closed chains through the dynamics hook of ``mbjax.simulate`` and ``mbjax.trajopt``:
``simulate(method=ClosedChainDynamics(closures, ...))``.

Independent references: the four-bar's one-degree-of-freedom Lagrange equations (SymPy, SciPy
DOP853 at 1e-13; from test_closures.py), the diffrax integration of ``constrained_vector_field``
and central differences for the gradient.
"""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax
from mbjax import constraints as C
from mbjax import trajopt
from random_models import assert_close, richardson
from test_closures import GUESS, LENGTHS, MASSES, four_bar_lagrange, simulate as simulate_vector_field


def test_simulate_with_the_hook_matches_lagrange_and_the_vector_field():
    """Four-bar from rest, 3 s, Dopri8 at 1e-12 with critically damped Baumgarte: the same motion
    as the SymPy Lagrange reference (1e-9; measured 1.3e-11) and as diffrax on
    ``constrained_vector_field`` (1e-10); the loops stay closed to 1e-10."""
    model, cl = C.four_bar(**LENGTHS, masses=MASSES)
    q0, qd0 = C.assemble(model, cl, GUESS), jnp.zeros(3)
    alpha, beta = C.critical(0.1)
    f64 = lambda x: jnp.asarray(x, jnp.float64)  # noqa: E731
    ts, (q_ref, qd_ref), _ = simulate_vector_field(model, cl, q0, qd0, f64(3.0), f64(alpha), f64(beta), f64(1e-12))
    traj = mbjax.simulate(model, q0, qd0, 0.0, 3.0, method=mbjax.ClosedChainDynamics(cl, alpha=alpha, beta=beta),
                          solver=diffrax.Dopri8(), rtol=1e-12, atol=1e-12, saveat=ts,
                          residual=lambda m, q, qd: C.loop_residual(m, cl, q))
    assert np.ptp(np.asarray(traj.q[:, 0])) > 2.0  # a large swing
    assert_close(traj.q, q_ref, 1e-10, atol=1e-10, what="q against constrained_vector_field")
    assert_close(traj.qd, qd_ref, 1e-10, atol=1e-10, what="qd against constrained_vector_field")
    lagrange = four_bar_lagrange(q0, ts)
    ours = np.stack([traj.q[:, 0], traj.q[:, 0] + traj.q[:, 1], traj.q[:, 2]], 1)
    assert np.max(np.abs(ours - lagrange)) <= 1e-9, np.max(np.abs(ours - lagrange))
    assert np.max(np.abs(np.asarray(traj.residual))) <= 1e-10


def test_derivative_through_simulate_matches_finite_differences():
    """Forward-mode derivative (``diffrax.ForwardMode``, as trajopt's Levenberg-Marquardt forms
    Jacobians) of a loss on a 0.4 s slider-crank simulation (40 fixed Tsit5 steps) along a random
    direction of the hook's arrays (the pin placement in the closures, the Baumgarte gains), the
    link masses and the crank torque, against Richardson-extrapolated central differences."""
    model, cl = C.slider_crank()
    q0 = C.assemble(model, cl, jnp.array([0.5, -0.7, 1.0]))
    qd0 = C.project_velocity(model, cl, q0, jnp.array([2.0, 0.0, 0.0]))
    alpha, beta = C.critical(0.05)
    params = (model.mass, cl.translation_a, jnp.array([alpha, beta]), jnp.array([1.5, 0.0, 0.0]))
    rng = np.random.default_rng(1)
    direction = jax.tree.map(lambda x: jnp.asarray(rng.normal(size=np.shape(x))), params)

    def loss(params):
        mass, pin, gains, tau = params
        hook = mbjax.ClosedChainDynamics(eqx.tree_at(lambda c: c.translation_a, cl, pin), alpha=gains[0],
                                         beta=gains[1])
        traj = mbjax.simulate(eqx.tree_at(lambda m: m.mass, model, mass), q0, qd0, 0.0, 0.4, tau=tau, method=hook,
                              solver=diffrax.Tsit5(), stepsize_controller=diffrax.ConstantStepSize(), dt0=0.01,
                              saveat=jnp.array([0.4]), adjoint=diffrax.ForwardMode())
        return jnp.sum(traj.q[-1] ** 2) + 0.1 * jnp.sum(traj.qd[-1] ** 2)

    derivative = eqx.filter_jit(lambda p, d: jax.jvp(loss, (p,), (d,)))  # one compilation for all calls
    ad = derivative(params, direction)[1]
    h = 1e-4
    f = [derivative(jax.tree.map(lambda p, d: p + s * d, params, direction), direction)[0]
         for s in (h, -h, 2 * h, -2 * h)]
    fd = richardson((f[0] - f[1]) / (2 * h), (f[2] - f[3]) / (4 * h))
    assert abs(float(ad)) > 1e-3  # the loss does depend on these parameters
    assert_close(ad, fd, 1e-7, what="directional derivative")


def test_hook_is_part_of_the_trajectory_problem_and_bad_input():
    """The hook's arrays are leaves of a TrajectoryProblem (differentiated, batched), which runs it
    without the rank check; strings and plain functions still work; at a singular configuration
    the checked hook raises and the unchecked one returns; a wrong closures object or method
    fails when built."""
    model, cl = C.four_bar(ground=1.0, crank=0.5, coupler=1.0, rocker=0.5)
    hook = mbjax.ClosedChainDynamics(cl, alpha=1.0, beta=2.0)
    problem = trajopt.TrajectoryProblem(model, jnp.zeros(3), jnp.zeros(3), 1.0, 3, actuated=[0],
                                        costs=[trajopt.Effort()], method=hook)
    assert any(leaf is cl.translation_a for leaf in jax.tree.leaves(problem))
    assert hook.checked and not problem.method.checked and problem.method.solver.alpha == 1.0
    # the parallelogram four-bar at its change point (all links along x): Phi_q loses rank
    q, qd = jnp.zeros(3), jnp.array([1.0, -1.0, 1.0])
    with pytest.raises(Exception, match="rank-deficient"):
        eqx.filter_jit(hook)(model, q, qd, jnp.zeros(3)).block_until_ready()
    eqx.filter_jit(problem.method)(model, q, qd, jnp.zeros(3)).block_until_ready()
    by_name = trajopt.TrajectoryProblem(model, jnp.zeros(3), jnp.zeros(3), 1.0, 3, costs=[trajopt.Effort()],
                                        method="crba").method
    assert isinstance(by_name, mbjax.methods.CRBA) and not by_name.checked

    def plain(model, q, qd, tau):
        return mbjax.forward_dynamics(model, q, qd, tau)

    wrapped = trajopt.TrajectoryProblem(model, jnp.zeros(3), jnp.zeros(3), 1.0, 3, costs=[trajopt.Effort()],
                                        method=plain).method
    assert wrapped.fn is plain and not wrapped.checked
    with pytest.raises(TypeError, match="LoopClosureBuilder"):
        mbjax.ClosedChainDynamics(model)
    with pytest.raises(ValueError, match="unknown constrained-dynamics method"):
        mbjax.ClosedChainDynamics(cl, method="lu")
    with pytest.raises(TypeError, match="not both"):
        mbjax.ClosedChainDynamics(cl, mbjax.ClosureSolver(), alpha=1.0)
    with pytest.raises(TypeError, match="rcnod"):
        mbjax.constrained_forward_dynamics(model, cl, jnp.zeros(3), jnp.zeros(3), jnp.zeros(3), rcnod=1e-3)
    with pytest.raises(TypeError, match="Huang's stepper takes no solver options"):
        mbjax.constraints.step(model, cl, jnp.zeros(3), jnp.zeros(3), jnp.zeros(3), 1e-3, alpha=1.0)
