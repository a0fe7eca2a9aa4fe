"""Direct collocation: the states, torques and accelerations at the knots are the decision
variables, and the equations of motion hold as constraints at the collocation points.

Two transcriptions (Betts, *Practical Methods for Optimal Control*, 2nd ed., Sec. 4.5; Kelly,
"An introduction to trajectory optimization", SIAM Review 59(4), 2017, Sec. 3–4) of the
interval k from t_k to t_k + h, with knot states (q, v), knot accelerations a and torques u:

- :class:`Trapezoidal`: ``q_b (-) q_a = h/2 (v_a + v_b)``, ``v_b - v_a = h/2 (a_a + a_b)``;
  torques linear between knots (second order).
- :class:`HermiteSimpson` (separated form): a midpoint acceleration ``a_m`` and torque ``u_m``
  per interval, the midpoint state of the cubic Hermite interpolant

      q_m = q_a (+) (dq/2 + h/8 (v_a - v_b)),   v_m = (v_a + v_b)/2 + h/8 (a_a - a_b),

  and Simpson's rule ``dq = h/6 (v_a + 4 v_m + v_b)``, ``v_b - v_a = h/6 (a_a + 4 a_m + a_b)``
  (``dq = q_b (-) q_a``); torques quadratic on each interval (fourth order).

The dynamics hold pointwise, at every knot and midpoint (the collocation points):

- ``dynamics="inverse"`` (default): ``rnea(q, v, a) = tau(u) + tau_passive(q, v)``, one
  inverse-dynamics call per point (Ferrolho et al., "Inverse dynamics vs. forward dynamics in
  direct transcription formulations for trajectory optimization", ICRA 2021); for every
  formulation of the tree (they share its equations of motion);
- ``dynamics="forward"``: ``a = dynamics(q, v, tau(u) + tau_passive)`` with the problem's
  ``method``, any formulation of the dynamics protocol (e.g. a closed chain's
  :class:`mbjax.ClosedChainDynamics` with its Baumgarte stabilisation).

Both give the same program up to the point residual, so the same optimum; the inverse form
is cheaper to differentiate twice (one RNEA instead of a factorisation per point).

On the configuration manifold (quaternions, (cos, sin) pairs) a difference is
:func:`mbjax.difference` and a sum :func:`mbjax.integrate`, exact for Euclidean joints and
consistent to second order on rotations. The costs and constraints are the problem's terms:
:class:`Effort` (exact for the interpolated torques, by the knot controls' Gauss–Legendre
rule), :class:`PathCost` (the scheme's quadrature), :class:`TerminalState` (a cost or an
equality at the last knot) and the limit terms (bounds on the variables at the knots, and on
the midpoint torques).
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..configuration import difference_from, integrate_from, normalize
from ..dynamics.passive import passive_forces_from
from ..dynamics.rnea import rnea_from
from ..kinematics import tree_kinematics
from ..methods import REGISTRY
from ..simulation.controllers import FeedForward
from ..simulation.trajectory import Trajectory
from .controls import GAUSS_NODES, GAUSS_WEIGHTS
from .costs import Effort, Limits, PathCost, PositionLimits, Rollout, TerminalState, TorqueLimits, VelocityLimits
from .stagewise import StagewiseNLP

#: joint types whose configuration coordinates are their velocity coordinates
_EUCLIDEAN = ("revolute", "prismatic")
DYNAMICS = ("inverse", "forward")


class Knot(NamedTuple):
    """A knot's variables: state ``q``, ``v``, torques ``u``, acceleration ``a``, and for
    Hermite–Simpson the following interval's midpoint torque ``um`` and acceleration ``am``
    (``None`` for the trapezoidal rule)."""

    q: jax.Array
    v: jax.Array
    u: jax.Array
    a: jax.Array
    um: jax.Array | None
    am: jax.Array | None


class Collocation(eqx.Module):
    """A direct-collocation transcription of a :class:`TrajectoryProblem` on the knots of its
    controls (``knots - 1`` intervals). ``dynamics``: ``"inverse"`` or ``"forward"`` (see the
    module docstring)."""

    dynamics: str = eqx.field(default="inverse", static=True)
    midpoint: ClassVar[bool] = False
    #: collocation points of an interval in [0, 1], where the rates are interpolated, and the
    #: weights of the quadrature on them
    nodes: ClassVar[tuple] = (0.0, 1.0)
    quadrature: ClassVar[tuple] = (0.5, 0.5)

    def __check_init__(self):
        if self.dynamics not in DYNAMICS:
            raise ValueError(f"unknown dynamics {self.dynamics!r}; use one of {DYNAMICS}")

    # ------------------------------------------------------------------ variables
    def sizes(self, problem):
        """(nq, nv, nu, variables per knot, tangent coordinates per knot)."""
        nq, nv, nu = problem.model.nq, problem.model.nv, len(problem.controls.dofs)
        m = 2 if self.midpoint else 1
        return nq, nv, nu, nq + nv + m * (nu + nv), 2 * nv + m * (nu + nv)

    def unpack(self, problem, w) -> Knot:
        """The :class:`Knot` of variables ``w`` (..., nw)."""
        nq, nv, nu, _, _ = self.sizes(problem)
        cut = np.cumsum([nq, nv, nu, nu if self.midpoint else 0, nv])
        q, v, u, um, a, am = jnp.split(w, cut, axis=-1)
        return Knot(q, v, u, a, um if self.midpoint else None, am if self.midpoint else None)

    def pack(self, problem, knot: Knot):
        """Variables (..., nw) of a :class:`Knot` (the midpoint parts ignored by the trapezoidal rule)."""
        parts = [knot.q, knot.v, knot.u] + ([knot.um] if self.midpoint else []) + [knot.a]
        parts += [knot.am] if self.midpoint else []
        return jnp.concatenate([jnp.asarray(p, problem.q0.dtype) for p in parts], axis=-1)

    def retract(self, problem, w, d):
        """``w`` moved by the tangent step ``d``: q by :func:`mbjax.integrate`, the rest added."""
        nq, nv, *_ = self.sizes(problem)
        q = normalize(problem.model, integrate_from(problem.model, w[:nq], d[:nv]))
        return jnp.concatenate([q, w[nq:] + d[nv:]])

    def coords(self, problem, w):
        """The tangent-sized coordinates the bounds apply to: q on revolute and prismatic
        joints (zero elsewhere), then the other variables."""
        nq, nv, *_ = self.sizes(problem)
        qi, vi = _euclidean(problem.model)
        return jnp.concatenate([jnp.zeros(nv, w.dtype).at[vi].set(w[qi]), w[nq:]])

    # ------------------------------------------------------------------ dynamics
    def point(self, q, v, a, u):
        """A collocation point ``z = (q, v, a, u)`` of the dynamics residual."""
        return jnp.concatenate([q, v, a, u])

    def residual(self, problem, z):
        """The equations of motion at ``z`` (nv,): ``rnea(q, v, a) - tau - tau_passive``
        (inverse) or ``a - qdd(q, v, tau + tau_passive)`` (forward)."""
        model = problem.model
        nq, nv = model.nq, model.nv
        q, v, a, u = z[:nq], z[nq:nq + nv], z[nq + nv:nq + 2 * nv], z[nq + 2 * nv:]
        q = normalize(model, q)
        tau = problem.controls.torques(u[None])[0] + passive_forces_from(model, q, v)
        if self.dynamics == "inverse":
            return rnea_from(model, tree_kinematics(model, q), q, v, a) - tau
        return a - problem.method(model, q, v, tau)

    def curved(self, problem):
        """Indices of ``z`` along which :meth:`residual` is not affine: q and v; and u for the
        forward form (``rnea`` is affine in the accelerations, the torques are the controls
        placed on their coordinates; ``a - qdd(q, v, tau)`` is affine in a)."""
        nq, nv = problem.model.nq, problem.model.nv
        curved = np.arange(nq + nv)
        if self.dynamics == "inverse":
            return curved
        return np.concatenate([curved, nq + 2 * nv + np.arange(len(problem.controls.dofs))])

    # ------------------------------------------------------------------ stages
    def step(self, problem):
        """The interval length h."""
        return problem.duration / (problem.knots - 1)

    def interval(self, problem, wa, wb, k):
        """(cost, defects, midpoint collocation point or None) of interval k."""
        raise NotImplementedError

    def node(self, problem, w, k):
        """(cost, boundary equalities, the knot's collocation point) at knot k: the initial state
        at k = 0; the terminal equalities (and zero unused midpoint variables) at the last."""
        x = self.unpack(problem, w)
        model, last = problem.model, problem.knots - 1
        rollout = _knot_rollout(problem, x)
        pins = [x.um, x.am] if self.midpoint else []
        terminal = [t.residual(problem, rollout) for t in problem.constraints if isinstance(t, TerminalState)]
        terminal = jnp.concatenate(terminal + pins + [jnp.zeros(0, w.dtype)])
        initial = jnp.concatenate([difference_from(model, problem.q0, x.q), x.v - problem.qd0])
        nb = max(initial.size, terminal.size)
        pad = lambda r: jnp.concatenate([r, jnp.zeros(nb - r.size, w.dtype)])  # noqa: E731
        base = jnp.where(k == 0, pad(initial), jnp.where(k == last, pad(terminal), 0.0))
        cost = jnp.zeros((), w.dtype)
        for term in problem.costs:
            if isinstance(term, TerminalState):
                r = term.residual(problem, rollout)
                cost = cost + jnp.where(k == last, term.weight * r @ r, 0.0)
        return cost, base, self.point(x.q, x.v, x.a, x.u)

    def node_mask(self, problem):
        """(K, node equalities): which of them are constraints."""
        nq, nv, nu, nw, _ = self.sizes(problem)
        x = self.unpack(problem, jnp.zeros(nw, problem.q0.dtype).at[:nq].set(problem.q0))
        rollout = _knot_rollout(problem, x)
        n_end = sum(int(t.residual(problem, rollout).size) for t in problem.constraints if isinstance(t, TerminalState))
        n_end += nu + nv if self.midpoint else 0
        mask = np.zeros((problem.knots, max(2 * nv, n_end) + nv), bool)
        mask[0, :2 * nv] = True
        mask[-1, :n_end] = True
        mask[:, -nv:] = True  # the dynamics at every knot
        return mask

    def bounds(self, problem):
        """(lower, upper), each (K, tangent coordinates), from the limit terms."""
        model = problem.model
        nq, nv, nu, _, nt = self.sizes(problem)
        lower, upper = np.full(nt, -np.inf), np.full(nt, np.inf)
        qi, vi = _euclidean(model)

        def tighten(idx, lo, hi):
            lower[idx], upper[idx] = np.maximum(lower[idx], lo), np.minimum(upper[idx], hi)

        for term in problem.constraints:
            if not isinstance(term, Limits):
                continue
            lo, hi = (np.asarray(b, float) for b in term.bounds(problem))
            if isinstance(term, TorqueLimits):
                tighten(np.arange(2 * nv, 2 * nv + nu), lo, hi)
                if self.midpoint:
                    tighten(np.arange(2 * nv + nu, 2 * nv + 2 * nu), lo, hi)
            elif isinstance(term, VelocityLimits):
                tighten(np.arange(nv, 2 * nv), lo, hi)
            elif isinstance(term, PositionLimits):
                other = np.setdiff1d(np.arange(nq), qi)
                if np.any(np.isfinite(lo[other])) or np.any(np.isfinite(hi[other])):
                    raise ValueError("collocation bounds the configurations of revolute and prismatic joints only; "
                                     "give infinite bounds for the others")
                tighten(vi, lo[qi], hi[qi])
        return np.tile(lower, (problem.knots, 1)), np.tile(upper, (problem.knots, 1))

    def nlp(self, problem) -> "CollocationNLP":
        """The :class:`StagewiseNLP` of ``problem``."""
        _check(self, problem)
        lower, upper = self.bounds(problem)
        dtype = problem.q0.dtype
        return CollocationNLP(problem=problem, transcription=self, node_mask=jnp.asarray(self.node_mask(problem)),
                              lower=jnp.asarray(lower, dtype), upper=jnp.asarray(upper, dtype))

    # ------------------------------------------------------------------ guesses and results
    def initial_guess(self, problem, q=None, qd=None, u=None):
        """Variables (K, nw) from knot configurations ``q`` (K, nq), velocities ``qd`` (K, nv) and
        torques ``u`` (K, nu). Defaults: q from q0 to the terminal target (where a
        :class:`TerminalState` gives one) along the straight path in the tangent space at constant
        speed; zero torques. The accelerations start at zero, the midpoint torques at the knots'."""
        model, K = problem.model, problem.knots
        dtype = problem.q0.dtype
        s = jnp.linspace(0.0, 1.0, K, dtype=dtype)
        target = next((t.q for t in problem.constraints if isinstance(t, TerminalState) and t.q is not None), None)
        path = jnp.zeros(model.nv, dtype) if target is None else difference_from(model, problem.q0, jnp.asarray(target, dtype))
        q = jax.vmap(lambda s: normalize(model, integrate_from(model, problem.q0, s * path)))(s) if q is None else q
        qd = jnp.tile(path / problem.duration, (K, 1)) if qd is None else qd
        u = jnp.zeros(problem.controls.shape, dtype) if u is None else jnp.asarray(u, dtype)
        zero = jnp.zeros((K, model.nv), dtype)
        return self.pack(problem, Knot(jnp.asarray(q, dtype), jnp.asarray(qd, dtype), u, zero, u, zero))

    def torque_path(self, problem, w) -> FeedForward:
        """The optimal open-loop torques of variables ``w`` (K, nw), interpolated as the scheme
        assumes (linear, or quadratic on each interval), for :func:`mbjax.simulate`."""
        raise NotImplementedError

    def interval_errors(self, problem, w):
        """An estimate of the discretisation error of each interval, (N, 2): the largest over
        the coordinates of ``int |dq_interp/dt - v_interp| dt`` and of
        ``int |dv_interp/dt - qdd(q_interp, v_interp, tau_interp)| dt`` over the interval (Betts
        Sec. 4.7.1), with the rates interpolated through the collocation points, the state their
        integral, and the forward dynamics of the problem's ``method``; by 5-point Gauss–Legendre
        quadrature. Compare it with the accuracy wanted before re-simulating, and add knots where
        it is large."""
        h, model = self.step(problem), problem.model
        nodes = np.asarray(self.nodes)
        s, weights = np.polynomial.legendre.leggauss(5)
        s, weights = (s + 1) / 2, weights / 2
        # Lagrange basis through the nodes at s, and its integral from 0 to s
        basis = np.linalg.inv(np.vander(nodes, increasing=True))
        value = np.vander(s, len(nodes), increasing=True) @ basis
        integral = (np.vander(s, len(nodes) + 1, increasing=True)[:, 1:] / np.arange(1, len(nodes) + 1)) @ basis
        x = self.unpack(problem, w)
        v_pts, a_pts, u_pts = self.rates(problem, x)

        def one(qa, va, v_nodes, a_nodes, u_nodes):
            qdot = value @ v_nodes  # the collocated rate of q
            v = va + h * integral @ a_nodes
            q = jax.vmap(lambda dq: normalize(model, integrate_from(model, qa, dq)))(h * integral @ v_nodes)
            tau = problem.controls.torques(value @ u_nodes)
            qdd = jax.vmap(lambda q, v, t: problem.method(model, q, v, t + passive_forces_from(model, q, v)))(q, v, tau)
            return h * jnp.stack([weights @ jnp.abs(qdot - v), weights @ jnp.abs(value @ a_nodes - qdd)]).max(axis=1)

        return jax.vmap(one)(x.q[:-1], x.v[:-1], v_pts, a_pts, u_pts)

    def rates(self, problem, x: Knot):
        """(v, a, u) at each interval's collocation points, each (N, len(nodes), n)."""
        raise NotImplementedError

    def effort(self, ua, ub, um):
        """``integral_0^1 |u(s)|^2 ds`` for the interpolated torques of an interval."""
        raise NotImplementedError

    def interval_cost(self, problem, k, h, states, torques):
        """The running costs of an interval: :class:`Effort` exact for its torques,
        :class:`PathCost` by the scheme's quadrature over the ``states`` (q, v) at its nodes."""
        cost = jnp.zeros((), problem.q0.dtype)
        quadrature = np.asarray(self.quadrature)
        for term in problem.costs:
            if isinstance(term, Effort):
                cost = cost + term.weight * h * self.effort(*torques)
            elif isinstance(term, PathCost):
                t = problem.controls.ts[0] + (k + np.asarray(self.nodes)) * h
                f = [jnp.ravel(term.fn(ti, q, v)) for ti, (q, v) in zip(t, states)]
                cost = cost + term.weight * h * sum(c * (fi @ fi) for c, fi in zip(quadrature, f))
        return cost


class Trapezoidal(Collocation):
    """Trapezoidal collocation: ``x_{k+1} - x_k = h/2 (f_k + f_{k+1})``; torques linear
    between knots (second-order accurate)."""

    def effort(self, ua, ub, um=None):
        return (ua @ ua + ua @ ub + ub @ ub) / 3

    def interval(self, problem, wa, wb, k):
        h = self.step(problem)
        xa, xb = self.unpack(problem, wa), self.unpack(problem, wb)
        defects = jnp.concatenate([difference_from(problem.model, xa.q, xb.q) - h / 2 * (xa.v + xb.v),
                                   xb.v - xa.v - h / 2 * (xa.a + xb.a)])
        cost = self.interval_cost(problem, k, h, [(xa.q, xa.v), (xb.q, xb.v)], (xa.u, xb.u))
        return cost, defects, None

    def rates(self, problem, x):
        pair = lambda y: jnp.stack([y[:-1], y[1:]], axis=1)  # noqa: E731
        return pair(x.v), pair(x.a), pair(x.u)

    def torque_path(self, problem, w):
        return FeedForward.from_knots(problem.controls.ts, problem.controls.torques(self.unpack(problem, w).u), "linear")


class HermiteSimpson(Collocation):
    """Hermite–Simpson collocation (separated form): a midpoint torque and acceleration per
    interval, Simpson's rule on the cubic Hermite interpolant of the states; torques quadratic
    on each interval (fourth-order accurate)."""

    midpoint: ClassVar[bool] = True
    nodes: ClassVar[tuple] = (0.0, 0.5, 1.0)
    quadrature: ClassVar[tuple] = (1 / 6, 4 / 6, 1 / 6)

    def effort(self, ua, ub, um):
        s = GAUSS_NODES[:, None]  # the knot controls' 4-point rule: exact for the square of a quadratic
        us = 2 * (s - 0.5) * (s - 1) * ua - 4 * s * (s - 1) * um + 2 * s * (s - 0.5) * ub
        return jnp.sum(GAUSS_WEIGHTS[:, None] * us**2)

    def midpoint_state(self, problem, xa, xb):
        """(q_m, v_m): the cubic Hermite interpolant of the interval at its middle."""
        h, model = self.step(problem), problem.model
        dq = difference_from(model, xa.q, xb.q)
        qm = normalize(model, integrate_from(model, xa.q, dq / 2 + h / 8 * (xa.v - xb.v)))
        return dq, qm, (xa.v + xb.v) / 2 + h / 8 * (xa.a - xb.a)

    def interval(self, problem, wa, wb, k):
        h = self.step(problem)
        xa, xb = self.unpack(problem, wa), self.unpack(problem, wb)
        dq, qm, vm = self.midpoint_state(problem, xa, xb)
        defects = jnp.concatenate([dq - h / 6 * (xa.v + 4 * vm + xb.v), xb.v - xa.v - h / 6 * (xa.a + 4 * xa.am + xb.a)])
        cost = self.interval_cost(problem, k, h, [(xa.q, xa.v), (qm, vm), (xb.q, xb.v)], (xa.u, xb.u, xa.um))
        return cost, defects, self.point(qm, vm, xa.am, xa.um)

    def rates(self, problem, x):
        xa = jax.tree.map(lambda y: y[:-1], x)
        xb = jax.tree.map(lambda y: y[1:], x)
        _, _, vm = jax.vmap(lambda a, b: self.midpoint_state(problem, a, b))(xa, xb)
        triple = lambda a, m, b: jnp.stack([a, m, b], axis=1)  # noqa: E731
        return triple(xa.v, vm, xb.v), triple(xa.a, xa.am, xb.a), triple(xa.u, xa.um, xb.u)

    def torque_path(self, problem, w):
        """Piecewise-quadratic torques through the knots and midpoints (a diffrax cubic
        interpolation with zero cubic coefficients)."""
        x = self.unpack(problem, w)
        ts, h = problem.controls.ts, self.step(problem)
        ua, ub, um = (problem.controls.torques(y) for y in (x.u[:-1], x.u[1:], x.um[:-1]))
        b = (4 * um - 3 * ua - ub) / h
        c = 2 * (ua - 2 * um + ub) / h**2
        return FeedForward(diffrax.CubicInterpolation(ts, (jnp.zeros_like(c), c, b, ua)))


class CollocationNLP(StagewiseNLP):
    """A transcribed problem: the stage functions are the transcription's, on the problem."""

    problem: object
    transcription: Collocation
    node_mask: jax.Array
    lower: jax.Array
    upper: jax.Array

    def interval(self, wa, wb, k):
        return self.transcription.interval(self.problem, wa, wb, k)

    def node(self, w, k):
        return self.transcription.node(self.problem, w, k)

    def residual(self, z):
        return self.transcription.residual(self.problem, z)

    def curved(self, nz):
        return self.transcription.curved(self.problem)

    def retract(self, w, dx):
        return self.transcription.retract(self.problem, w, dx)

    def coords(self, w):
        return self.transcription.coords(self.problem, w)


def _knot_rollout(problem, x: Knot) -> Rollout:
    """A one-row :class:`Rollout` at the last knot, for the terminal terms."""
    return Rollout(x.u[None], Trajectory(ts=problem.controls.ts[-1:], q=x.q[None], qd=x.v[None]), jnp.zeros(0, x.q.dtype))


def _euclidean(model):
    """Indices (q, v) of the coordinates of revolute and prismatic joints."""
    qi, vi = [], []
    for j, kind in enumerate(model.joint_types):
        if kind in _EUCLIDEAN:
            qi += list(range(model.nq)[model.q_slice(j)])
            vi += list(range(model.nv)[model.v_slice(j)])
    return np.asarray(qi, np.int32), np.asarray(vi, np.int32)


def _check(transcription, problem):
    for term in problem.costs:
        if not isinstance(term, (Effort, PathCost, TerminalState)):
            raise TypeError(f"collocation takes Effort, PathCost and TerminalState as costs; got {type(term).__name__} "
                            "(limits are constraints: bounds on the variables)")
    for term in problem.constraints:
        if not isinstance(term, (TerminalState, TorqueLimits, VelocityLimits, PositionLimits)):
            raise TypeError(f"collocation takes TerminalState and the limit terms as constraints; got {type(term).__name__}")
    tree = {type(d) for d in REGISTRY.values()}
    if transcription.dynamics == "inverse" and type(problem.method) not in tree:
        raise ValueError(f"dynamics='inverse' collocates the tree's inverse dynamics, but the problem's method is "
                         f"{type(problem.method).__name__}, not a formulation of the tree; use dynamics='forward'")
