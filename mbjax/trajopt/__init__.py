"""Trajectory optimisation by direct shooting on top of :func:`mbjax.simulate`, or by direct
collocation.

A :class:`TrajectoryProblem` holds the model, the initial state, knot-interpolated torques
(:class:`KnotControls`), costs and constraints in residual form (:mod:`.costs`). :func:`solve`
takes a transcription:

- shooting (:class:`SingleShooting`, :class:`MultipleShooting`) turns the decision variables
  into a simulated trajectory and minimises the costs subject to the constraints by an
  augmented Lagrangian (:class:`AugmentedLagrangian`, :func:`Penalty`) around an inner solver
  (:class:`LevenbergMarquardt` by default, :class:`FDDP`, or one of optimistix or optax);
- collocation (:class:`HermiteSimpson`, :class:`Trapezoidal`) makes the states, torques and
  accelerations at the knots the variables, with the dynamics as constraints, and solves the
  program by an :class:`InteriorPoint` method whose Newton steps cost time linear in the knots.

:func:`solve_restarts` runs several initial guesses in one compiled program and keeps the best;
:func:`solve_batch` solves a collocation problem from many initial states, or for many models, in
one call.

Example::

    from mbjax import trajopt
    problem = trajopt.TrajectoryProblem(model, q0, qd0, duration=2.0, knots=41, actuated=["joint2"],
                                        costs=[trajopt.Effort()],
                                        constraints=[trajopt.TerminalState(q_up, qd_zero), trajopt.TorqueLimits()])
    solution = trajopt.solve(problem, u_guess)
    solution = trajopt.solve(problem, transcription=trajopt.HermiteSimpson())  # collocation
"""

from .collocation import Collocation, HermiteSimpson, Trapezoidal
from .controls import KnotControls, actuated_dofs
from .ddp import FDDP
from .interior_point import InteriorPoint, InteriorPointStart, InteriorPointState
from .lagrangian import AugmentedLagrangian, Multipliers, Penalty, violation
from .levenberg_marquardt import LevenbergMarquardt
from .problem import TrajectoryProblem
from .shooting import MultipleShooting, ShootingNodes, SingleShooting
from .solution import Solution
from .optimise import best_restart, solve, solve_batch, solve_restarts
from .costs import Effort, PathCost, PositionLimits, Rollout, TerminalState, Term, TorqueLimits, VelocityLimits

__all__ = [
    "AugmentedLagrangian", "Collocation", "Effort", "FDDP", "HermiteSimpson", "InteriorPoint", "InteriorPointStart",
    "InteriorPointState",
    "KnotControls", "LevenbergMarquardt", "MultipleShooting", "Multipliers", "PathCost", "Penalty",
    "PositionLimits", "Rollout", "ShootingNodes", "SingleShooting", "Solution", "TerminalState", "Term", "TorqueLimits",
    "Trapezoidal", "TrajectoryProblem", "VelocityLimits", "actuated_dofs", "best_restart", "solve", "solve_batch", "solve_restarts", "violation",
]
