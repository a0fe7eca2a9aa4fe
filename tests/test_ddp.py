"""Feasibility-driven DDP (mbjax.trajopt.FDDP): its stage models against finite differences on
a free-floating model (quaternion base), one exact step on a linear-quadratic problem against a
dense least-squares solve, the regularisation's recovery from singular control curvature, and
the bad input it refuses (a term coupling distant knots among it). Its solves of the acrobot against
Levenberg–Marquardt's are in test_trajopt.py."""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax
from mbjax import trajopt
from mbjax.trajopt.ddp import Stages
from random_models import assert_close, floating_arm, richardson

KNOTS = 4


def test_stage_models_match_finite_differences():
    """At an iterate with open gaps (random knot states and torques), the stage models of
    :class:`Stages` agree with central differences (Richardson-extrapolated) of the objective
    ``1/2 |r|^2`` of the knot states, and of each interval's landing point:

    - ``[A_k B_k]``: the derivative of ``F_k(x_k (+) dx, u_{k+1} + dw) (-) x_{k+1}`` (tangent
      coordinates at the next knot state; quaternion base);
    - ``g``: the directional derivative of the objective along a random move of every knot
      state and knot value is ``sum_k g_k . d_k`` (each residual charged to one stage);
    - ``H``: the Gauss–Newton term ``sum_k d_k^T H_k d_k`` is ``|dr|^2`` along that move.
    """
    model = floating_arm()
    nv = model.nv
    costs = [trajopt.Effort(weight=0.3), trajopt.TerminalState(mbjax.neutral(model), jnp.zeros(nv), weight=2.0),
             trajopt.PathCost(lambda t, q, qd: jnp.concatenate([q[4:] * t, 0.2 * qd])),
             trajopt.TorqueLimits(-0.5, 0.5, weight=4.0)]
    problem = trajopt.TrajectoryProblem(model, mbjax.neutral(model), jnp.zeros(nv), 0.6, KNOTS, substeps=2,
                                        solver=diffrax.Dopri5(), costs=costs).forward_mode()
    shooting = trajopt.MultipleShooting(KNOTS - 1)
    keys = jax.random.split(jax.random.PRNGKey(3), 6)
    q_nodes = jax.vmap(lambda k: mbjax.random_configuration(model, k))(jax.random.split(keys[0], KNOTS - 2))
    z = shooting.initial_guess(problem, jax.random.normal(keys[1], problem.controls.shape), q_nodes,
                               0.5 * jax.random.normal(keys[2], (KNOTS - 2, nv)))
    residuals = lambda rollout: problem.residuals(rollout)[0]  # noqa: E731
    nu, n = 2, 2 * nv + 2
    # a move of every knot state (tangent; the first is fixed) and knot value
    dq = jnp.concatenate([jnp.zeros((1, nv)), jax.random.normal(keys[3], (KNOTS - 2, nv))])
    dqd = jnp.concatenate([jnp.zeros((1, nv)), jax.random.normal(keys[4], (KNOTS - 2, nv))])
    du = jax.random.normal(keys[5], (KNOTS, nu))
    h = 1e-4

    steps = jnp.array([h, -h, 2 * h, -2 * h])

    def central(values):  # Richardson-extrapolated central difference from values at `steps`
        return richardson((values[0] - values[1]) / (2 * h), (values[2] - values[3]) / (4 * h))

    @jax.jit
    def check(z):
        stages = Stages(problem, shooting, residuals, z)
        u, q, qd = stages.u, stages.q, stages.qd
        lin = stages.linearise(u, q, qd)
        ks = jnp.arange(KNOTS - 1)

        def end(k, dx):  # the end of interval k from its start moved along dx = (dq, dqd, du_k, du_{k+1})
            uu = u.at[k].add(dx[2 * nv:n]).at[k + 1].add(dx[n:])
            traj = problem.simulate(uu, mbjax.integrate(model, q[k], dx[:nv]), qd[k] + dx[nv:2 * nv], k, 1)
            return traj.q[-1], traj.qd[-1]

        # each interval's landing point in the tangent coordinates of the next knot state (the
        # last interval's: of its own end)
        q_end, qd_end = jax.vmap(lambda k: end(k, jnp.zeros(n + nu)))(ks)
        last = (ks == KNOTS - 2)[:, None]
        q_next = jnp.where(last, q_end, jnp.roll(q, -1, 0))
        qd_next = jnp.where(last, qd_end, jnp.roll(qd, -1, 0))

        def landing(k, dx):
            qe, qde = end(k, dx)
            return jnp.concatenate([mbjax.difference(model, q_next[k], qe), qde - qd_next[k], dx[n:]])

        moves = steps[:, None, None] * jnp.eye(n + nu)  # (4, n + nu, n + nu)
        AB_fd = jax.vmap(lambda k: central(jax.vmap(jax.vmap(lambda dx: landing(k, dx)))(moves)).T)(ks)

        def objective(s):  # the residuals with every knot state and value moved by s
            qs = jax.vmap(lambda a, b: mbjax.integrate(model, a, b))(q, s * dq)
            us = u + s * du
            grids = jax.vmap(lambda k: problem.simulate(us, qs[k], qd[k] + s * dqd[k], k, 1))(ks)
            Xq = jnp.concatenate([grids.q[:, :-1].reshape(-1, model.nq), grids.q[-1, -1:]])
            Xqd = jnp.concatenate([grids.qd[:, :-1].reshape(-1, nv), grids.qd[-1, -1:]])
            return stages.residual(us, Xq, Xqd)

        dr = central(jax.vmap(objective)(steps))
        d = jnp.concatenate([dq, dqd, du[:-1], du[1:]], 1)  # stage k: (dq, dqd, du_k, du_{k+1})
        d_end = lin.AB[-1] @ d[-1]  # the last knot state moves with the last interval
        model_g = jnp.einsum("kj,kj->", lin.g, d) + lin.g_end @ d_end
        model_H = jnp.einsum("ki,kij,kj->", d, lin.H, d) + d_end @ lin.H_end @ d_end
        r = objective(0.0)
        return lin, AB_fd, r @ dr, model_g, dr @ dr, model_H

    lin, AB_fd, g_fd, g_model, H_fd, H_model = check(z)
    assert float(jnp.max(jnp.abs(lin.gap))) > 0.1  # the gaps are open
    assert_close(lin.AB, AB_fd, rtol=1e-8, what="[A B] of the intervals")
    assert_close(g_model, g_fd, rtol=1e-8, what="directional derivative of the objective")
    assert_close(H_model, H_fd, rtol=1e-7, what="Gauss-Newton curvature along the move")


