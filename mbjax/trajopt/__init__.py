"""Trajectory optimisation by direct shooting on top of :func:`mbjax.simulate`.

A :class:`TrajectoryProblem` holds the model, the initial state, knot-interpolated torques
(:class:`KnotControls`), costs and constraints in residual form (:mod:`.terms`). The
transcription (:class:`SingleShooting` or :class:`MultipleShooting`) turns the decision
variables into a simulated trajectory; :func:`solve` minimises the costs subject to the
constraints by an augmented Lagrangian (:class:`AugmentedLagrangian`, :func:`Penalty`) around an
optimistix (Levenberg–Marquardt by default) or optax solver; :func:`solve_restarts` runs
several initial guesses as one vmapped program and keeps the best.

Example::

    from mbjax import trajopt
    problem = trajopt.TrajectoryProblem(model, q0, qd0, duration=2.0, knots=41, actuated=["joint2"],
                                        costs=[trajopt.Effort()],
                                        constraints=[trajopt.TerminalState(q_up, qd_zero), trajopt.TorqueLimits()])
    solution = trajopt.solve(problem, u_guess)
"""

from .controls import KnotControls, actuated_dofs
from .lagrangian import AugmentedLagrangian, Multipliers, Penalty, violation
from .problem import TrajectoryProblem
from .shooting import MultipleShooting, ShootingNodes, SingleShooting
from .solution import Solution
from .optimise import best_restart, solve, solve_restarts
from .costs import Effort, PathCost, PositionLimits, Rollout, TerminalState, Term, TorqueLimits, VelocityLimits

__all__ = [
    "AugmentedLagrangian", "Effort", "KnotControls", "MultipleShooting", "Multipliers", "PathCost", "Penalty",
    "PositionLimits", "Rollout", "ShootingNodes", "SingleShooting", "Solution", "TerminalState", "Term", "TorqueLimits",
    "TrajectoryProblem", "VelocityLimits", "actuated_dofs", "best_restart", "solve", "solve_restarts", "violation",
]
