"""Trajectory optimisation (mbjax.trajopt): gradients of the shooting objective against finite
differences, multiple-shooting defects at the solution, a short rest-to-rest swing of the double
pendulum checked by an independent tight re-simulation, and vmapped restarts against restarts
run beside copies of themselves.

One small problem serves every test (the bundled acrobot with both joints actuated, 1 s, 5 knots,
16 fixed Dopri8 steps), so that the few compiled programs are shared.
"""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax
from mbjax import trajopt
from random_models import assert_close, floating_arm, richardson

T, KNOTS, SUBSTEPS = 1.0, 5, 4
Q_GOAL = jnp.array([0.8, -0.5])
LIMIT = 12.0


def make_problem(costs=None, constraints=None):
    costs = [trajopt.Effort(weight=1e-2)] if costs is None else costs
    constraints = ([trajopt.TerminalState(Q_GOAL, jnp.zeros(2)), trajopt.TorqueLimits(-LIMIT, LIMIT)]
                   if constraints is None else constraints)
    model = mbjax.load_bundled("acrobot")  # Spong's geometry: 1 kg links of 1 m and 2 m
    return trajopt.TrajectoryProblem(model, jnp.zeros(2), jnp.zeros(2), T, KNOTS, substeps=SUBSTEPS,
                                     solver=diffrax.Dopri8(), costs=costs, constraints=constraints)


def guesses(n):
    return 5.0 * jax.random.uniform(jax.random.PRNGKey(7), (n, KNOTS, 2), minval=-1, maxval=1)


@pytest.fixture(scope="module")
def restarts():
    """Two restarts solved as one vmapped program."""
    problem = make_problem()
    best, everything = trajopt.solve_restarts(problem, guesses(2), progress=False)
    return problem, best, everything


def test_gradient_matches_finite_differences():
    """d/du of the objective (every kind of term as a cost; reverse mode) and the Jacobian of
    the multiple-shooting defects (forward mode, as Levenberg–Marquardt forms it), against
    Richardson-extrapolated central differences."""
    problem = make_problem(
        costs=[trajopt.Effort(weight=0.1), trajopt.TerminalState(Q_GOAL, jnp.zeros(2), weight=10.0),
               trajopt.PathCost(lambda t, q, qd: jnp.concatenate([q - Q_GOAL * t / T, 0.1 * qd])),
               trajopt.TorqueLimits(-1.0, 1.0, weight=5.0), trajopt.VelocityLimits(-0.5, 0.5, weight=3.0),
               trajopt.PositionLimits(lower=jnp.array([-jnp.inf, -0.2]), upper=0.3, weight=2.0)],
        constraints=[])
    single, multiple = trajopt.SingleShooting(), trajopt.MultipleShooting(2)

    def objective(u):
        cost, _, _ = problem.residuals(single.rollout(problem, u))
        return jnp.sum(cost**2)

    def defects(x):  # x: knot values and one node state, flattened
        z = trajopt.ShootingNodes(x[:2 * KNOTS].reshape(KNOTS, 2), x[None, 2 * KNOTS:2 * KNOTS + 2],
                                  x[None, 2 * KNOTS + 2:])
        return multiple.rollout(problem.forward_mode(), z).defects

    u = guesses(1)[0]
    x = jnp.concatenate([u.reshape(-1), jnp.array([0.3, -0.2, 1.0, -2.0])])
    h = 1e-4

    @jax.jit
    def check(u, x):
        eye_u, eye_x = jnp.eye(u.size).reshape(-1, *u.shape), jnp.eye(x.size)
        fd = lambda f, y, e, s: (f(y + s * h * e) - f(y - s * h * e)) / (2 * s * h)  # noqa: E731
        g_fd = jax.vmap(lambda e: richardson(fd(objective, u, e, 1), fd(objective, u, e, 2)))(eye_u)
        j_fd = jax.vmap(lambda e: richardson(fd(defects, x, e, 1), fd(defects, x, e, 2)))(eye_x).T
        return jax.grad(objective)(u), g_fd.reshape(u.shape), jax.jacfwd(defects)(x), j_fd

    grad, grad_fd, jac, jac_fd = check(u, x)
    assert_close(grad, grad_fd, rtol=1e-8, what="objective gradient (reverse mode)")
    assert_close(jac, jac_fd, rtol=1e-8, what="defect Jacobian (forward mode)")