GOAL = jnp.array([1.0, -0.5])


def cart_problem(costs):
    """A cart with two prismatic axes, horizontal (gravity does no work) and viscously damped:
    linear dynamics; 6 knots over 2 s."""
    b = mbjax.ModelBuilder("cart")
    b.add_body("x", joint="prismatic", axis=(1, 0, 0), mass=2.0, inertia=0.1 * np.eye(3), damping=0.3)
    b.add_body("y", parent="x", joint="prismatic", axis=(0, 1, 0), mass=0.5, inertia=0.1 * np.eye(3), damping=0.1)
    return trajopt.TrajectoryProblem(b.build(), jnp.zeros(2), jnp.zeros(2), 2.0, 6, substeps=3,
                                     solver=diffrax.Dopri5(), costs=costs)


def test_one_step_solves_a_linear_quadratic_problem():
    """The cart (linear dynamics) and quadratic costs: FDDP without regularisation reaches the
    minimum in one step, from torques alone (single shooting) and from knot states far off the
    dynamics (multiple shooting: the full step closes the gaps), and it is the dense
    least-squares solution of the single-shooting residuals (affine in the torques) to 1e-10."""
    problem = cart_problem([trajopt.Effort(weight=1e-2), trajopt.TerminalState(GOAL, jnp.zeros(2), weight=10.0),
                            trajopt.PathCost(lambda t, q, qd: 0.3 * qd)])
    single, multiple = trajopt.SingleShooting(), trajopt.MultipleShooting(5)
    residuals = lambda rollout: problem.residuals(rollout)[0]  # noqa: E731
    fddp = trajopt.FDDP(rtol=1e-10, atol=1e-10, damping=0.0)
    solve = eqx.filter_jit(lambda tr, z: fddp.minimise(problem.forward_mode(), tr, residuals, z, 5))

    def r(u):
        return residuals(single.rollout(problem.forward_mode(), u))

    u0 = jnp.zeros(problem.controls.shape)
    J = jax.jacfwd(r)(u0).reshape(-1, u0.size)
    expected = np.linalg.lstsq(np.asarray(J), -np.asarray(r(u0)), rcond=None)[0].reshape(u0.shape)

    u, steps, converged, _, _ = solve(single, u0)
    assert bool(converged) and int(steps) == 1, (converged, steps)
    assert_close(u, expected, rtol=1e-10, what="single shooting")
    far = multiple.initial_guess(problem, u0, q=jnp.ones((4, 2)), qd=-jnp.ones((4, 2)))
    z, steps, converged, rollout, start = solve(multiple, far)
    # the rollout of the start (FDDP's first pass, a forward pass without a step) is the
    # transcription's, with its gaps open
    before = multiple.rollout(problem, far)
    assert float(jnp.max(jnp.abs(before.defects))) > 0.5  # the gaps are open
    assert_close(start.trajectory.q, before.trajectory.q, rtol=1e-13, what="start, multiple")
    assert_close(start.defects, before.defects, rtol=1e-13, what="start's defects")
    assert bool(converged) and int(steps) == 1, (converged, steps)
    assert_close(z.u, expected, rtol=1e-10, what="multiple shooting from an infeasible start")
    assert float(jnp.max(jnp.abs(multiple.rollout(problem, z).defects))) <= 1e-12
    # the rollout FDDP returns is the transcription's rollout of its result
    again = multiple.rollout(problem, z)
    assert_close(rollout.trajectory.q, again.trajectory.q, rtol=1e-13, what="returned rollout")
    assert_close(rollout.defects, again.defects, rtol=0, atol=1e-13, what="returned defects")


