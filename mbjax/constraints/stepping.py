"""Fixed-step time stepping of closed chains: Huang's stepper and the multiplier solvers.

``step(model, closures, q, qd, tau, dt, method=...)`` advances the joint-space state by one
step Δt and returns the reactions; ``rollout`` repeats it N times with ``lax.scan``.

- ``method="huang"``: the singularity-free stepper of Huang et al. 2000 (:mod:`.huang`). The state is
  lifted to maximal coordinates (:func:`~mbjax.maximal_state`), every joint (tree and cut)
  is enforced by its reactions Q solved from Eq. (36), the bodies are advanced to second
  order, and the joint coordinates are read back from the bodies' poses
  (:func:`~mbjax.joint_state`): that read-out re-imposes the tree joints exactly, so the loop
  residual measures the stepper's drift. Revolute angles are unwrapped against the previous
  step. ``reactions`` = Q, in the order of ``huang_joints(model, closures).row_names``.
- ``method`` in ``"kkt" | "schur" | "nullspace" | "svd" | "damped"``: the accelerations of
  :func:`~mbjax.constrained_forward_dynamics` (Eq. 73 of Mufti 1983, with optional Baumgarte
  ``alpha``, ``beta``), then a semi-implicit Euler step ``qd += qdd Δt``,
  ``q <- q (+) qd Δt``. ``reactions`` = the Lagrange multipliers (nc,). Without closures
  the accelerations are the tree's (ABA).

Both add the model's joint springs and dampers (:func:`~mbjax.passive_forces`) to ``tau``,
as :func:`~mbjax.simulate` does.
"""

from __future__ import annotations


import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..checks import check_external_forces, check_state
from ..compilation import filter_jit
from ..configuration import integrate_from
from ..dynamics.aba import aba_from
from ..dynamics.bodies import external_forces_or_zero
from ..dynamics.passive import passive_forces_from
from ..formulations.maximal import joint_state_from, maximal_state_from
from ..kinematics import tree_kinematics
from ..model.model import Model
from ..simulation.fixed_steps import scan_steps
from ..simulation.trajectory import Trajectory
from .closures import LoopClosures
from .closed_chain import check_closures, constrained_dynamics_from
from .huang import applied_loads, huang_joints, joint_wrenches, step_bodies
from .closure_kinematics import residual_from
from .solvers import METHODS, ClosureSolver

#: the methods of :func:`step`
STEP_METHODS = ("huang",) + METHODS


class StepResult(eqx.Module):
    """One step of :func:`step`.

    - ``q`` (nq,), ``qd`` (nv,): the state at t + Δt.
    - ``reactions``: ``"huang"``: the joint reactions Q (nr,) of Eq. (36) (forces in N,
      moments in N m; see :mod:`mbjax.constraints.huang`); other methods: the multipliers.
    - ``wrench`` (nl, 6): ``(force, moment)`` each cut joint exerts on its body b during the
      step, about the origin of joint frame B and in its axes, as
      :attr:`ConstrainedDynamics.wrench` (comparable across methods).
    - ``joint_wrench`` (nj, 6), ``"huang"`` only (else ``None``): ``(force, moment)`` on body
      b of every joint (tree joints, then cut joints), about the origin of joint frame B, in
      world axes.
    """

    q: jax.Array
    qd: jax.Array
    reactions: jax.Array
    wrench: jax.Array
    joint_wrench: jax.Array | None = None


def _angle_mask(model: Model):
    """Coordinates of q that are angles (revolute, universal, cylindrical's second)."""
    angles = {"revolute": (True,), "universal": (True, True), "cylindrical": (False, True)}
    return np.concatenate([np.asarray(angles.get(j.name, (False,) * j.nq)) for j in model.topology.joints])


def huang_step_from(model, closures, q, qd, tau, dt, f_ext):
    """``(q, qd, Q, joint wrenches (nj, 6) in world axes)`` after one step of Huang's stepper."""
    joints = huang_joints(model, closures)
    state = maximal_state_from(model, q, qd)
    force, moment = applied_loads(model, state, q, tau + passive_forces_from(model, q, qd), f_ext)
    new, Q, frames = step_bodies(model, joints, state, force, moment, dt)
    q1, qd1 = joint_state_from(model, new)
    mask = _angle_mask(model)
    q1 = jnp.where(mask, q + jnp.arctan2(jnp.sin(q1 - q), jnp.cos(q1 - q)), q1)  # unwrap the angles
    return q1, qd1, Q, joint_wrenches(joints, frames, Q), frames, joints


