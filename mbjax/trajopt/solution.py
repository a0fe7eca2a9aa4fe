"""The result of :func:`mbjax.trajopt.solve`: optimal knot torques, the optimised trajectory,
convergence figures, an independent re-simulation and a plot."""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..checks import default_tolerance
from ..simulation.controllers import FeedForward
from ..simulation.integration import simulate
from ..simulation.trajectory import Trajectory


class Solution(eqx.Module):
    """An optimised trajectory (batched over restarts where it comes from
    :func:`mbjax.trajopt.solve_restarts`).

    **Fields:**

    - ``variables``: the decision variables (knot values, and node states for multiple
      shooting), to warm-start another solve.
    - ``u`` (K, nu): knot torques of the actuated coordinates.
    - ``trajectory``: the simulated motion on the integration grid (a :class:`Trajectory`).
    - ``cost``: the objective ``sum weight |r|^2``; ``violation``: the largest constraint
      violation (defects included).
    - ``converged``: ``violation <= tolerance``, and the inner solver converged or the cost
      changed by at most ``cost_tolerance`` (relative) over the last outer iteration.
    - ``iterations``: inner iterations in all (Levenberg–Marquardt steps or optax updates);
      ``outer_iterations``: augmented-Lagrangian updates.
    - ``history`` (O, 2): cost and violation after each outer iteration (NaN after the end).
    - ``torques``: for collocation, the optimal torques as the scheme interpolates them (a
      :class:`FeedForward`); ``None`` for shooting (the problem's knot interpolation).
    - ``interval_errors`` (N, 2): for collocation, the estimated discretisation error of each
      interval in q and in qd (:meth:`mbjax.trajopt.Collocation.interval_errors`).
    """

    variables: object
    u: jax.Array
    trajectory: Trajectory
    cost: jax.Array
    violation: jax.Array
    converged: jax.Array
    iterations: jax.Array
    outer_iterations: jax.Array
    history: jax.Array
    torques: FeedForward | None = None
    interval_errors: jax.Array | None = None

    def summary(self) -> str:
        """One line for a log: convergence, objective, violation and iteration counts."""
        return (f"converged {bool(self.converged)}, cost {float(self.cost):.6g}, violation {float(self.violation):.1e}, "
                f"{int(self.iterations)} inner iterations in {int(self.outer_iterations)} outer")

    def controller(self, problem) -> FeedForward:
        """The optimal open-loop torques ``tau(t, q, qd)``, for :func:`mbjax.simulate`."""
        return problem.controls.controller(self.u) if self.torques is None else self.torques

    def resimulate(self, problem, solver=None, rtol: float | None = None, atol: float | None = None,
                   saves: int = 201):
        """An independent check: simulate the optimal torques again with an adaptive solver at
        tight tolerances (default ``Dopri8``; the optimisation used fixed steps) whose steps
        end on the knots (the kinks of linear interpolation) and at ``saves`` even times.

        ``rtol``, ``atol`` default to 1e-12 for a float64 model and to 100 units of roundoff
        (1.2e-5) for a float32 one (``mbjax.checks.default_tolerance``): a float32 run cannot
        reach 1e-12, and its steps would shrink until ``max_steps``.

        **Returns:** a :class:`Trajectory`; its last row is the state at the horizon. The
        problem's dynamics have no joint stops, so neither has this run (``limits=False``).
        """
        rtol, atol = (default_tolerance(problem.model.dtype, 1e-12, 100) if x is None else x for x in (rtol, atol))
        ts = jnp.union1d(problem.controls.ts, jnp.linspace(0.0, problem.duration, saves))
        return simulate(problem.model, problem.q0, problem.qd0, 0.0, problem.duration, tau=self.controller(problem),
                        method=problem.method, solver=diffrax.Dopri8() if solver is None else solver, rtol=rtol,
                        atol=atol, saveat=ts, max_steps=1_000_000, limits=False)

    def plot(self, problem, path: str | None = None, title: str = ""):
        """Joint positions, velocities and knot torques against time (matplotlib). Saves the
        figure to ``path`` (then closes it) or returns it."""
        from ..plotting import coordinate_labels, finish, plot_coordinates, pyplot

        if np.ndim(self.cost):
            raise ValueError("plot one solution at a time: take the best restart, or index the batch")
        plt = pyplot()
        fig, ax = plt.subplots(1, 3, figsize=(15, 4))
        plot_coordinates(self.trajectory, ax[0], problem.model, "q")
        plot_coordinates(self.trajectory, ax[1], problem.model, "qd")
        fine = jnp.linspace(0.0, problem.duration, 400)
        tau = jax.vmap(self.controller(problem).path.evaluate)(fine)
        labels = coordinate_labels(problem.model, problem.model.nv, "v")
        for k, dof in enumerate(problem.controls.dofs):
            ax[2].plot(fine, tau[:, dof], color=f"C{k % 10}", label=labels[dof])
            ax[2].plot(problem.controls.ts, self.u[:, k], ".", color=f"C{k % 10}")
        ax[2].set(xlabel="time [s]", ylabel="torque [N m, N]", title="knot torques")
        ax[2].grid(alpha=0.3)
        ax[2].legend(fontsize="small", ncol=2)
        fig.suptitle(title or f"cost {float(self.cost):.4g}, violation {float(self.violation):.1e}, "
                              f"{int(self.iterations)} iterations")
        return finish(fig, path, dpi=100)