def test_singular_control_curvature_raises_the_regularisation():
    """Without an effort cost and without regularisation (``damping=0``), ``Q_uu`` of the last
    stages is singular and the first gains are not finite: the regularisation must grow until
    they are (it once stayed put, and the solve stalled at its start for every step), then
    fall again; the terminal target is then reached exactly."""
    problem = cart_problem([trajopt.TerminalState(GOAL, jnp.zeros(2), weight=10.0)])
    single = trajopt.SingleShooting()
    residuals = lambda rollout: problem.residuals(rollout)[0]  # noqa: E731
    fddp = trajopt.FDDP(damping=0.0)
    u, steps, converged, _, _ = eqx.filter_jit(lambda u: fddp.minimise(
        problem.forward_mode(), single, residuals, u, 30))(jnp.zeros(problem.controls.shape))
    assert bool(converged) and int(steps) < 30, (converged, steps)
    assert float(jnp.max(jnp.abs(residuals(single.rollout(problem, u))))) <= 1e-8


class Periodic(trajopt.Term):
    """The joint angles at the end equal to those at the start."""

    def residual(self, problem, rollout):
        return rollout.trajectory.q[-1, 7:] - rollout.trajectory.q[0, 7:]


def test_bad_input():
    model = floating_arm()
    cubic = trajopt.TrajectoryProblem(model, mbjax.neutral(model), jnp.zeros(model.nv), 1.0, KNOTS,
                                      costs=[trajopt.Effort()], interpolation="cubic")
    fddp = trajopt.FDDP(rtol=1e-8, atol=1e-8)
    with pytest.raises(ValueError, match="linear between knots"):
        trajopt.solve(cubic, jnp.zeros(cubic.controls.shape), optimiser=fddp, progress=False)
    linear = trajopt.TrajectoryProblem(model, mbjax.neutral(model), jnp.zeros(model.nv), 1.0, 5,
                                       costs=[trajopt.Effort()])
    # a term that couples the first and the last knot cannot be split into stages
    periodic = trajopt.TrajectoryProblem(model, mbjax.neutral(model), jnp.zeros(model.nv), 1.0, KNOTS,
                                         costs=[trajopt.Effort(), Periodic()])
    with pytest.raises(Exception, match="couples knots more than one interval apart"):
        trajopt.solve(periodic, jnp.zeros(periodic.controls.shape), optimiser=fddp, progress=False)
    with pytest.raises(ValueError, match=r"MultipleShooting\(4\)"):
        trajopt.solve(linear, jnp.zeros(linear.controls.shape), transcription=trajopt.MultipleShooting(2),
                      optimiser=fddp, progress=False)
