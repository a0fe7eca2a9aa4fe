"""Direct shooting transcriptions: how the decision variables become a simulated trajectory.

- :class:`SingleShooting`: the variables are the knot torques ``u`` (K, nu); one simulation
  from the initial state over the whole horizon.
- :class:`MultipleShooting`: the horizon is cut into S segments of equal numbers of knot
  intervals; the variables are ``u`` and the states at the S - 1 inner segment boundaries
  (:class:`ShootingNodes`). The segments are simulated in parallel (one vmapped simulation),
  and continuity is asked by the defect constraints
  ``d_i = (q_i(t_{i+1}) (-) q_{i+1}, qd_i(t_{i+1}) - qd_{i+1}) = 0``, with ``q_i(t)`` the
  simulation of segment i and ``(q_{i+1}, qd_{i+1})`` the next node.
  Instability is then confined to one segment at a time, and the states can be initialised
  along a guessed path.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ..configuration import difference_from, normalize
from ..simulation.trajectory import Trajectory
from .problem import TrajectoryProblem
from .costs import Rollout


def _knot_values(problem: TrajectoryProblem, u):
    u = jnp.asarray(u, problem.q0.dtype)
    if u.shape != problem.controls.shape:
        raise ValueError(f"knot values have shape {u.shape}; the problem has {problem.controls.shape} "
                         "(knots, actuated coordinates)")
    return u


class SingleShooting(eqx.Module):
    """Single shooting: the decision variables are the knot values ``u`` (K, nu)."""

    def initial_guess(self, problem: TrajectoryProblem, u):
        """Decision variables from knot values ``u`` (K, nu)."""
        return _knot_values(problem, u)

    def rollout(self, problem: TrajectoryProblem, z) -> Rollout:
        traj = problem.simulate(z, problem.q0, problem.qd0, 0, problem.knots - 1)
        return Rollout(z, traj, jnp.zeros(0, z.dtype))


class ShootingNodes(eqx.Module):
    """Multiple-shooting variables: knot values ``u`` (K, nu) and the states ``q`` (S-1, nq),
    ``qd`` (S-1, nv) at the inner segment boundaries (q is normalised where it is used)."""

    u: jax.Array
    q: jax.Array
    qd: jax.Array


class MultipleShooting(eqx.Module):
    """Multiple shooting over ``segments`` segments (``knots - 1`` must be a multiple of it)."""

    segments: int = eqx.field(static=True)

    def __check_init__(self):
        if int(self.segments) < 1:
            raise ValueError(f"segments must be a positive integer; got {self.segments}")

    def intervals(self, problem: TrajectoryProblem) -> int:
        """Knot intervals per segment."""
        n = problem.knots - 1
        if n % self.segments:
            raise ValueError(f"{problem.knots} knots make {n} intervals, which {self.segments} segments cannot "
                             f"share evenly; choose knots = {self.segments} * m + 1")
        return n // self.segments

    def node_times(self, problem: TrajectoryProblem):
        """Times (S-1,) of the inner segment boundaries."""
        return problem.controls.ts[self.intervals(problem)::self.intervals(problem)][:-1]

    def initial_guess(self, problem: TrajectoryProblem, u, q=None, qd=None) -> ShootingNodes:
        """Variables from knot values ``u`` (K, nu) and node states ``q`` (S-1, nq), ``qd`` (S-1, nv)
        at :meth:`node_times` (e.g. along an interpolated path); without them, the states of a
        single-shooting rollout of ``u``."""
        u = _knot_values(problem, u)
        m = self.intervals(problem)
        if q is None or qd is None:
            traj = problem.simulate(u, problem.q0, problem.qd0, 0, problem.knots - 1)
            at = slice(m * problem.substeps, -1, m * problem.substeps)
            q = traj.q[at] if q is None else q
            qd = traj.qd[at] if qd is None else qd
        q, qd = jnp.asarray(q, u.dtype), jnp.asarray(qd, u.dtype)
        expected = ((self.segments - 1, problem.model.nq), (self.segments - 1, problem.model.nv))
        if (q.shape, qd.shape) != expected:
            raise ValueError(f"node states have shapes {q.shape}, {qd.shape}; expected {expected}")
        return ShootingNodes(u, q, qd)

    @staticmethod
    def defects(model, q_nodes, qd_nodes, q_ends, qd_ends):
        """The continuity defects (flat) between the inner nodes ``(q_nodes, qd_nodes)``
        (S-1 rows) and the ends of the segments before them."""
        position = jax.vmap(difference_from, (None, 0, 0))(model, q_nodes, q_ends)
        return jnp.concatenate([position, qd_ends - qd_nodes], axis=1).reshape(-1)

    def rollout(self, problem: TrajectoryProblem, z: ShootingNodes) -> Rollout:
        model, m = problem.model, self.intervals(problem)
        q_nodes = jax.vmap(normalize, (None, 0))(model, z.q)
        q_start = jnp.concatenate([problem.q0[None], q_nodes])
        qd_start = jnp.concatenate([problem.qd0[None], z.qd])
        first = jnp.arange(self.segments) * m

        def segment(q0, qd0, first):
            return problem.simulate(z.u, q0, qd0, first, m)

        seg = eqx.filter_vmap(segment)(q_start, qd_start, first)
        defects = self.defects(model, q_nodes, z.qd, seg.q[:-1, -1], seg.qd[:-1, -1])

        def stitch(x):  # drop each segment's last row (the next one's first), keep the final one
            return jnp.concatenate([x[:, :-1].reshape(-1, *x.shape[2:]), x[-1, -1:]])

        traj = Trajectory(ts=stitch(seg.ts), q=stitch(seg.q), qd=stitch(seg.qd))
        return Rollout(z.u, traj, defects)