def step_from(model, closures, q, qd, tau, dt, f_ext, solver: ClosureSolver | None) -> StepResult:
    """:func:`step` without input checks; ``solver`` None: Huang's stepper."""
    nl = 0 if closures is None else closures.nloops
    if solver is None:
        q1, qd1, Q, wrench, frames, joints = huang_step_from(model, closures, q, qd, tau, dt, f_ext)
        # cut joints: world axes -> axes of joint frame B, as ConstrainedDynamics.wrench
        RBt = spatial.transpose(frames.RB[joints.ntree:])
        cut = wrench[joints.ntree:]
        cut = jnp.concatenate([spatial.matvec(RBt, cut[:, :3]), spatial.matvec(RBt, cut[:, 3:])], -1)
        return StepResult(q1, qd1, Q, cut, wrench)
    tau = tau + passive_forces_from(model, q, qd)
    if closures is None:
        qdd = aba_from(model, q, qd, tau, external_forces_or_zero(model, f_ext, qd.dtype))
        lam, wrench = jnp.zeros(0, qd.dtype), jnp.zeros((0, 6), qd.dtype)
    else:
        cd = constrained_dynamics_from(model, closures, q, qd, tau, f_ext, solver)
        qdd, lam, wrench = cd.qdd, cd.multipliers, cd.wrench
    qd1 = qd + dt * qdd  # semi-implicit (symplectic) Euler
    return StepResult(integrate_from(model, q, dt * qd1), qd1, lam, wrench.reshape(nl, 6))


def _stepper(model, closures, method, options) -> ClosureSolver | None:
    """The multiplier solver of ``method`` (None for Huang's stepper), after checking the closures."""
    if closures is not None:
        check_closures(model, closures)
    if method not in STEP_METHODS:
        raise ValueError(f"unknown stepping method {method!r}; use one of {STEP_METHODS}")
    if method != "huang":
        return ClosureSolver(method=method, **options)
    if options:
        raise TypeError(f"Huang's stepper takes no solver options (got {sorted(options)}): its right-hand side "
                        "already corrects the joint errors; pass them with method='kkt', 'schur', ... instead")
    return None


@filter_jit
def step(
    model: Model,
    closures: LoopClosures | None,
    q,
    qd,
    tau,
    dt,
    f_ext=None,
    *,
    method: str = "huang",
    **options,
) -> StepResult:
    """Advance a (closed-chain) model by one fixed step.

    **Arguments:**

    - ``closures``: the cut joints (:class:`LoopClosures`), or ``None`` for a tree.
    - ``q`` (nq,), ``qd`` (nv,), ``tau`` (nv,) joint torques held over the step, ``dt`` the
      step; ``f_ext`` (nbodies, 6) optional external wrenches (body axes, about the origin).
    - ``method``: ``"huang"`` (Huang et al. 2000, Eq. 36) or a solver of
      :func:`~mbjax.constrained_forward_dynamics` (``"kkt"``, ``"schur"``, ``"nullspace"``,
      ``"svd"``, ``"damped"``) with a semi-implicit Euler step; ``options``: that solver's
      other fields (:class:`~mbjax.ClosureSolver`: ``alpha``, ``beta``,
      ``rcond``, ``damping``), which ``"huang"`` does not take (its right-hand side already
      corrects the joint errors).

    **Returns:** a :class:`StepResult` (q, qd, reactions, cut-joint wrenches).
    """
    solver = _stepper(model, closures, method, options)
    q, qd, tau = check_state(model, q, qd=qd, tau=tau)
    f_ext = check_external_forces(model, f_ext)
    return step_from(model, closures, q, qd, tau, jnp.asarray(dt, qd.dtype), f_ext, solver)


@filter_jit
def rollout(
    model: Model,
    closures: LoopClosures | None,
    q0,
    qd0,
    tau,
    dt,
    steps: int,
    f_ext=None,
    *,
    method: str = "huang",
    **options,
):
    """``steps`` fixed steps of :func:`step` from ``(q0, qd0)`` (one ``lax.scan``).

    **Arguments:** as :func:`step`; ``tau``: (nv,) constant, (steps, nv) one row per step, or
    a controller ``tau(t, q, qd)`` (e.g. :class:`~mbjax.PD`); ``steps`` (static) the number of
    steps.

    **Returns:** ``(trajectory, reactions)``: a :class:`~mbjax.Trajectory` with the steps + 1
    states at ``ts = dt * arange(steps + 1)`` and the loop residual Phi(q) of each state in
    ``trajectory.residual`` (``None`` without closures); ``reactions`` (steps, ...) those of
    each step (see :class:`StepResult`).
    """
    solver = _stepper(model, closures, method, options)
    q0, qd0 = check_state(model, q0, qd=qd0)
    f_ext = check_external_forces(model, f_ext)
    dt = jnp.asarray(dt, qd0.dtype)

    def one(q, qd, u, carry):
        out = step_from(model, closures, q, qd, u, dt, f_ext, solver)
        return out.q, out.qd, carry, out.reactions

    traj, reactions = scan_steps(model, one, q0, qd0, tau, dt, steps)
    if closures is not None:
        residual = jax.vmap(lambda q: residual_from(model, closures, tree_kinematics(model, q)))(traj.q)
        traj = Trajectory(traj.ts, traj.q, traj.qd, residual=residual)
    return traj, reactions