@pytest.mark.parametrize("case", ["acrobot linear", "acrobot cubic", "floating arm"])
def test_stepwise_forward_mode_equals_forward_mode(case):
    """``forward_mode(stepwise=True)`` (the chain rule over the steps' Jacobians, the knots each
    step sees only) gives the Jacobian of plain forward mode through every stage, to rounding:
    of single shooting (one run over every interval: each step's window of knots) and of
    multiple shooting (segments starting at traced knots), with linear and cubic torques
    (whose slopes reach one knot back), on the acrobot and on a quaternion base. On the first,
    the rule is also vmapped (restarts), a tangent along the model falls back to plain forward
    mode, and reverse mode transposes the rule (against the plain problem's reverse mode through
    diffrax's checkpointed stages)."""
    if case == "floating arm":
        model = floating_arm()
        problem = trajopt.TrajectoryProblem(model, mbjax.neutral(model), 0.3 * jnp.ones(model.nv), 0.6, 4, substeps=2,
                                            solver=diffrax.Dopri5(), costs=[trajopt.Effort()])
    else:
        problem = make_problem()
        if case.endswith("cubic"):
            problem = trajopt.TrajectoryProblem(problem.model, problem.q0, problem.qd0, T, KNOTS, substeps=SUBSTEPS,
                                                interpolation="cubic", solver=diffrax.Dopri8(), costs=problem.costs)
    plain, stepwise = problem.forward_mode(), problem.forward_mode(stepwise=True)
    assert stepwise.stepwise and not plain.stepwise and stepwise.forward_mode(stepwise=True) is stepwise
    K, nu = problem.controls.shape
    single, multiple = trajopt.SingleShooting(), trajopt.MultipleShooting(K - 1)
    key = jax.random.PRNGKey(11)
    u = jax.random.normal(key, (K, nu))
    q_nodes = jax.vmap(lambda k: mbjax.random_configuration(problem.model, k))(jax.random.split(key, K - 2))
    z = multiple.initial_guess(problem, u, q_nodes, 0.4 * jax.random.normal(key, (K - 2, problem.model.nv)))
    x, unravel = jax.flatten_util.ravel_pytree(z)

    def flat(p, transcription, x):
        r = transcription.rollout(p, x)
        return jnp.concatenate([r.trajectory.q.ravel(), r.trajectory.qd.ravel(), r.defects])

    @jax.jit
    def jacobians(u, x):
        one = lambda p: jax.jacfwd(lambda v: flat(p, single, v))(u)  # noqa: E731
        many = lambda p: jax.jacfwd(lambda v: flat(p, multiple, unravel(v)))(x)  # noqa: E731
        return one(plain), one(stepwise), many(plain), many(stepwise)

    J1, S1, J2, S2 = jacobians(u, x)
    scale = max(float(jnp.max(jnp.abs(J1))), float(jnp.max(jnp.abs(J2))))
    assert_close(S1, J1, rtol=0, atol=1e-13 * scale, what=f"{case}: single shooting Jacobian")
    assert_close(S2, J2, rtol=0, atol=1e-13 * scale, what=f"{case}: multiple shooting Jacobian")
    if case != "acrobot linear":
        return
    # along a model parameter (a link mass) too: plain forward mode, the same values
    bump = jax.tree_util.tree_map(jnp.zeros_like, problem.model)
    bump = eqx.tree_at(lambda m: m.mass, bump, bump.mass.at[-1].set(1.0))

    def along_mass(p):
        move = lambda s: eqx.tree_at(lambda q: q.model, p, jax.tree_util.tree_map(  # noqa: E731
            lambda a, b: a + s * b, p.model, bump))
        return jax.jvp(lambda s: flat(move(s), single, u), (0.0,), (1.0,))[1]

    assert_close(jax.jit(lambda: along_mass(stepwise))(), jax.jit(lambda: along_mass(plain))(), rtol=1e-12,
                 what=f"{case}: d/d mass")
    # vmapped (the optimiser's restarts)
    us = jnp.stack([u, -0.5 * u])
    batched = lambda p: jax.vmap(jax.jacfwd(lambda v: flat(p, single, v)))(us)  # noqa: E731
    assert_close(jax.jit(lambda: batched(stepwise))(), jax.jit(lambda: batched(plain))(), rtol=0, atol=1e-13 * scale,
                 what=f"{case}: vmapped Jacobians")
    # reverse mode through the rule
    loss = lambda p, v: jnp.sum(jnp.sin(flat(p, single, v)))  # noqa: E731
    assert_close(jax.jit(jax.grad(lambda v: loss(stepwise, v)))(u), jax.jit(jax.grad(lambda v: loss(problem, v)))(u),
                 rtol=1e-12, what=f"{case}: gradient (reverse mode)")


