"""A trajectory-optimisation problem: a model, its initial state, a horizon with knot-interpolated
torques, costs and constraints, and the fixed-step integration used to simulate it."""

from __future__ import annotations

import functools


import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..checks import check_state
from ..model.model import Model
from ..configuration import normalize
from ..simulation.trajectory import Trajectory
from ..methods import as_dynamics
from ..simulation.vector_field import vector_field
from .controls import KnotControls
from .costs import Rollout, Term, Limits
from ..tangents import instantiate, is_zero


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
        self.solver = diffrax.Tsit5() if solver is None else solver
        # trial steps of the optimiser may diverge: their NaN states must reach it (which then
        # rejects the step), not raise
        self.method = as_dynamics(method).unchecked()

    def forward_mode(self) -> "TrajectoryProblem":
        """This problem with its simulation differentiable in forward mode (``jax.jvp``,
        ``jax.jacfwd``): a Runge–Kutta solver's stages run in a plain loop, as diffrax's
        ``ForwardMode`` arranges it (the default checkpointed loop is reverse-mode only)."""
        if not isinstance(self.solver, diffrax.AbstractRungeKutta) or self.solver.scan_kind is not None:
            return self
        solver = eqx.tree_at(lambda s: s.scan_kind, self.solver, "lax", is_leaf=lambda x: x is None)
        return eqx.tree_at(lambda p: p.solver, self, solver)

    @property
    def duration(self):
        return self.controls.ts[-1]

    @property
    def knots(self) -> int:
        return self.controls.ts.shape[0]

    def simulate(self, u, q0, qd0, first, intervals: int) -> Trajectory:
        """Simulate from ``(q0, qd0)`` at knot ``first`` over ``intervals`` knot intervals with knot
        values ``u``: ``substeps`` fixed steps of the diffrax ``solver`` per interval on
        :func:`mbjax.simulate`'s vector field, in a ``lax.scan``. ``first`` may be traced (a batch
        of segments). Differentiable in forward and reverse mode, the derivative with respect to
        ``u`` and the initial state by the chain rule over the steps (:func:`_integrate_jvp`).

        **Returns:** a :class:`Trajectory` with every step (``intervals * substeps + 1`` rows).
        """
        starts, dt = self.step_times(first, intervals)
        q, qd = _integrate(self, u, q0, qd0, first, intervals)
        q = jax.vmap(normalize, (None, 0))(self.model, q)
        return Trajectory(ts=jnp.concatenate([starts, starts[-1:] + dt]), q=q, qd=qd)

    def step_times(self, first, intervals: int):
        """Start times (n,) of the ``n = intervals * substeps`` fixed steps from knot ``first``,
        and the step ``dt``."""
        n = intervals * self.substeps
        t0 = jnp.take(self.controls.ts, first)
        dt = (jnp.take(self.controls.ts, first + intervals) - t0) / n
        return t0 + dt * jnp.arange(n, dtype=dt.dtype), dt

    def step(self, y, t, dt, u, state=None):
        """One fixed step of the solver from time ``t`` and state ``y = (q, qd)`` under knot values
        ``u``; ``state``: the solver's state carried from the previous step (``None``: its
        initial state at ``(t, y)``). Returns the new ``y`` and solver state."""
        term, args = self._vector_field(u)
        if state is None:
            state = self.solver.init(term, t, t + dt, y, args)
        y, _, _, state, _ = self.solver.step(term, t, t + dt, y, args, state, made_jump=False)
        return y, state

    def _vector_field(self, u):
        return diffrax.ODETerm(vector_field), (self.model, self.method, self.controls.controller(u), None)

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


def _integrate_steps(problem: TrajectoryProblem, u, q0, qd0, first, intervals: int):
    """The unnormalised states ``q`` (n + 1, nq), ``qd`` (n + 1, nv) of
    :meth:`TrajectoryProblem.simulate`, the solver's state carried from step to step."""
    starts, dt = problem.step_times(first, intervals)

    def step(carry, t):
        y, state = problem.step(carry[0], t, dt, u, carry[1])
        return (y, state), y

    y0 = (q0, qd0)
    term, args = problem._vector_field(u)
    state0 = problem.solver.init(term, starts[0], starts[0] + dt, y0, args)
    _, (q, qd) = jax.lax.scan(step, (y0, state0), starts)
    return jnp.concatenate([q0[None], q]), jnp.concatenate([qd0[None], qd])


