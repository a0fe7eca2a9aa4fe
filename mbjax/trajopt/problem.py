"""A trajectory-optimisation problem: a model, its initial state, a horizon with knot-interpolated
torques, costs and constraints, and the fixed-step integration used to simulate it."""

from __future__ import annotations

import dataclasses

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from ..checks import check_state
from ..model.model import Model
from ..configuration import normalize
from ..simulation.trajectory import Trajectory
from ..methods import as_dynamics
from ..simulation.runge_kutta import explicit_step
from ..simulation.vector_field import vector_field
from ..tangents import instantiate, is_zero
from .controls import KnotControls
from .costs import Rollout, Term, Limits


class TrajectoryProblem(eqx.Module):
    """Find knot torques ``u`` (K, nu) minimising ``sum_costs weight |r|^2`` subject to the
    constraints, for the motion of ``model`` from ``(q0, qd0)`` over ``[0, duration]``.

    **Arguments:**

    - ``model``, ``q0`` (nq,), ``qd0`` (nv,): the system and its initial state.
    - ``duration``: the horizon T (s); ``knots``: K torque knots evenly spaced over it.
    - ``costs``, ``constraints``: sequences of terms (:mod:`mbjax.trajopt.costs`): e.g.
      ``costs=[Effort()]``, ``constraints=[TerminalState(q_goal, qd_goal), TorqueLimits()]``.
    - ``actuated``: joint names or velocity indices that get a torque (default: every joint but
      a free-floating base); the others get zero (an acrobot, a satellite's base).
    - ``interpolation``: ``"linear"`` or ``"cubic"`` between knots.
    - ``substeps``: fixed integration steps per knot interval; ``solver``: an explicit diffrax
      solver (default ``Tsit5``, 5th order); ``method``: the forward-dynamics method of
      :func:`mbjax.simulate` (a name, an :class:`mbjax.Dynamics` such as
      ``mbjax.ClosedChainDynamics(closures, alpha=..., beta=...)`` for a closed chain, whose
      arrays are part of the problem's pytree, or a plain function). It runs without its
      runtime checks (:meth:`mbjax.Dynamics.unchecked`): the optimiser's trial steps may diverge or cross a singular
      configuration, and their non-finite states must reach it (which rejects the step).
      Fixed steps that end on the knots keep the solver's order across the kinks of linear
      interpolation and make the objective a smooth function of ``u``; check the result with
      :meth:`Solution.resimulate`.
    """

    model: Model
    q0: jax.Array
    qd0: jax.Array
    controls: KnotControls
    costs: tuple
    constraints: tuple
    solver: diffrax.AbstractSolver
    substeps: int = eqx.field(static=True)
    method: object
    stepwise: bool = eqx.field(static=True)

    def __init__(self, model: Model, q0, qd0, duration, knots: int, *, costs=(), constraints=(), actuated=None,
                 interpolation: str = "linear", substeps: int = 4, solver=None, method="aba"):
        self.q0, self.qd0 = check_state(model, q0, qd=qd0)
        self.model = model
        self.controls = KnotControls(model, duration, knots, actuated, interpolation)
        self.costs, self.constraints = tuple(costs), tuple(constraints)
        for term in self.costs + self.constraints:
            if not isinstance(term, Term):
                raise TypeError(f"costs and constraints must be mbjax.trajopt terms (Effort, TerminalState, "
                                f"PathCost, TorqueLimits, VelocityLimits, ...); got {type(term).__name__}")
            if isinstance(term, Limits):
                lower, upper = (np.asarray(b) for b in term.bounds(self))
                if not (np.any(np.isfinite(lower)) or np.any(np.isfinite(upper))) or np.any(lower > upper):
                    raise ValueError(f"{type(term).__name__} needs lower <= upper with at least one finite bound: "
                                     "give lower= and upper= (the model's limits are not finite here)")
        if not self.costs:
            raise ValueError("give at least one cost, e.g. costs=[mbjax.trajopt.Effort()]")
        if int(substeps) < 1:
            raise ValueError(f"substeps must be a positive integer; got {substeps}")
        self.substeps = int(substeps)
        self.stepwise = False
        self.solver = diffrax.Tsit5() if solver is None else solver
        # trial steps of the optimiser may diverge: their NaN states must reach it (which then
        # rejects the step), not raise
        self.method = as_dynamics(method).unchecked()

    def forward_mode(self, stepwise: bool = False) -> "TrajectoryProblem":
        """This problem with its simulation differentiable in forward mode (``jax.jvp``,
        ``jax.jacfwd``): an implicit Runge–Kutta solver's stages run in a plain loop, as
        diffrax's ``ForwardMode`` arranges it (the default checkpointed loop is reverse-mode
        only; explicit ones step by their tableau, :meth:`_step`, in either mode).

        ``stepwise``: for whole Jacobians (``jax.jacfwd`` with respect to many knots), the
        tangents go through the steps' Jacobians instead of through every stage of every step
        (:meth:`simulate`); a single ``jax.jvp`` is cheaper without.
        """
        problem = self
        if (isinstance(self.solver, diffrax.AbstractRungeKutta) and not isinstance(self.solver, diffrax.AbstractERK)
                and self.solver.scan_kind is None):
            solver = eqx.tree_at(lambda s: s.scan_kind, self.solver, "lax", is_leaf=lambda x: x is None)
            problem = eqx.tree_at(lambda p: p.solver, self, solver)
        if stepwise == problem.stepwise:
            return problem
        new = object.__new__(type(problem))  # a static field: eqx.tree_at cannot set it
        for field in dataclasses.fields(problem):
            object.__setattr__(new, field.name, stepwise if field.name == "stepwise" else getattr(problem, field.name))
        return new

    @property
    def step_tangents(self) -> int:
        """How many tangents each step of the ``stepwise`` forward mode pushes through the solver's
        stages (:meth:`simulate`): its state's (nq + nv) and its window of knots'."""
        width, _ = self.controls.window
        return self.model.nq + self.model.nv + width * self.controls.shape[1]

    @property
    def duration(self):
        return self.controls.ts[-1]

    @property
    def knots(self) -> int:
        return self.controls.ts.shape[0]

    def simulate(self, u, q0, qd0, first, intervals: int) -> Trajectory:
        """Simulate from ``(q0, qd0)`` at knot ``first`` over ``intervals`` knot intervals with knot
        values ``u``: ``substeps`` fixed steps of the diffrax ``solver`` per interval on
        :func:`mbjax.simulate`'s vector field, in a ``lax.scan`` (reverse-mode differentiable;
        see :meth:`forward_mode` for forward mode). ``first`` may be traced (a batch of segments).

        With ``stepwise`` (``forward_mode(stepwise=True)``), forward mode takes the chain rule
        over the steps: step i maps ``y_i = (q_i, qd_i)`` and the knots its interval's torques
        depend on, ``w_i`` (2 for linear interpolation, 3 for cubic), to ``y_{i+1}``; its Jacobian
        ``[A_i, B_i]`` (``jax.jacfwd``: :attr:`step_tangents` = nq + nv + 2 or 3 nu tangents through
        the solver's stages) is computed once per step, and every tangent goes through
        ``dy_{i+1} = A_i dy_i + B_i dw_i``. A ``jax.jacfwd`` with respect to all the knots (and
        shooting nodes) then pushes ``step_tangents`` tangents through the stages instead of one
        per variable (panda's point to point by four shooting segments: 28 instead of 105, its
        rollout Jacobian 1.5x faster). Tangents along the model take plain forward mode.

        Every step starts afresh from its state (:meth:`_step`), so a step is the same function
        of its state and knots in both modes.

        **Returns:** a :class:`Trajectory` with every step (``intervals * substeps + 1`` rows).
        """
        if not self.stepwise:
            return self._simulate(u, q0, qd0, first, intervals)
        dynamic, static = eqx.partition(self, eqx.is_array)
        return _stepwise(static, intervals)(dynamic, u, q0, qd0, first)

    def _grid(self, first, intervals: int):
        """Step count n, step dt and the n + 1 times of a simulation over knot intervals
        ``[first, first + intervals]``."""
        n = intervals * self.substeps
        t0 = jnp.take(self.controls.ts, first)
        dt = (jnp.take(self.controls.ts, first + intervals) - t0) / n
        return n, dt, t0 + dt * jnp.arange(n + 1, dtype=dt.dtype)

    def _args(self, u):
        return (self.model, self.method, self.controls.controller(u), None)

    def _trajectory(self, ts, q0, qd0, q, qd):
        q = jax.vmap(normalize, (None, 0))(self.model, jnp.concatenate([q0[None], q]))
        return Trajectory(ts=ts, q=q, qd=jnp.concatenate([qd0[None], qd]))

    def _step(self, t, dt, y, args):
        """The state one step of the ``solver`` after ``(t, y)``: an explicit Runge–Kutta method by
        its tableau (:func:`mbjax.simulation.runge_kutta.explicit_step`: faster under forward
        mode), others by their ``step``, each started afresh."""
        if isinstance(self.solver, diffrax.AbstractERK):
            return explicit_step(self.solver.tableau, vector_field, t, dt, y, args)
        term = diffrax.ODETerm(vector_field)
        state = self.solver.init(term, t, t + dt, y, args)
        return self.solver.step(term, t, t + dt, y, args, state, made_jump=False)[0]

    def _simulate(self, u, q0, qd0, first, intervals: int) -> Trajectory:
        _, dt, ts = self._grid(first, intervals)
        args = self._args(u)
        _, (q, qd) = jax.lax.scan(lambda y, t: (self._step(t, dt, y, args),) * 2, (q0, qd0), ts[:-1])
        return self._trajectory(ts, q0, qd0, q, qd)

    def residuals(self, rollout: Rollout):
        """(cost residuals, equality residuals, inequality residuals) of a rollout, each 1-D in
        the model's dtype (a float64 target given to a float32 model is rounded, as every input
        is); ``sum(cost**2)`` is the objective, the defects lead the equalities."""
        costs, equalities, inequalities = [], [rollout.defects], []
        for term in self.costs:
            r = term.residual(self, rollout)
            costs.append(jnp.sqrt(term.weight) * (jnp.maximum(r, 0.0) if term.inequality else r))
        for term in self.constraints:
            (inequalities if term.inequality else equalities).append(term.residual(self, rollout))
        dtype = self.q0.dtype
        cat = lambda parts: jnp.concatenate(parts).astype(dtype) if parts else jnp.zeros(0, dtype)  # noqa: E731
        return cat(costs), cat(equalities), cat(inequalities)


