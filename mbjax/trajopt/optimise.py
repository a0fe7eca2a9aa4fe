"""``solve`` and ``solve_restarts``: direct shooting with an inner solver (mbjax's, optimistix's or optax's)
inside an augmented-Lagrangian outer loop, batched over initial guesses with ``vmap``.

Each outer iteration is one compiled program (vmapped over the restarts of
``solve_restarts``): the inner solver minimises the augmented Lagrangian of every restart from
its current variables, then the multipliers are updated. Restarts that have converged are
frozen (the vmapped update leaves them unchanged), so a restart ends as it would alone. The
outer loop runs in Python with a progress bar, and stops when every restart has converged or
after ``constraints.iterations`` updates.

**Inner solvers.**

- :class:`LevenbergMarquardt` (default), or an optimistix least-squares solver
  (``optx.LevenbergMarquardt``, ``optx.GaussNewton``): the augmented Lagrangian is a sum of
  squares, and its Jacobian is formed in forward mode (one JVP per decision variable). A
  second-order method converges in tens of iterations where first-order ones need thousands.
  mbjax's evaluates each trial point with its Jacobian, so its compiled program holds the
  simulation once, differentiated (optimistix's holds it three times: panda point to point
  compiles in 3.3 s instead of 5.9 s).
- :class:`FDDP`: feasibility-driven DDP over the knot intervals (single shooting, or multiple
  shooting with a node at every knot), its stage models in forward mode.
- An optimistix minimiser (``optx.BFGS``, ...) or an optax optimiser (``optax.adam(1e-2)``):
  gradients in reverse mode through the simulation; with optax, ``inner_steps`` updates per
  outer iteration.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import optimistix as optx

from ..checks import default_tolerance
from ..compilation import CLASSIC_EMITTERS, cpu_options
from ..progress import Progress
from ..simulation.trajectory import Trajectory
from .collocation import Collocation, HermiteSimpson
from .ddp import FDDP
from . import continuation
from .interior_point import InteriorPoint, InteriorPointStart
from .lagrangian import AugmentedLagrangian, Multipliers, violation
from .levenberg_marquardt import LevenbergMarquardt
from .problem import TrajectoryProblem
from .costs import Rollout
from .shooting import SingleShooting
from .solution import Solution


#: the shooting solver's default step budget per outer iteration
INNER_STEPS = 100


class _State(eqx.Module):
    z: object
    rollout: Rollout  # of z
    opt_state: object
    multipliers: Multipliers
    cost: jax.Array
    violation: jax.Array
    iterations: jax.Array
    outer_iterations: jax.Array
    done: jax.Array


def _init(problem, transcription, optimiser, method: AugmentedLagrangian, z):
    if isinstance(optimiser, (LevenbergMarquardt, FDDP)):
        # their first pass evaluates z itself: the first outer step takes z's rollout from it, and
        # the simulation is not compiled a second time, alone (0.9-1.4 s of the shooting examples)
        rollout = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), jax.eval_shape(transcription.rollout, problem, z))
        cost, eq, ineq = jax.eval_shape(problem.residuals, rollout)
        nan = jnp.full((), jnp.nan, cost.dtype)
        cost, v = nan, nan
    else:
        rollout = transcription.rollout(problem, z)
        cost, eq, ineq = problem.residuals(rollout)
        cost, v = jnp.sum(cost**2), violation(eq, ineq)
    opt_state = optimiser.init(z) if isinstance(optimiser, optax.GradientTransformation) else None
    zero = jnp.zeros((), jnp.int32)
    return _State(z, rollout, opt_state, method.init(eq, ineq), cost, v, zero, zero, jnp.zeros((), bool))


def _outer_step(problem, transcription, optimiser, method: AugmentedLagrangian, inner_steps: int, state: _State):
    m = state.multipliers
    if isinstance(optimiser, (optx.AbstractGaussNewton, LevenbergMarquardt)):  # whole Jacobians in forward mode,
        # step by step where that pushes at most half as many tangents through the solver's
        # stages (panda's point to point: 28 for 105 variables, the rollout's Jacobian 1.5x
        # faster; the reorientation: 41 for 63, the same time per step, 280 steps instead of 260
        # in session 27)
        variables = sum(x.size for x in jax.tree_util.tree_leaves(state.z))
        problem = problem.forward_mode(stepwise=2 * problem.step_tangents <= variables)
    elif isinstance(optimiser, FDDP):  # each interval's Jacobian (as many tangents as the chain rule's)
        problem = problem.forward_mode()

    def merit_and_rollout(z, m):
        rollout = transcription.rollout(problem, z)
        return method.residuals(*problem.residuals(rollout), m), rollout

    def merit(z, m):
        return merit_and_rollout(z, m)[0]

    rollout = None  # LevenbergMarquardt and FDDP return the rollout of their result
    if isinstance(optimiser, (LevenbergMarquardt, FDDP)):
        if isinstance(optimiser, LevenbergMarquardt):
            z, steps, ok, rollout, start = optimiser.minimise(merit_and_rollout, state.z, m, inner_steps, has_aux=True)
        else:
            z, steps, ok, rollout, start = optimiser.minimise(
                problem, transcription, lambda r: method.residuals(*problem.residuals(r), m), state.z, inner_steps)
        opt_state = None
        cost, eq, ineq = problem.residuals(start)  # the rollout of state.z, missing from _init's state
        first = state.outer_iterations == 0
        state = eqx.tree_at(lambda s: (s.cost, s.violation), state,
                            (jnp.where(first, jnp.sum(cost**2), state.cost),
                             jnp.where(first, violation(eq, ineq), state.violation)))
    elif isinstance(optimiser, optax.GradientTransformation):
        def update(carry, _):
            z, s = carry
            g = jax.grad(lambda z: jnp.sum(merit(z, m) ** 2))(z)
            step, s = optimiser.update(g, s, z)
            return (optax.apply_updates(z, step), s), None

        (z, opt_state), _ = jax.lax.scan(update, (state.z, state.opt_state), None, length=inner_steps)
        steps, ok = jnp.asarray(inner_steps, jnp.int32), jnp.asarray(True)
    else:
        sol = optx.least_squares(merit, optimiser, state.z, m, options={"jac": "fwd"},
                                 max_steps=inner_steps, throw=False)
        z, opt_state = sol.value, None
        steps, ok = sol.stats["num_steps"].astype(jnp.int32), sol.result == optx.RESULTS.successful
    rollout = transcription.rollout(problem, z) if rollout is None else rollout
    cost, eq, ineq = problem.residuals(rollout)
    after, cost = violation(eq, ineq), jnp.sum(cost**2)
    tolerance, cost_tolerance = method.tolerances(cost.dtype)
    stationary = jnp.abs(cost - state.cost) <= cost_tolerance * jnp.abs(state.cost)
    done = (after <= tolerance) & (ok | stationary)
    # inexact augmented Lagrangian: the multipliers and the penalty move after every inner solve
    # that leaves the constraints violated, converged or out of steps (else a stalled inner
    # solve would repeat itself); a non-finite one keeps them
    keep = done | ~jnp.isfinite(after)
    new_m = jax.tree.map(lambda a, b: jnp.where(keep, a, b), m, method.update(m, eq, ineq, state.violation, after))
    new = _State(z, rollout, opt_state, new_m, cost, after, state.iterations + steps, state.outer_iterations + 1,
                 done)
    return jax.tree.map(lambda old, upd: jnp.where(state.done, old, upd), state, new)


@functools.cache
def _programs(batched: bool):
    """The compiled (init, outer step), made once so that their caches persist across calls: plain
    for a single guess (re-batching the solver's loops costs twice the tracing time), or vmapped
    over the restarts' leading axis; with mbjax's XLA options (:func:`mbjax.compilation.cpu_options`:
    the classic loop emitters, which compile them faster, panda point to point's outer step in 3.9
    s instead of 5.6 s; YNNPACK for dots only, which runs the shooting Jacobians' stage sums and
    small reductions as XLA's own loops: an outer step of 20 Levenberg–Marquardt steps 0.82-1.24
    s instead of 1.04-1.59 s on the free-floating reorientation, 0.41-0.61 s instead of 0.58-0.73
    s on panda, the same programs interleaved)."""
    options = cpu_options()
    if not batched:
        return tuple(eqx.filter_jit(f, compiler_options=options) for f in (_init, _outer_step))
    return tuple(eqx.filter_jit(eqx.filter_vmap(f, in_axes=(None,) * (n - 1) + (0,)), compiler_options=options)
                 for f, n in ((_init, 5), (_outer_step, 6)))


def _optimise(problem, z, transcription, optimiser, constraints, inner_steps, progress, batched) -> Solution:
    if not isinstance(problem, TrajectoryProblem):
        raise TypeError(f"problem must be a TrajectoryProblem; got {type(problem).__name__}")
    transcription = SingleShooting() if transcription is None else transcription
    if optimiser is None:
        tol = default_tolerance(problem.q0.dtype, 1e-8, 1000)
        optimiser = LevenbergMarquardt(rtol=tol, atol=tol)
    if isinstance(optimiser, FDDP):
        optimiser.check(problem, transcription)
    if not isinstance(optimiser, (LevenbergMarquardt, FDDP, optax.GradientTransformation,
                                  optx.AbstractLeastSquaresSolver, optx.AbstractMinimiser)):
        raise TypeError("optimiser must be a trajopt.LevenbergMarquardt(rtol=..., atol=...), a "
                        "trajopt.FDDP(rtol=..., atol=...), an optimistix least-squares solver or minimiser (e.g. "
                        "optx.GaussNewton(rtol=1e-8, atol=1e-8)) or an optax optimiser (e.g. optax.adam(1e-2))")
    if isinstance(optimiser, optx.LevenbergMarquardt) and jax.config.jax_enable_x64 and problem.q0.dtype != jnp.float64:
        # its damping (a float64 scalar under x64) promotes the float32 step, and lineax then refuses it
        raise ValueError(
            f"a {problem.q0.dtype} problem with jax_enable_x64 on: optimistix's LevenbergMarquardt mixes float64 into "
            "its steps and fails (optimistix 0.1.0). For float32 throughout, leave jax_enable_x64 off "
            "before building the model; or convert the model with model.astype(jnp.float64); or pass "
            "optimiser=optx.GaussNewton(rtol=..., atol=...) or an optax optimiser")
    method = AugmentedLagrangian() if constraints is None else constraints
    init, outer_step = _programs(batched)
    state = init(problem, transcription, optimiser, method, z)
    history = np.full((method.iterations, 2, *state.cost.shape), np.nan)
    with Progress(method.iterations, "trajopt", "outer iterations", progress) as bar:
        for k in range(method.iterations):
            state = outer_step(problem, transcription, optimiser, method, int(inner_steps), state)
            history[k] = np.asarray(state.cost), np.asarray(state.violation)
            bar.update(1, f"cost {history[k, 0].min():.6g}, violation {history[k, 1].min():.2e}, "
                          f"{int(np.sum(state.done))}/{np.size(state.done)} converged")
            if bool(jnp.all(state.done)):
                break
    result = state.rollout
    return Solution(state.z, result.u, result.trajectory, state.cost, state.violation, state.done,
                    state.iterations, state.outer_iterations, jnp.asarray(np.moveaxis(history, (0, 1), (-2, -1))))


def _collocate(nlp, optimiser: InteriorPoint, w0, start: InteriorPointStart):
    state = optimiser.solve(nlp, w0, start)
    cost, d, e = nlp.values(state.w)
    x = jax.vmap(nlp.coords)(state.w)
    outside = jnp.maximum(jnp.maximum(x - nlp.upper, nlp.lower - x), 0.0)
    worst = jnp.maximum(jnp.maximum(jnp.abs(d).max(), jnp.abs(e).max()), outside.max())
    transcription, problem = nlp.transcription, nlp.problem
    return (state, cost, worst, transcription.torque_path(problem, state.w),
            transcription.interval_errors(problem, state.w))


#: the compiled collocation solve, from a cold or a warm :class:`InteriorPointStart` alike (acrobot, 200
#: intervals: compiled in 15 s instead of 19 s with the classic emitters)
_COLLOCATE = eqx.filter_jit(_collocate, compiler_options=CLASSIC_EMITTERS)

#: a problem's cold start (shapes of its multipliers), compiled once per problem shape
_COLD = eqx.filter_jit(lambda nlp, optimiser, w0: optimiser.cold(nlp, w0))


def _with_state(problem, q0, qd0, model):
    return eqx.tree_at(lambda p: (p.q0, p.qd0, p.model), problem, (q0, qd0, model))


def _started_at(nlp, q0, qd0, model):
    """The program of the problem started at ``(q0, qd0)``, with ``model``."""
    return eqx.tree_at(lambda n: n.problem, nlp, _with_state(nlp.problem, q0, qd0, model))


def _collocate_from(nlp, optimiser, q0, qd0, model, w0, start):
    return _collocate(_started_at(nlp, q0, qd0, model), optimiser, w0, start)


#: ... and vmapped over initial states, guesses and starts (True: and models)
_COLLOCATE_VMAP = {batched: eqx.filter_jit(eqx.filter_vmap(_collocate_from, in_axes=(None, None, 0, 0, 0 if batched
                                                                                      else None, 0, 0)),
                                           compiler_options=CLASSIC_EMITTERS) for batched in (False, True)}


def _collocate_many(nlp, optimiser, q0, qd0, models, w0, chunk: int, progress: bool, warm_start: bool = False):
    """:func:`_collocate_from` for each initial state and guess, and model (every array leaf
    of ``models`` with a leading batch axis; ``None``: the problem's for all), ``chunk``
    problems at a time, vmapped (a vmapped while loop runs every problem to the slowest one's
    iterations, and each inner loop, inertia correction and line search, to its slowest too),
    the chunks one after another with a progress bar. One problem at a time runs
    :func:`solve`'s compiled program; a short chunk is padded with copies of its last problem.

    ``warm_start``: the problems in the order of :mod:`.continuation`, each from its nearest
    solved neighbour's knots and multipliers (:meth:`InteriorPoint.warm`); one that does not
    converge so is solved again from its own guess (its iterations are the two solves')."""
    batch = w0.shape[0]
    model = lambda rows: nlp.problem.model if models is None else jax.tree.map(lambda x: x[rows], models)  # noqa: E731
    cold = _COLD(nlp, optimiser, w0[0])
    results = [None] * batch

    def run(rows, guesses, starts):  # one chunk of problems: a list of per-problem results
        if chunk == 1:
            return [_COLLOCATE(_started_at(nlp, q0[i], qd0[i], model(i)), optimiser, g, s)
                    for i, g, s in zip(rows, guesses, starts)]
        pad = chunk - len(rows)
        rows_p = np.concatenate([rows, np.repeat(rows[-1:], pad)])
        stack = lambda xs: jax.tree.map(lambda *x: jnp.stack(x), *(xs + xs[-1:] * pad))  # noqa: E731
        part = _COLLOCATE_VMAP[models is not None](nlp, optimiser, q0[rows_p], qd0[rows_p], model(rows_p),
                                                   stack(guesses), stack(starts))
        return [jax.tree.map(lambda x: x[j], part) for j in range(len(rows))]

    if warm_start and batch > 1:
        groups = continuation.order(continuation.features(q0, qd0, models), chunk)
    else:
        groups = [(np.arange(i, min(i + chunk, batch)), np.full(min(chunk, batch - i), -1)) for i in range(0, batch, chunk)]
    converged = 0
    with Progress(batch, "collocation", "problems", progress) as bar:
        for rows, parents in groups:
            guesses = [w0[i] if p < 0 else results[p][0].w for i, p in zip(rows, parents)]
            starts = [cold if p < 0 else optimiser.warm(results[p][0]) for p in parents]
            for i, out in zip(rows, run(rows, guesses, starts)):
                results[i] = out
            again = np.array([i for i, p in zip(rows, parents) if p >= 0 and results[i][0].error > optimiser.tol], int)
            for i in range(0, len(again), chunk):
                rows_c = again[i:i + chunk]
                for j, out in zip(rows_c, run(rows_c, [w0[j] for j in rows_c], [cold] * len(rows_c))):
                    first = results[j][0].iterations
                    results[j] = (eqx.tree_at(lambda s: s.iterations, out[0], out[0].iterations + first),) + out[1:]
            converged += sum(int(results[i][0].error <= optimiser.tol) for i in rows)
            bar.update(len(rows), f"{converged} converged")
    return jax.tree.map(lambda *x: jnp.stack(x), *results)


def _default_chunk(batch: int) -> int:
    """Problems solved together (vmapped) by :func:`solve_batch` and :func:`solve_restarts`."""
    return 1 if jax.default_backend() == "cpu" else batch


def _solve_collocation(problem, w0, transcription: Collocation, optimiser, states=None, models=None, chunk=None,
                       progress: bool = False, warm_start: bool = False) -> Solution:
    """Solve from ``w0`` (K, nw), or from a batch of guesses ``w0`` (B, K, nw) for ``problem``
    or from each of the initial ``states`` ``(q0 (B, nq), qd0 (B, nv))`` with each of the
    ``models`` (batched leaves), ``chunk`` at a time (a progress bar over the problems with
    ``progress``; ``warm_start``: see :func:`_collocate_many`)."""
    optimiser = InteriorPoint(tol=default_tolerance(problem.q0.dtype, 1e-8, 1000)) if optimiser is None else optimiser
    if not isinstance(optimiser, InteriorPoint):
        raise TypeError(f"collocation is solved by trajopt.InteriorPoint(tol=..., max_iter=...); got "
                        f"{type(optimiser).__name__}")
    nlp = transcription.nlp(problem)
    if w0.ndim == 2:
        state, cost, worst, torques, errors = _COLLOCATE(nlp, optimiser, w0, _COLD(nlp, optimiser, w0))
    else:
        batch = w0.shape[0]
        q0, qd0 = (jnp.broadcast_to(problem.q0, (batch, problem.model.nq)),
                   jnp.broadcast_to(problem.qd0, (batch, problem.model.nv))) if states is None else states
        chunk = _default_chunk(batch) if chunk is None else chunk
        if not (isinstance(chunk, int) and 1 <= chunk <= batch):
            raise ValueError(f"chunk must be an integer from 1 to the batch size {batch}; got {chunk!r}")
        state, cost, worst, torques, errors = _collocate_many(nlp, optimiser, q0, qd0, models, w0, chunk, progress,
                                                              warm_start)
    x = transcription.unpack(problem, state.w)
    ts = jnp.broadcast_to(problem.controls.ts, x.q.shape[:-1])
    one = jnp.ones_like(cost, dtype=jnp.int32)
    return Solution(state.w, x.u, Trajectory(ts=ts, q=x.q, qd=x.v), cost, worst, state.error <= optimiser.tol,
                    state.iterations, one, jnp.stack([cost, worst], -1)[..., None, :], torques, errors)


def _variables(problem, guess, transcription, batched: bool):
    """Decision variables from a guess: variables already, or knot values (K, nu) (batched:
    (B, K, nu)) turned into them by the transcription (collocation: also ``None``, its default
    guess)."""
    if isinstance(transcription, Collocation):
        if guess is None:
            return transcription.initial_guess(problem)
        guess = jnp.asarray(guess, problem.q0.dtype)
        if guess.shape[-1] != len(problem.controls.dofs):
            return guess
        return (jax.vmap if batched else lambda f: f)(lambda u: transcription.initial_guess(problem, u=u))(guess)
    if not isinstance(guess, (jax.Array, np.ndarray)):
        return guess
    transcription = SingleShooting() if transcription is None else transcription
    if batched:
        return eqx.filter_vmap(lambda u: transcription.initial_guess(problem, u))(jnp.asarray(guess))
    return transcription.initial_guess(problem, guess)


def solve(problem: TrajectoryProblem, guess=None, *, transcription=None, optimiser=None, constraints=None,
          inner_steps: int = INNER_STEPS, progress: bool = True) -> Solution:
    """Optimise a trajectory from one initial guess, by direct shooting or by direct collocation.

    **Arguments:**

    - ``problem``: a :class:`TrajectoryProblem`.
    - ``guess``: knot values (K, nu), or decision variables from
      ``transcription.initial_guess(problem, ...)`` (e.g. multiple-shooting node states or
      collocation knot states along a guessed path). ``None``: zero torques (and, for
      collocation, the straight path to the terminal target).
    - ``transcription``: :class:`SingleShooting` (default), :class:`MultipleShooting`, or a
      collocation (:class:`HermiteSimpson`, :class:`Trapezoidal`).
    - ``optimiser``: for shooting, the inner solver (see the module docstring); default
      :class:`LevenbergMarquardt` ``(rtol=1e-8, atol=1e-8)`` for a float64 problem, with rtol = atol =
      1000 units of roundoff (1.2e-4) for a float32 one. For collocation, an
      :class:`InteriorPoint` (default: ``tol`` 1e-8 in float64, 1.2e-4 in float32).
    - ``constraints``: shooting only: :class:`AugmentedLagrangian` (default) or :func:`Penalty`,
      the outer loop's settings (iterations, tolerance on the violation).
    - ``inner_steps``: shooting only: the inner solver's step budget per outer iteration.
    - ``progress``: shooting only: a progress bar over the outer iterations (tqdm, or plain
      lines); a collocation solve is one compiled loop.

    **Returns:** a :class:`Solution`. For collocation its trajectory holds the knot states,
    ``controller`` the scheme's torque interpolation and ``interval_errors`` the estimated
    discretisation error of each interval (:meth:`Collocation.interval_errors`).
    """
    z = _variables(problem, guess, transcription, batched=False)
    if isinstance(transcription, Collocation):
        _shooting_only(constraints, inner_steps)
        return _solve_collocation(problem, z, transcription, optimiser)
    return _optimise(problem, z, transcription, optimiser, constraints, inner_steps, progress, batched=False)


def _batch_size(model, models) -> int:
    """The leading axis of ``models`` (``model`` with every array leaf batched), checked."""
    shapes = [(x.shape, y.shape) for x, y in zip(jax.tree.leaves(model), jax.tree.leaves(models)) if eqx.is_array(x)]
    if jax.tree.structure(model) != jax.tree.structure(models) or not shapes or any(
            y[1:] != x or y[:1] != shapes[0][1][:1] for x, y in shapes):
        raise ValueError(f"models must be the problem's model {model.name!r} with a leading batch axis on every "
                         "array leaf, e.g. jax.vmap(lambda m: eqx.tree_at(lambda x: x.mass, model, m))(masses)")
    return shapes[0][1][0]


def solve_batch(problem: TrajectoryProblem, q0=None, qd0=None, *, models=None, transcription=None, optimiser=None,
                chunk: int | None = None, warm_start: bool = True, progress: bool = True) -> Solution:
    """The same collocation problem from B initial states, or for B models, in one call.

    ``q0`` (B, nq), ``qd0`` (B, nv) (default: the problem's ``q0``, ``qd0`` for all);
    ``models``: the problem's model with a leading axis B on every array leaf (e.g. the masses
    of an identification's confidence set, made by ``jax.vmap`` of a function that builds the
    model from them), each problem solved with its own; the bounds (torque, position limits)
    stay the problem's. ``transcription``: a :class:`Collocation` (default
    :class:`HermiteSimpson`); ``optimiser``: an :class:`InteriorPoint`.

    ``warm_start`` (default): continuation. The first problem is solved first, from the
    transcription's default guess (put first the one you know best, e.g. the nominal initial
    state), then the unsolved problem nearest to a solved one (in initial state and model
    parameters, each scaled by its spread over the batch), from that one's knots and
    multipliers with a small barrier parameter (:meth:`InteriorPoint.warm`), and so on
    (:mod:`mbjax.trajopt.continuation`); a warm start that has not converged after
    ``optimiser.warm_max_iter`` iterations is solved again from the default guess. On the
    64 acrobot swing-ups of ``benchmarks/bench_trajopt.py`` (initial states 0.009 rad apart) a
    warm start takes 5-7 interior-point iterations where a cold one takes 25-100. Each problem
    then converges to the optimum continued from its neighbour's, which can differ from the one
    its own guess leads to (there: lower effort for most of them). ``warm_start=False``: each
    problem from the transcription's default guess for its initial state and model, as if
    alone.

    ``chunk``: how many problems are solved together, vmapped, by one compiled program; the
    chunks run one after another (warm started: the first problem alone, padded to a chunk).
    Default: one at a time on a CPU (where a vmapped batch of 64 swing-ups cost 3.1x more per
    problem: every problem waits for the slowest, and the batch's arrays leave the cache), all
    of them on an accelerator (warm started: the first, then all the others from it).
    ``progress``: a progress bar over the problems (tqdm, or plain lines on stderr).

    **Returns:** a :class:`Solution` with a leading axis B (``converged`` per problem).
    """
    transcription = HermiteSimpson() if transcription is None else transcription
    if not isinstance(transcription, Collocation):
        raise TypeError(f"solve_batch solves collocation problems; got {type(transcription).__name__}")
    if q0 is None and models is None:
        raise ValueError("give the initial states q0 (B, nq), the models (batched), or both")
    batch = _batch_size(problem.model, models) if models is not None else None
    q0 = jnp.broadcast_to(problem.q0, (batch, problem.model.nq)) if q0 is None else jnp.asarray(q0, problem.q0.dtype)
    if q0.ndim != 2 or q0.shape[1] != problem.model.nq or batch not in (None, q0.shape[0]):
        raise ValueError(f"q0 must have shape ({batch or 'B'}, {problem.model.nq}); got {q0.shape}")
    batch = q0.shape[0]
    qd0 = problem.qd0 if qd0 is None else jnp.asarray(qd0, problem.q0.dtype)
    if qd0.shape not in ((problem.model.nv,), (batch, problem.model.nv)):
        raise ValueError(f"qd0 must have shape ({problem.model.nv},) or ({batch}, {problem.model.nv}); got {qd0.shape}")
    qd0 = jnp.broadcast_to(qd0, (batch, problem.model.nv))
    guesses = eqx.filter_vmap(lambda q, v, m: transcription.initial_guess(_with_state(problem, q, v, m)),
                              in_axes=(0, 0, None if models is None else 0))(
        q0, qd0, problem.model if models is None else models)
    return _solve_collocation(problem, guesses, transcription, optimiser, states=(q0, qd0), models=models, chunk=chunk,
                              progress=progress, warm_start=warm_start)


def _shooting_only(constraints, inner_steps):
    if constraints is not None or inner_steps != INNER_STEPS:
        raise TypeError("constraints= and inner_steps= set the shooting solver's outer loop; collocation takes "
                        "optimiser=trajopt.InteriorPoint(tol=..., max_iter=...)")


def best_restart(solutions: Solution) -> int:
    """Index of the best of a batch: the lowest cost among the converged restarts, or the
    smallest violation when none converged."""
    converged = np.asarray(solutions.converged)
    if converged.any():
        return int(np.argmin(np.where(converged, np.asarray(solutions.cost), np.inf)))
    return int(np.argmin(np.asarray(solutions.violation)))


def solve_restarts(problem: TrajectoryProblem, guesses, *, transcription=None, optimiser=None, constraints=None,
                   inner_steps: int = INNER_STEPS, progress: bool = True, chunk: int | None = None):
    """:func:`solve` from several initial guesses in one call, for problems with local minima
    (a swing-up can go either way round).

    ``guesses``: knot values (B, K, nu), or batched decision variables (every leaf with a
    leading axis B). Shooting vmaps the restarts (``progress``: over the outer iterations);
    collocation solves them ``chunk`` at a time as :func:`solve_batch` does (``progress``: over
    the restarts). The other arguments are those of :func:`solve`.

    **Returns:** ``(best, all)``: the best :class:`Solution` (:func:`best_restart`) and all of
    them (leading axis B).
    """
    z = _variables(problem, guesses, transcription, batched=True)
    if isinstance(transcription, Collocation):
        _shooting_only(constraints, inner_steps)
        solutions = _solve_collocation(problem, z, transcription, optimiser, chunk=chunk, progress=progress)
    else:
        solutions = _optimise(problem, z, transcription, optimiser, constraints, inner_steps, progress, batched=True)
    best = best_restart(solutions)
    return jax.tree.map(lambda x: x[best], solutions), solutions
