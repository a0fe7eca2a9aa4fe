"""Forward dynamics of closed kinematic chains (Mufti 1983 Sec. 4, Eq. 73; Huang et al. 2000 Eq. 1).

The tree's equations of motion with the loop-closure constraints Phi(q) = 0 at acceleration
level, and Baumgarte's stabilisation (Mufti 1983 Remark 4):

    M(q) qdd + h(q, qd) = tau + Phi_q^T lam,
    Phi_q qdd = gamma - alpha Phi_dot - beta Phi,       gamma = -(Phi_q qd)_q qd.

``lam`` are the multipliers; ``Phi_q^T lam`` is the generalized force of the cut joints and
:attr:`ConstrainedDynamics.wrench` the spatial force each cut joint transmits.
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..checks import check_external_forces, check_state
from ..dynamics.crba import mass_matrix_from
from ..dynamics.protocol import Dynamics
from ..dynamics.rnea import rnea_from
from ..kinematics import tree_kinematics
from ..model.model import Model
from ..configuration import configuration_rate
from .closures import LoopClosures
from .closure_kinematics import loop_kinematics_from
from .solvers import ClosureSolver


class ConstrainedDynamics(eqx.Module):
    """Result of :func:`constrained_forward_dynamics`.

    - ``qdd`` (nv,): joint accelerations.
    - ``multipliers`` (nc,): Lagrange multipliers lam; ``Phi_q^T lam`` is the generalized
      constraint force (minimum-norm lam for redundant constraints with ``"svd"``).
    - ``wrench`` (nl, 6): ``(force, moment)`` each cut joint exerts on its body b, about the
      origin of joint frame B and in its axes (body a receives the opposite).
    - ``residual`` (nc,): the position residual Phi(q), to monitor drift.
    """

    qdd: jax.Array
    multipliers: jax.Array
    wrench: jax.Array
    residual: jax.Array


def check_closures(model: Model, closures: LoopClosures):
    """Trace-time check that ``closures`` were built for a model with these bodies."""
    if not isinstance(closures, LoopClosures):
        raise TypeError(f"closures must be a LoopClosures (from LoopClosureBuilder), not {type(closures).__name__}")
    top = max(max(pair) for pair in closures.bodies)
    if top >= model.nbodies:
        raise ValueError(
            f"closures refer to body {top} but model {model.name!r} has {model.nbodies} bodies; "
            "build the closures with LoopClosureBuilder(model) for this model"
        )


def constrained_dynamics_from(model, closures, q, qd, tau, f_ext, solver: ClosureSolver, checked=True):
    """:func:`constrained_forward_dynamics` without input checks (``checked=False``: nor the
    solver's rank check)."""
    tk = tree_kinematics(model, q)
    M = mass_matrix_from(model, tk)
    h = rnea_from(model, tk, q, qd, jnp.zeros_like(qd), f_ext)
    lk = loop_kinematics_from(model, closures, tk, q, qd)
    qdd, lam = solver(M, tau - h, lk.jacobian, lk.gamma, lk.phi_dot, lk.phi, checked)
    # w_l = sum over the rows c of closure l of W[c] lam[c]
    rows = np.asarray(closures.row_loops, np.int32)
    wrench = jax.ops.segment_sum(lk.wrench_map * lam[:, None], rows, closures.nloops, indices_are_sorted=True)
    return ConstrainedDynamics(qdd, lam, wrench, lk.phi)


@eqx.filter_jit
def constrained_forward_dynamics(model: Model, closures: LoopClosures, q, qd, tau, f_ext=None,
                                 **options) -> ConstrainedDynamics:
    """Accelerations and loop forces of a tree closed by cut joints.

    **Arguments:**

    - ``q`` (nq,), ``qd`` (nv,), ``tau`` (nv,); ``f_ext`` (nbodies, 6) optional external
      wrenches on the bodies (body axes, about the body origin).
    - ``options``: the fields of :class:`~mbjax.ClosureSolver` as keywords:
      ``method`` (``"kkt"``, the default, ``"schur"``, ``"nullspace"``, ``"svd"`` or
      ``"damped"``), the Baumgarte gains ``alpha``, ``beta`` and the thresholds ``rcond``,
      ``damping``.

    **Returns:** a :class:`ConstrainedDynamics` (qdd, multipliers, wrench, residual).
    """
    solver = ClosureSolver(**options)
    check_closures(model, closures)
    q, qd, tau = check_state(model, q, qd=qd, tau=tau)
    f_ext = check_external_forces(model, f_ext)
    return constrained_dynamics_from(model, closures, q, qd, tau, f_ext, solver)


class ClosedChainDynamics(Dynamics):
    """The closed chain's forward dynamics in the dynamics protocol (:class:`mbjax.Dynamics`):
    ``dynamics(model, q, qd, tau, f_ext=None) -> qdd`` by :func:`constrained_forward_dynamics`,
    for :func:`mbjax.forward_dynamics`, :func:`mbjax.simulate` and
    :class:`mbjax.trajopt.TrajectoryProblem` (``method=ClosedChainDynamics(closures, ...)``).

    **Fields:** ``closures`` (a :class:`LoopClosures`, differentiated and batched like the
    model); ``solver``: a :class:`~mbjax.ClosureSolver` (method, Baumgarte gains,
    thresholds), given as one or by its fields as keywords; ``checked`` (static, keyword):
    check the inputs and raise when Phi_q loses rank (kkt, schur, nullspace), or let the
    non-finite or huge accelerations of a singular configuration through, for an optimiser's
    trial steps (:class:`mbjax.trajopt.TrajectoryProblem` turns the checks off).

    Example::

        alpha, beta = mbjax.constraints.critical(0.05)
        traj = mbjax.simulate(model, q0, qd0, 0.0, 2.0, tau=tau,
                              method=mbjax.ClosedChainDynamics(closures, alpha=alpha, beta=beta))

    The initial state should satisfy the constraints (:func:`mbjax.constraints.project`); Baumgarte
    stabilisation then keeps the integrator's drift from growing.
    """

    closures: LoopClosures
    solver: ClosureSolver

    def __init__(self, closures: LoopClosures, solver: ClosureSolver | None = None, *, checked: bool = True,
                 **options):
        if not isinstance(closures, LoopClosures):
            raise TypeError(f"closures must be a LoopClosures (from LoopClosureBuilder), not {type(closures).__name__}")
        if solver is not None and options:
            raise TypeError(f"give the solver either as a ClosureSolver or by its fields {sorted(options)}, not both")
        self.closures = closures
        self.solver = ClosureSolver(**options) if solver is None else solver
        self.checked = checked

    def forward(self, model: Model, q, qd, tau, f_ext):
        """Joint accelerations qdd (nv,), without input checks (the rank check is ``checked``'s)."""
        check_closures(model, self.closures)
        return constrained_dynamics_from(model, self.closures, q, qd, tau, f_ext, self.solver, self.checked).qdd


def constrained_vector_field(
    model: Model,
    closures: LoopClosures,
    control: Callable | None = None,
    f_ext=None,
    **options,
) -> Callable:
    """The ODE ``d/dt (q, qd) = (G(q) qd, qdd)`` of the closed chain, for diffrax.

    **Arguments:** ``control(t, q, qd, args) -> tau`` (nv,), or None for zero torques;
    ``f_ext`` (nbodies, 6) constant external wrenches; ``options``: the fields of
    :class:`~mbjax.ClosureSolver` (method, alpha, beta, rcond, damping).

    **Returns:** ``f(t, y, args)`` with ``y = (q, qd)``, usable as ``diffrax.ODETerm(f)``.
    ``G(q) qd`` is :func:`mbjax.configuration_rate` (quaternion rates for spherical and free
    joints), so q stays on its manifold to the integrator's accuracy. :func:`mbjax.simulate`
    with ``method=ClosedChainDynamics(closures, ...)`` integrates the same equations (and adds
    the model's joint springs and dampers).
    """
    check_closures(model, closures)
    dynamics = ClosedChainDynamics(closures, **options)

    def field(t, y, args):
        q, qd = y
        tau = jnp.zeros_like(qd) if control is None else control(t, q, qd, args)
        return configuration_rate(model, q, qd), dynamics(model, q, qd, tau, f_ext)

    return field