@eqx.filter_jit
def _integrate(problem: TrajectoryProblem, u, q0, qd0, first, intervals: int):
    """:func:`_integrate_steps`, differentiated by :func:`_integrate_jvp`."""
    arrays, static = eqx.partition(problem, eqx.is_array)
    return _integrate_arrays(static, intervals, arrays, u, q0, qd0, first)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _integrate_arrays(static, intervals, arrays, u, q0, qd0, first):
    return _integrate_steps(eqx.combine(arrays, static), u, q0, qd0, first, intervals)


def _knot_window(problem: TrajectoryProblem, knot):
    """The first of the ``L`` consecutive knots whose values the torques of knot interval
    ``knot`` depend on, and L: linear interpolation uses the interval's two ends; the cubic
    Hermite interpolation with backward differences also the knot before (its slope)."""
    K = problem.knots
    L, before = (2, 0) if problem.controls.kind == "linear" else (3, 1)
    L = min(L, K)
    return jnp.clip(knot - before, 0, K - L), L


def _integrate_jvp(static, intervals, primals, tangents):
    """Forward mode of the simulation by the chain rule over its steps.

    ``y_{i+1} = Phi_i(y_i, u)`` for step i; ``Phi_i`` depends on u only through the L knots of
    its interval (:func:`_knot_window`). So ``dy_{i+1} = A_i dy_i + B_i du_i`` with
    ``A_i = dPhi_i/dy``, ``B_i = dPhi_i/du_i`` at the simulated states, where ``du_i`` is the
    tangent of those knots. The (A_i, B_i) of all steps depend on the primal trajectory only:
    they are computed at once, vmapped over the steps (the dynamics see all n states as one
    batch, with nx + L nu tangents each), and the tangents (any number of them: ``jax.jacfwd``
    of the shooting residuals has one per decision variable) then only run through the linear
    recursion. Forward mode through the sequential scan instead carried every tangent through
    every stage of every step, one step at a time.
    """
    arrays, u, q0, qd0, first = primals
    darrays, du, dq0, dqd0, _ = tangents
    if not is_zero(darrays):  # derivatives along the model or the horizon: plain forward mode
        return jax.jvp(lambda p, u, a, b: _integrate_steps(eqx.combine(p, static).forward_mode(), u, a, b, first,
                                                          intervals),
                       (arrays, u, q0, qd0), instantiate((darrays, du, dq0, dqd0)))
    problem = eqx.combine(arrays, static)
    q, qd = _integrate_arrays(static, intervals, arrays, u, q0, qd0, first)
    nq, nu = q0.shape[0], u.shape[1]
    starts, dt = problem.step_times(first, intervals)
    window, L = _knot_window(problem, first + jnp.arange(starts.shape[0]) // problem.substeps)
    linear = problem.forward_mode()

    def step(y, w, t, k):
        y1, _ = linear.step((y[:nq], y[nq:]), t, dt, jax.lax.dynamic_update_slice(u, w.reshape(L, nu), (k, 0)))
        return jnp.concatenate(y1)

    def linearise(y, t, k):
        return jax.jacfwd(step, argnums=(0, 1))(y, jax.lax.dynamic_slice(u, (k, 0), (L, nu)).reshape(-1), t, k)

    ys = jnp.concatenate([q, qd], axis=1)
    A, B = jax.vmap(linearise)(ys[:-1], starts, window)
    du = instantiate(du)

    def chain(dy, x):
        A, B, k = x
        dy = A @ dy + B @ jax.lax.dynamic_slice(du, (k, 0), (L, nu)).reshape(-1)
        return dy, dy

    dy0 = jnp.concatenate(instantiate((dq0, dqd0)))
    _, dys = jax.lax.scan(chain, dy0, (A, B, window))
    dys = jnp.concatenate([dy0[None], dys])
    return (q, qd), (dys[:, :nq], dys[:, nq:])


_integrate_arrays.defjvp(_integrate_jvp, symbolic_zeros=True)
