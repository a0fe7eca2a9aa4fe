"""Direct collocation (mbjax.trajopt.collocation, stagewise, interior_point, block_tridiagonal).

- The block-tridiagonal factorisation against a dense solve and dense eigenvalues.
- The stage derivatives the solver uses (exact Hessians assembled by the chain rule through the
  dynamics points) against ``jax.hessian`` of the whole stage Lagrangian, and their Jacobians
  against central differences: Hermite–Simpson with inverse dynamics on a body on a spherical
  joint (the retraction on quaternions), trapezoidal with forward dynamics on the acrobot.
- A swing of the acrobot: the inverse-dynamics and forward-dynamics forms reach the same optimum
  (two formulations, RNEA and ABA), the solution re-simulated by Dopri8 at 1e-12 lands where
  collocation says, within the interval error estimate, and Hermite–Simpson's error falls at
  fourth order with the number of intervals; vmapped restarts and vmapped initial states equal
  single solves.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax
from mbjax import trajopt
from mbjax.trajopt import block_tridiagonal
from random_models import TreeSpec, assert_close, build_model, richardson


def test_block_tridiagonal_solve_and_inertia():
    """Solve, inertia and product against the dense matrix, with upper blocks as wide as the
    diagonal ones and with only their first columns coupled (the interior point's case)."""
    rng = np.random.default_rng(0)
    n, m = 7, 5
    for c in (m, 2):
        D = rng.normal(size=(n, m, m))
        D = D + np.swapaxes(D, 1, 2) + np.diag(rng.normal(scale=3.0, size=m))  # symmetric, indefinite
        U = rng.normal(size=(n - 1, m, c))
        A = np.zeros((n * m, n * m))
        for k in range(n):
            A[k * m:(k + 1) * m, k * m:(k + 1) * m] = D[k]
        for k in range(n - 1):
            A[k * m:(k + 1) * m, (k + 1) * m:(k + 1) * m + c] = U[k]
            A[(k + 1) * m:(k + 1) * m + c, k * m:(k + 1) * m] = U[k].T
        r = rng.normal(size=(n, m))
        lus, negative = block_tridiagonal.factor(jnp.asarray(D), jnp.asarray(U))
        x = block_tridiagonal.solve(lus, jnp.asarray(U), jnp.asarray(r))
        assert_close(x.reshape(-1), np.linalg.solve(A, r.reshape(-1)), 1e-10, what=f"solve, c = {c}")
        assert int(negative) == int(np.sum(np.linalg.eigvalsh(A) < 0))
        assert_close(block_tridiagonal.matvec(jnp.asarray(D), jnp.asarray(U), jnp.asarray(r)).reshape(-1),
                     A @ r.reshape(-1), 1e-13, what=f"matvec, c = {c}")


def test_inertia_count_of_kkt_like_blocks():
    """Sturm's count of negative eigenvalues against numpy's eigenvalues: random symmetric
    matrices of many sizes, interior-point KKT blocks [[H, J^T], [J, -1e-9 I]] (as many negative
    eigenvalues as J has rows when H is positive definite), and a singular matrix, whose zero
    eigenvalue counts as negative (so that the caller regularises it)."""
    rng = np.random.default_rng(1)
    for m in (1, 2, 5, 24):
        S = rng.normal(size=(30, m, m))
        S = S + np.swapaxes(S, 1, 2)
        assert int(block_tridiagonal.negative_eigenvalues(jnp.asarray(S))) == int(np.sum(np.linalg.eigvalsh(S) < 0))
    H = rng.normal(size=(10, 12, 12))
    H = H @ np.swapaxes(H, 1, 2) + 1e-3 * np.eye(12)
    J = rng.normal(size=(10, 6, 12))
    kkt = np.block([[H, np.swapaxes(J, 1, 2)], [J, np.broadcast_to(-1e-9 * np.eye(6), (10, 6, 6))]])
    assert int(block_tridiagonal.negative_eigenvalues(jnp.asarray(kkt))) == 10 * 6
    singular = np.diag([2.0, 0.0, 3.0])
    assert int(block_tridiagonal.negative_eigenvalues(jnp.asarray(singular))) == 1

# ------------------------------------------------------------------ stage derivatives
Q_GOAL = jnp.array([0.8, -0.5])


def acrobot_problem(knots):
    """The acrobot (both joints driven) from rest to rest at Q_GOAL in 1 s, least effort, torques
    bounded so that the bounds are active."""
    model = mbjax.load_bundled("acrobot")
    return trajopt.TrajectoryProblem(model, jnp.zeros(2), jnp.zeros(2), 1.0, knots, costs=[trajopt.Effort(weight=1e-2)],
                                     constraints=[trajopt.TerminalState(Q_GOAL, jnp.zeros(2)),
                                                  trajopt.TorqueLimits(-12.0, 12.0)])


SPHERICAL = TreeSpec(parents=(-1,), joints=("spherical",), armature=(True,), limited=(False,), frames=(), seed=3)


def spherical_problem(knots=4):
    """A body on a spherical joint (the retraction on a quaternion), every kind of term."""
    model = build_model(SPHERICAL)
    q0 = mbjax.random_configuration(model, jax.random.PRNGKey(1))
    goal = mbjax.random_configuration(model, jax.random.PRNGKey(2))
    return trajopt.TrajectoryProblem(
        model, q0, jnp.zeros(model.nv), 0.6, knots,
        costs=[trajopt.Effort(weight=0.3), trajopt.TerminalState(goal, jnp.zeros(model.nv), weight=2.0),
               trajopt.PathCost(lambda t, q, qd: jnp.concatenate([jnp.sin(3 * t) * q[1:], 0.2 * qd]))],
        constraints=[trajopt.TerminalState(goal, None, dofs=(0, 2)), trajopt.TorqueLimits(-5.0, 5.0)])


@pytest.mark.parametrize("scheme, make", [(trajopt.HermiteSimpson("inverse"), spherical_problem),
                                          (trajopt.Trapezoidal("forward"), lambda: acrobot_problem(4))],
                         ids=["hs-inverse-spherical", "trap-forward-acrobot"])
def test_stage_derivatives_are_exact(scheme, make):
    problem = make()
    nlp = scheme.nlp(problem)
    rng = np.random.default_rng(5)
    K, nt = nlp.lower.shape
    w = scheme.initial_guess(problem, u=rng.normal(size=problem.controls.shape))
    w = jax.vmap(nlp.retract)(w, jnp.asarray(rng.normal(scale=0.3, size=(K, nt))))  # off the straight path
    _, d, e = nlp.values(w)
    lam, nu = jnp.asarray(rng.normal(size=d.shape)), jnp.asarray(rng.normal(size=e.shape))
    gi, J, Hi, gn, E, Hn = eqx.filter_jit(lambda nlp, *a: nlp.derivatives(*a))(nlp, w, lam, nu)

    def interval(k, dx):
        cost, base, z = nlp.interval(nlp.retract(w[k], dx[:nt]), nlp.retract(w[k + 1], dx[nt:]), k)
        return cost, nlp.equalities((cost, base, z))

    def node(k, dx):
        parts = nlp.node(nlp.retract(w[k], dx), k)
        return parts[0], nlp.equalities(parts) * nlp.node_mask[k]

    # the reference: jax.hessian of each whole stage's Lagrangian, at every stage in one program
    @jax.jit
    def reference():
        hess_i = jax.vmap(lambda k: jax.hessian(lambda x: (lambda c, eq: c + lam[k] @ eq)(*interval(k, x)))(
            jnp.zeros(2 * nt)))(jnp.arange(K - 1))
        hess_n = jax.vmap(lambda k: jax.hessian(lambda x: (lambda c, eq: c + nu[k] @ eq)(*node(k, x)))(
            jnp.zeros(nt)))(jnp.arange(K))
        return hess_i, hess_n

    hess_i, hess_n = reference()
    assert_close(Hi, hess_i, 1e-11, what="interval Hessians")
    assert_close(Hn, hess_n, 1e-11, what="node Hessians")

    # first derivatives against Richardson-extrapolated central differences in the tangent space
    def central(f, n, h):
        steps = h * np.eye(n)
        plus, minus = jax.vmap(f)(steps), jax.vmap(f)(-steps)
        return jax.tree.map(lambda a, b: jnp.moveaxis((a - b) / (2 * h), 0, -1), plus, minus)

    f_int = jax.jit(lambda x: interval(1, x))
    f_node = jax.jit(lambda x: node(K - 1, x))
    for f, n, grad, jac, what in ((f_int, 2 * nt, gi[1], J[1], "interval"), (f_node, nt, gn[-1], E[-1], "node")):
        fd = jax.tree.map(richardson, central(f, n, 1e-4), central(f, n, 2e-4))
        assert_close(grad, fd[0], 1e-8, what=f"{what} cost gradient")
        assert_close(jac, fd[1], 1e-8, what=f"{what} Jacobian")


# ------------------------------------------------------------------ solving
@pytest.fixture(scope="module")
def swings():
    return {n: trajopt.solve(acrobot_problem(n + 1), transcription=trajopt.HermiteSimpson()) for n in (6, 12)}


def end_error(problem, solution):
    traj = solution.resimulate(problem)
    return np.abs(np.concatenate([np.asarray(mbjax.difference(problem.model, Q_GOAL, traj.q[-1])),
                                  np.asarray(traj.qd[-1])])).max()


def test_swing_converges_and_matches_resimulation(swings):
    errors = {}
    for n, solution in swings.items():
        assert bool(solution.converged) and float(solution.violation) < 1e-9, solution.summary()
        assert np.all(np.abs(np.asarray(solution.u)) <= 12.0 + 1e-9)
        errors[n] = end_error(acrobot_problem(n + 1), solution)
        # the estimate bounds the actual error of the re-simulated trajectory in order of magnitude
        estimate = np.asarray(solution.interval_errors).sum(axis=0).max()
        assert errors[n] <= 10 * estimate, (n, errors[n], estimate)
    # fourth order: twice the intervals, about 16 times smaller error
    assert errors[12] < errors[6] / 8, errors


def test_inverse_and_forward_dynamics_reach_the_same_optimum(swings):
    problem = acrobot_problem(7)
    forward = trajopt.solve(problem, transcription=trajopt.HermiteSimpson("forward"))
    inverse = swings[6]
    assert bool(forward.converged), forward.summary()
    assert_close(forward.cost, inverse.cost, 1e-8, what="cost")
    assert_close(forward.variables, inverse.variables, 1e-6, what="knots")


def test_trapezoidal_batched_restarts_and_initial_states():
    problem = acrobot_problem(9)
    scheme = trajopt.Trapezoidal()
    rng = np.random.default_rng(2)
    guesses = jnp.asarray(rng.uniform(-5, 5, size=(2, *problem.controls.shape)))
    best, every = trajopt.solve_restarts(problem, guesses, transcription=scheme)
    assert np.all(np.asarray(every.converged))
    alone = trajopt.solve(problem, guesses[1], transcription=scheme)
    assert_close(every.variables[1], alone.variables, 1e-12, what="restart 1 alone")
    assert int(every.iterations[1]) == int(alone.iterations)
    assert float(best.cost) == float(np.min(np.asarray(every.cost)))
    # second order: the re-simulated end state is off by the estimate's order of magnitude
    assert end_error(problem, alone) <= 10 * np.asarray(alone.interval_errors).sum(axis=0).max()
    # from two initial states at once, each as if alone
    q0 = jnp.array([[0.0, 0.0], [0.3, -0.2], [-0.2, 0.1]])
    batch = trajopt.solve_batch(problem, q0, transcription=scheme, warm_start=False)
    moved = trajopt.solve(eqx.tree_at(lambda p: p.q0, problem, q0[1]), transcription=scheme)
    assert np.all(np.asarray(batch.converged))
    assert_close(batch.variables[1], moved.variables, 1e-12, what="initial state 1 alone")
    assert_close(batch.trajectory.q[:, 0], q0, 1e-12, what="initial states")
    # vmapped two at a time (as on an accelerator; the last pair padded): the same, each to its
    # own iteration count
    paired = trajopt.solve_batch(problem, q0, transcription=scheme, chunk=2, warm_start=False)
    assert_close(paired.variables, batch.variables, 1e-12, what="vmapped pairs")
    np.testing.assert_array_equal(np.asarray(paired.iterations), np.asarray(batch.iterations))
    with pytest.raises(ValueError, match="chunk must be an integer from 1 to the batch size 3"):
        trajopt.solve_batch(problem, q0, transcription=scheme, chunk=4)
    with pytest.raises(ValueError, match=r"qd0 must have shape \(2,\) or \(3, 2\); got \(2, 2\)"):
        trajopt.solve_batch(problem, q0, jnp.zeros((2, 2)), transcription=scheme)


def test_batch_warm_started_by_continuation():
    """``solve_batch``'s default: the first problem from its own guess, each next from its
    nearest solved neighbour's knots and multipliers. Every result is an optimum of its own
    problem (solved again alone from its knots, cold, it stays there), reached in far fewer
    iterations than from its own guess; vmapped two at a time it reaches the same optima; a
    warm start that fails (a budget of one iteration) is solved again cold, as if alone."""
    problem = acrobot_problem(9)
    scheme = trajopt.Trapezoidal()
    q0 = jnp.array([[0.0, 0.0], [0.06, -0.04], [0.02, -0.01], [0.1, -0.06], [0.04, -0.03]])
    warm = trajopt.solve_batch(problem, q0, transcription=scheme, progress=False)
    cold = trajopt.solve_batch(problem, q0, transcription=scheme, warm_start=False, progress=False)
    assert np.all(np.asarray(warm.converged)) and float(np.max(np.asarray(warm.violation))) < 1e-9
    assert_close(warm.trajectory.q[:, 0], q0, 1e-12, what="initial states")
    assert_close(warm.variables[0], cold.variables[0], 1e-12, what="the first problem, from its own guess")
    its_warm, its_cold = np.asarray(warm.iterations), np.asarray(cold.iterations)
    assert its_warm[1:].sum() < its_cold[1:].sum() / 2, (its_warm, its_cold)
    for i in range(1, len(q0)):
        alone = trajopt.solve(eqx.tree_at(lambda p: p.q0, problem, q0[i]), warm.variables[i], transcription=scheme)
        assert bool(alone.converged)
        assert_close(alone.variables, warm.variables[i], 1e-6, what=f"problem {i} solved again from its optimum")
    paired = trajopt.solve_batch(problem, q0, transcription=scheme, chunk=2, progress=False)
    assert np.all(np.asarray(paired.converged))
    assert_close(paired.cost, warm.cost, 1e-9, what="costs, vmapped in pairs")
    fallback = trajopt.solve_batch(problem, q0, transcription=scheme, optimiser=trajopt.InteriorPoint(warm_max_iter=1),
                                   progress=False)
    assert_close(fallback.variables, cold.variables, 1e-12, what="failed warm starts solved again cold")
    np.testing.assert_array_equal(np.asarray(fallback.iterations), its_cold + np.array([0, 1, 1, 1, 1]))


def test_continuation_order():
    """Prim's order from the first problem: each problem after it comes with its nearest problem
    solved before it (in groups of ``width``)."""
    from mbjax.trajopt import continuation
    points = continuation.features(np.array([0.0, 3.0, 1.0, 2.0, 5.0]), np.full(5, 7.0))
    assert points.shape == (5, 1)  # the constant column dropped
    groups = continuation.order(points)
    assert [(g.tolist(), p.tolist()) for g, p in groups] == [([0], [-1]), ([2], [0]), ([3], [2]), ([1], [3]), ([4], [1])]
    pairs = continuation.order(points, width=2)
    assert [(g.tolist(), p.tolist()) for g, p in pairs] == [([0], [-1]), ([2, 3], [0, 0]), ([1, 4], [3, 3])]


def test_batch_of_models():
    """``solve_batch(problem, models=...)``: the swing of two acrobots whose second link is 30 %
    lighter and heavier, in one call, each as the same problem built on that model alone; with
    initial states too; a model batch that is not the problem's model is refused."""
    problem = acrobot_problem(9)
    scheme = trajopt.Trapezoidal()
    scale = jnp.array([[1.0, 0.7], [1.0, 1.3]])
    models = jax.vmap(lambda s: eqx.tree_at(lambda m: m.mass, problem.model, problem.model.mass * s))(scale)
    batch = trajopt.solve_batch(problem, models=models, transcription=scheme, warm_start=False, progress=False)
    assert np.all(np.asarray(batch.converged))
    heavy = trajopt.solve(eqx.tree_at(lambda p: p.model, problem, jax.tree.map(lambda x: x[1], models)),
                          transcription=scheme)
    assert_close(batch.variables[1], heavy.variables, 1e-12, what="the heavier acrobot alone")
    assert float(batch.cost[1]) > float(batch.cost[0])  # a heavier link takes more effort
    q0 = jnp.array([[0.0, 0.0], [0.3, -0.2]])
    both = trajopt.solve_batch(problem, q0, models=models, transcription=scheme, chunk=2, warm_start=False,
                               progress=False)
    moved = trajopt.solve(eqx.tree_at(lambda p: (p.model, p.q0), problem, (jax.tree.map(lambda x: x[1], models), q0[1])),
                          transcription=scheme)
    assert_close(both.variables[1], moved.variables, 1e-12, what="model and initial state 1 alone, vmapped in pairs")
    with pytest.raises(ValueError, match="leading batch axis on every array leaf"):
        trajopt.solve_batch(problem, models=problem.model, transcription=scheme)
    with pytest.raises(ValueError, match=r"q0 must have shape \(2, 2\)"):
        trajopt.solve_batch(problem, jnp.zeros((3, 2)), models=models, transcription=scheme)


def test_bad_input():
    problem = acrobot_problem(5)
    with pytest.raises(ValueError, match="unknown dynamics"):
        trajopt.HermiteSimpson("implicit")
    with pytest.raises(TypeError, match="InteriorPoint"):
        trajopt.solve(problem, transcription=trajopt.HermiteSimpson(), optimiser=object())
    with pytest.raises(TypeError, match="collocation takes"):
        trajopt.solve(problem, transcription=trajopt.HermiteSimpson(), constraints=trajopt.AugmentedLagrangian())
    closed = trajopt.TrajectoryProblem(problem.model, jnp.zeros(2), jnp.zeros(2), 1.0, 5, costs=[trajopt.Effort()],
                                       method=lambda model, q, qd, tau: mbjax.aba(model, q, qd, tau))
    with pytest.raises(ValueError, match="use dynamics='forward'"):
        trajopt.HermiteSimpson().nlp(closed)
    ball = spherical_problem()
    limited = trajopt.TrajectoryProblem(ball.model, ball.q0, ball.qd0, 0.6, 4, costs=[trajopt.Effort()],
                                        constraints=[trajopt.PositionLimits(-1.0, 1.0)])
    with pytest.raises(ValueError, match="revolute and prismatic joints only"):
        trajopt.HermiteSimpson().nlp(limited)
    with pytest.raises(TypeError, match="collocation takes Effort"):
        trajopt.HermiteSimpson().nlp(trajopt.TrajectoryProblem(
            problem.model, jnp.zeros(2), jnp.zeros(2), 1.0, 5, costs=[trajopt.TorqueLimits(-1.0, 1.0)]))