def test_levenberg_marquardt_on_rosenbrock():
    """The default inner solver on Rosenbrock's function as residuals (10 (y - x^2), 1 - x),
    variables in a pytree: from (-1.2, 1) to the minimum (1, 1), ended by its gradient test
    before the step budget; a budget too small to get there reports no convergence; the auxiliary
    outputs returned are those of the result and of the starting point."""
    lm = trajopt.LevenbergMarquardt(rtol=1e-12, atol=1e-12)

    def residuals(z, a):
        return jnp.stack([10.0 * (z["y"] - z["x"] ** 2), a - z["x"]])

    solve = jax.jit(lambda z, n: lm.minimise(residuals, z, 1.0, n), static_argnums=1)
    start = {"x": jnp.asarray(-1.2), "y": jnp.asarray(1.0)}
    z, steps, converged = solve(start, 100)
    assert bool(converged) and 0 < int(steps) < 100, (converged, steps)
    assert_close(jnp.stack([z["x"], z["y"]]), jnp.ones(2), rtol=1e-10, what="Rosenbrock minimum")
    _, steps, converged = solve(start, 3)
    assert not bool(converged) and int(steps) == 3
    # with has_aux: the aux of the result and of the start (its first trial)
    with_aux = lambda z, a: (residuals(z, a), z["x"] + z["y"])  # noqa: E731
    z, _, _, aux, aux0 = jax.jit(lambda z: lm.minimise(with_aux, z, 1.0, 100, has_aux=True))(start)
    assert float(aux) == float(z["x"] + z["y"]) and float(aux0) == -1.2 + 1.0, (aux, aux0)
    # trial points where the residuals are not finite (a diverging simulation) are rejected
    diverging = lambda z, a: jnp.where(z > 2.0, jnp.nan, z - a)  # noqa: E731
    z, _, converged = jax.jit(lambda z: lm.minimise(diverging, z, 3.0, 30))(jnp.zeros(1))
    assert bool(jnp.all(jnp.isfinite(z))) and float(z[0]) <= 2.0 and not bool(converged), z


def test_rest_to_rest_swing_converges_and_resimulates(restarts):
    """Both restarts reach the goal; the best one, re-simulated with Dopri8 at rtol = atol =
    1e-12 (adaptive steps; the optimiser used 16 fixed Dopri8 steps), ends at rest at the goal."""
    problem, best, everything = restarts
    assert bool(jnp.all(everything.converged)), everything.violation
    assert float(jnp.max(everything.violation)) <= 1e-8
    assert trajopt.best_restart(everything) == int(jnp.argmin(everything.cost))
    check = best.resimulate(problem, rtol=1e-12, atol=1e-12)
    # the optimiser's model, 16 fixed Dopri8 steps, is off by its discretisation error: measured
    # 1.7e-6 rad/s at the end (fixed Tsit5 steps: 1.6e-4)
    assert_close(check.q[-1], Q_GOAL, rtol=0, atol=1e-5, what="final position")
    assert_close(check.qd[-1], jnp.zeros(2), rtol=0, atol=1e-5, what="final velocity")
    at_knots = jnp.isin(check.ts, problem.controls.ts)
    assert_close(check.q[at_knots], best.trajectory.q[::SUBSTEPS], rtol=0, atol=1e-5, what="trajectory at knots")
    assert float(jnp.max(jnp.abs(best.u))) <= LIMIT + 1e-8