def _stepwise(static, intervals: int):
    """:meth:`TrajectoryProblem.simulate` of the problem ``eqx.combine(dynamic, static)``, with
    forward-mode derivatives by the chain rule over its steps (the method's docstring)."""

    @jax.custom_jvp
    def simulate(dynamic, u, q0, qd0, first):
        return eqx.combine(dynamic, static)._simulate(u, q0, qd0, first, intervals)

    def jvp(primals, tangents):
        dynamic, u, q0, qd0, first = primals
        problem = eqx.combine(dynamic, static)
        if not is_zero(tangents[0]):  # along the model too: plain forward mode
            return jax.jvp(lambda d, *x: eqx.combine(d, static)._simulate(*x, first, intervals), primals[:4],
                           instantiate(tangents[:4]))
        du, dq0, dqd0 = instantiate(tangents[1:4])
        n, dt, ts = problem._grid(first, intervals)
        width, back = problem.controls.window

        def step(carry, x):
            y, dy = carry
            t, i = x
            start = jnp.clip(first + i // problem.substeps - back, 0, u.shape[0] - width)

            def advance(y, w):  # y_{i+1} from y_i and the knots w of this step's interval
                return problem._step(t, dt, y, problem._args(jax.lax.dynamic_update_slice(u, w, (start, 0))))

            x0, unravel = ravel_pytree((y, jax.lax.dynamic_slice(u, (start, 0), (width, u.shape[1]))))
            flat = lambda x: ravel_pytree(advance(*unravel(x)))[0]  # noqa: E731
            AB, y1 = jax.jacfwd(lambda x: (flat(x),) * 2, has_aux=True)(x0)  # the Jacobian and y_{i+1}
            dw = jax.lax.dynamic_slice(du, (start, 0), (width, u.shape[1]))
            _, unravel_y = ravel_pytree(y)
            y1, dy1 = unravel_y(y1), unravel_y(AB @ ravel_pytree((dy, dw))[0])
            return (y1, dy1), (y1, dy1)

        _, ((q, qd), (dq, dqd)) = jax.lax.scan(step, ((q0, qd0), (dq0, dqd0)), (ts[:-1], jnp.arange(n)))
        return jax.jvp(lambda *x: problem._trajectory(ts, *x), (q0, qd0, q, qd), (dq0, dqd0, dq, dqd))

    simulate.defjvp(jvp, symbolic_zeros=True)
    return simulate
