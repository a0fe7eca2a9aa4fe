"""The seed papers' formulations of the equations of motion, beside the recursive ones.

``free_floating``: the momentum form of Wilde et al. 2018 (see that module). The rest of this package:
Mufti's (1983) maximal-coordinate formulations of tree dynamics: per-body Newton-Euler
equations with the hinge forces as Lagrange multipliers, solved as a dense KKT system, by
tree-ordered sparse elimination, by the Schur complement, or by the barycentric K matrix.

Public entry points: :func:`maximal_state`, :func:`joint_state`, :func:`maximal_dynamics`,
:func:`maximal_state_derivative`, :func:`constraint_violation`; ``forward_dynamics(...,
method="kkt" | "sparse_kkt" | "schur" | "barycentric")`` uses them from a joint-space state.
"""

from .forward import METHODS, constraint_violation, maximal_dynamics, maximal_state_derivative
from .maximal import MaximalState, PrescribedBase, joint_state, maximal_state
from .newton_euler import MaximalSolution

__all__ = [
    "METHODS", "MaximalSolution", "MaximalState", "PrescribedBase", "constraint_violation", "joint_state",
    "maximal_dynamics", "maximal_state", "maximal_state_derivative",
]