def test_batched_restarts_do_not_interact(restarts):
    """A restart ends exactly as it would alone: run beside a copy of itself (the two stop
    together) it gives the iterations and torques it gave beside the other guess, which needs a
    different number of iterations (a converged restart is frozen while the other goes on). The
    other guess is the optimum itself, so that it stops first by construction."""
    problem, best, _ = restarts
    started = jnp.stack([guesses(2)[0], best.u])
    _, pair = trajopt.solve_restarts(problem, started, progress=False)
    assert int(pair.iterations[1]) < int(pair.iterations[0])
    for k, u0 in enumerate(started):
        _, twins = trajopt.solve_restarts(problem, jnp.stack([u0, u0]), progress=False)
        assert int(twins.iterations[0]) == int(twins.iterations[1]) == int(pair.iterations[k])
        assert_close(twins.u[0], pair.u[k], rtol=1e-10, what=f"restart {k}")


def test_fddp_reaches_the_levenberg_marquardt_optimum(restarts):
    """FDDP as the inner solver, from the first restart's guess: by single shooting, and by
    multiple shooting with a node at every knot started on the straight line to the goal (off
    the dynamics: the gaps close), it ends at the optimum Levenberg–Marquardt found from that
    guess (measured: 63 and 56 FDDP iterations against 136 Levenberg–Marquardt steps)."""
    problem, _, everything = restarts
    fddp = trajopt.FDDP(rtol=1e-8, atol=1e-8)
    u0 = guesses(2)[0]
    nodes = trajopt.MultipleShooting(KNOTS - 1)
    line = nodes.initial_guess(problem, u0, q=jnp.linspace(0.0, 1.0, KNOTS)[1:-1, None] * Q_GOAL,
                               qd=jnp.zeros((KNOTS - 2, 2)))
    for transcription, guess in ((None, u0), (nodes, line)):
        sol = trajopt.solve(problem, guess, transcription=transcription, optimiser=fddp, progress=False)
        assert bool(sol.converged) and float(sol.violation) <= 1e-8
        assert_close(sol.cost, everything.cost[0], rtol=1e-7, what="cost")
        assert_close(sol.u, everything.u[0], rtol=1e-6, what="optimal knot torques")


def test_multiple_shooting_with_velocity_limits_and_inexact_inner_solves():
    """Multiple shooting (2 segments) with an active velocity limit and at most 10
    Levenberg–Marquardt steps per outer iteration.

    - The inner solver stops short of convergence; the multipliers and the penalty must move
      anyway (inexact augmented Lagrangian: a stalled inner solve used to repeat itself at the
      same rho for ever), and the outer loop stops once the iterate is feasible and its cost
      has settled (measured: 9 outer iterations, 87 steps).
    - The limit of 1.5 rad/s on the first joint holds on the grid and is active (without it
      the swing peaks at 2.18 rad/s there).
    - The defects vanish: the stitched trajectory equals a single-shooting simulation of the
      optimal torques from the initial state.
    """
    limit = jnp.array([1.5, 3.0])
    problem = make_problem(constraints=[trajopt.TerminalState(Q_GOAL, jnp.zeros(2)),
                                        trajopt.TorqueLimits(-LIMIT, LIMIT), trajopt.VelocityLimits(-limit, limit)])
    shooting = trajopt.MultipleShooting(2)
    guess = shooting.initial_guess(problem, guesses(1)[0], q=Q_GOAL[None] / 2, qd=jnp.zeros((1, 2)))
    outer = trajopt.AugmentedLagrangian(iterations=30, cost_tolerance=1e-4)
    sol = trajopt.solve(problem, guess, transcription=shooting, constraints=outer, inner_steps=10, progress=False)
    assert bool(sol.converged) and float(sol.violation) <= 1e-8
    assert int(sol.outer_iterations) < 30 and int(sol.iterations) <= 10 * int(sol.outer_iterations)
    cost = np.asarray(sol.history[:int(sol.outer_iterations), 0])
    # the stopping rule under test: cost_tolerance=1e-4, the relative change over an outer iteration
    assert abs(cost[-1] - cost[-2]) <= 1e-4 * cost[-2]

    speed = np.max(np.abs(np.asarray(sol.trajectory.qd)), axis=0)
    assert np.all(speed <= np.asarray(limit) + 1e-8) and speed[0] >= 1.5 - 1e-6
    # between the grid's steps the fine re-simulation may pass the limit by a little (measured 1.5007)
    fine = np.max(np.abs(np.asarray(sol.resimulate(problem).qd)), axis=0)
    assert fine[0] <= 1.5 * 1.005

    defects = shooting.rollout(problem, sol.variables).defects
    assert float(jnp.max(jnp.abs(defects))) <= 1e-8
    single = trajopt.SingleShooting().rollout(problem, sol.u).trajectory
    # defects of up to 1e-8 (the tolerance), carried by the flow of the later segment
    assert_close(single.q, sol.trajectory.q, rtol=1e-7, what="stitched against single shooting")
    assert_close(single.qd, sol.trajectory.qd, rtol=1e-7, what="stitched velocities")


def test_optax_inner_solver_reduces_the_objective():
    """An optax optimiser in place of Levenberg–Marquardt (reverse-mode gradients): an
    unconstrained effort + terminal-cost problem improves."""
    import optax

    problem = make_problem(costs=[trajopt.Effort(weight=1e-2), trajopt.TerminalState(Q_GOAL, jnp.zeros(2))],
                           constraints=[])
    u0 = jnp.zeros((KNOTS, 2))
    sol = trajopt.solve(problem, u0, optimiser=optax.adam(0.5), inner_steps=200, progress=False)
    start = jnp.sum(problem.residuals(trajopt.SingleShooting().rollout(problem, u0))[0] ** 2)
    assert int(sol.iterations) == 200
    assert float(sol.cost) < 0.25 * float(start)  # measured 0.89 -> 0.18


def test_bad_input():
    problem = make_problem()
    with pytest.raises(ValueError, match="knot values have shape"):
        trajopt.solve(problem, jnp.zeros((KNOTS + 1, 2)), progress=False)
    with pytest.raises(ValueError, match="cannot share evenly"):
        trajopt.MultipleShooting(3).initial_guess(problem, jnp.zeros((KNOTS, 2)))
    with pytest.raises(ValueError, match="neither a joint name"):
        trajopt.TrajectoryProblem(problem.model, jnp.zeros(2), jnp.zeros(2), T, KNOTS, actuated=[2],
                                  costs=[trajopt.Effort()])
    with pytest.raises(ValueError, match="at least one cost"):
        trajopt.TrajectoryProblem(problem.model, jnp.zeros(2), jnp.zeros(2), T, KNOTS)
    for limits in (trajopt.TorqueLimits(lower=1.0, upper=-1.0), trajopt.VelocityLimits(-jnp.inf, jnp.inf)):
        with pytest.raises(ValueError, match="lower <= upper with at least one finite bound"):
            trajopt.TrajectoryProblem(problem.model, jnp.zeros(2), jnp.zeros(2), T, KNOTS, costs=[trajopt.Effort()],
                                      constraints=[limits])
    with pytest.raises(ValueError, match="expects"):
        trajopt.TrajectoryProblem(problem.model, jnp.zeros(3), jnp.zeros(2), T, KNOTS, costs=[trajopt.Effort()])
    with pytest.raises(ValueError, match="TerminalState needs"):
        trajopt.TerminalState()
    with pytest.raises(ValueError, match="iterations must be at least 1"):
        trajopt.AugmentedLagrangian(iterations=0)
