"""``simulate``: the equations of motion integrated with diffrax."""

from __future__ import annotations

import sys

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx

from ..checks import check_nonnegative, check_state, default_tolerance
from ..compilation import filter_jit
from ..configuration import normalize
from ..model.model import Model
from . import stability
from .trajectory import Trajectory, diagnose
from ..methods import as_dynamics
from .vector_field import vector_field

#: saved times when ``saveat`` is not given
DEFAULT_SAVES = 201
#: a run has diverged once max |qd| exceeds this multiple of (1 + max |qd0|), or the state is not finite
DIVERGENCE = 1e6
_DIVERGED = (
    "simulate: the system diverged{when}: the state became non-finite or max |qd| grew past {factor:.0e} (1 + max "
    "|qd0|). Likely causes: an unstable controller (gains of the wrong sign or too large for the model), a "
    "singular mass matrix (a joint that moves no inertia), joint springs or dampers too stiff for an explicit "
    "solver (try solver=diffrax.Kvaerno5()), or external forces that grow without bound"
)


class DivergenceError(RuntimeError):
    """:func:`simulate`'s state blew up (see its message for when, and the likely causes)."""


def progress_meter(progress):
    """``True``: a tqdm bar on a terminal (plain text lines without tqdm, and a line per quarter
    of the run in a log, as :class:`mbjax.progress.Progress`); ``False``: none; or a diffrax meter."""
    if isinstance(progress, diffrax.AbstractProgressMeter):
        return progress
    if not progress:
        return diffrax.NoProgressMeter()
    if not sys.stderr.isatty():
        return diffrax.TextProgressMeter(minimum_increase=0.25)
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return diffrax.TextProgressMeter(minimum_increase=0.1)
    return diffrax.TqdmProgressMeter()


def as_event(event, model, tol):
    """A ``diffrax.Event`` from ``event``: an Event, or a function ``cond(t, q, qd)`` whose sign
    change stops the run; the crossing time is located with Newton's method to ``tol``."""
    if event is None or isinstance(event, diffrax.Event):
        return event
    if not callable(event):
        raise TypeError("event must be a diffrax.Event or a function cond(t, q, qd) -> scalar")

    def cond_fn(t, y, args, **kwargs):
        q, qd = y[:2]
        return event(t, normalize(args[0], q), qd)

    return diffrax.Event(cond_fn, root_finder=optx.Newton(rtol=tol, atol=tol))


def with_divergence(event, qd0):
    """``event`` (a ``diffrax.Event`` or None) that also stops the run when it diverges (see
    :data:`DIVERGENCE`); its ``event_mask`` is ``(event's mask, diverged)``, or ``diverged``
    without ``event``."""
    bound = DIVERGENCE * (1.0 + jnp.max(jnp.abs(qd0), initial=0.0))

    def diverged(t, y, args, **kwargs):
        q, qd = y[:2]
        finite = jnp.all(jnp.isfinite(q)) & jnp.all(jnp.isfinite(qd))
        return ~finite | (jnp.max(jnp.abs(qd), initial=0.0) > bound)

    if event is None:
        return diffrax.Event(diverged)
    return diffrax.Event((event.cond_fn, diverged), event.root_finder, (event.direction, None))


def simulate(
    model: Model,
    q0,
    qd0,
    t0=0.0,
    t1=1.0,
    *,
    tau=None,
    method="aba",
    f_ext=None,
    solver: diffrax.AbstractSolver | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    dt0=None,
    saveat=None,
    max_steps: int | None = 100_000,
    event=None,
    adjoint: diffrax.AbstractAdjoint | None = None,
    progress=False,
    energy: bool = False,
    momentum: bool = False,
    residual=None,
    limits: bool = True,
) -> Trajectory:
    """Integrate the equations of motion from ``(q0, qd0)`` at ``t0`` to ``t1``.

    Solves ``d/dt (q, qd) = (G(q) qd, qdd(q, qd, tau))`` with ``diffrax.diffeqsolve``;
    quaternions and (cos, sin) pairs stay on their manifold (see
    :mod:`mbjax.configuration`).

    **Arguments:**

    - ``q0`` (nq,), ``qd0`` (nv,): initial state; ``t0``, ``t1``: start and end times.
    - ``tau``: joint torques (nv,): ``None`` (zero), a constant array, or a controller
      ``tau(t, q, qd)`` such as :class:`PD`, :class:`ComputedTorque`, :class:`FeedForward`
      (pytrees: their parameters are differentiable and can be batched). The model's joint
      springs and dampers (:func:`mbjax.passive_forces`, e.g. from MJCF) are added to it.
    - ``method``: the formulation: a :func:`mbjax.forward_dynamics` method name (``"aba"``,
      ``"crba"``, ...), an :class:`mbjax.Dynamics` (e.g. :class:`mbjax.ClosedChainDynamics`)
      or a plain function ``dynamics(model, q, qd, tau) -> qdd`` (:mod:`mbjax.methods`).
    - ``f_ext``: external wrenches (nbodies, 6) in body axes, constant or ``f(t, q, qd)``.
    - ``solver``: any diffrax solver (default ``diffrax.Tsit5()``; ``Dopri8`` for tight
      tolerances; implicit solvers such as ``Kvaerno5`` for stiff controllers).
    - ``stepsize_controller``: any diffrax controller (default
      ``PIDController(rtol, atol, step_ts=<saved times>)``; ``ConstantStepSize()`` with
      ``dt0`` for fixed steps). ``rtol``, ``atol``: tolerances of the default controller;
      by default 1e-8 for a float64 model and 1e-4 for a float32 one (1000 units of roundoff:
      ``mbjax.checks.default_tolerance(model.dtype, 1e-8, 1000)``).
    - ``saveat``: a ``diffrax.SaveAt`` or an array of times (default: 201 evenly spaced
      times, plus the event time when ``event`` is given). With the default controller the
      steps end on the saved times; with another controller, states between steps come from
      the solver's dense interpolation, whose order is below the solver's.
    - ``max_steps``: step budget (an error says so when it runs out).

    A run whose state becomes non-finite or whose velocities grow past :data:`DIVERGENCE`
    times their initial scale stops with a :class:`DivergenceError` that says when (inside
    ``jax.jit`` or ``vmap``: an ``eqx.error_if`` without the time), except with
    ``BacksolveAdjoint`` or ``ImplicitAdjoint``, which do not support events.
    - ``event``: stop when a condition crosses zero: a function ``cond(t, q, qd)`` (e.g.
      :func:`joint_limit_event`) or a ``diffrax.Event``; the time is located by Newton's
      method to ``atol``.
    - ``adjoint``: how gradients are computed (default
      ``diffrax.RecursiveCheckpointAdjoint()``; ``diffrax.BacksolveAdjoint(...)`` for O(1)
      memory in the number of steps, for systems that can be integrated backwards in time
      (not strongly damped ones); ``diffrax.ForwardMode()`` for ``jax.jvp`` / ``jax.jacfwd``).
    - ``progress``: ``True`` for a progress bar (tqdm, or text without it), or a diffrax meter.
    - ``energy``, ``momentum``: also record total energy and spatial momentum. With
      ``energy``, the work done by the applied forces (controls, joint springs and dampers,
      ``f_ext``) is integrated with the state, so ``energy - energy[0] - work`` is the
      integration error (a ``diffrax.Event`` then sees ``y = (q, qd, work)``).
    - ``residual``: a function ``residual(model, q, qd)`` (constraint residuals) to record.
    - ``limits``: stops at the joint limits the model declares (URDF ``<limit>``, MJCF
      ``range``), on by default: :func:`mbjax.contact.joint_limits`, critically damped with a
      2 ms time constant, added to ``method`` unless it has stops of its own
      (:class:`mbjax.contact.WithContacts`); they act only past a limit, and the work they do
      is not in ``work``. ``False`` turns them off (the plain equations of motion, as
      Pinocchio's). A traced model (a batch of models, a model passed to ``jax.jit``) gets
      stops on every revolute and prismatic coordinate, acting where its limit is finite.

    **Returns:** a :class:`Trajectory`.
    """
    dtype = model.dtype
    rtol, atol = (
        default_tolerance(dtype, 1e-8, 1000) if x is None else check_nonnegative(x, f"simulate: {name} must be >= 0")
        for name, x in (("rtol", rtol), ("atol", atol))
    )
    # times are traced arrays, so that a new duration does not recompile
    t0, t1 = jnp.asarray(t0, dtype), jnp.asarray(t1, dtype)
    dt0 = None if dt0 is None else jnp.asarray(dt0, dtype)
    rtol, atol = jnp.asarray(rtol, dtype), jnp.asarray(atol, dtype)  # traced too
    stops = STOPS.joints(model) if limits and STOPS.joints else ()  # static: which joints (their stops traced in _simulate)
    if isinstance(stepsize_controller, diffrax.ConstantStepSize) and dt0 is not None and not any(
            isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((model, q0, dt0, method))):
        # a fixed-step explicit solver must be stable on the formulation's fastest motions (checked
        # where they are concrete: not when the model, the state or the contacts are traced)
        checked = STOPS.add(model, method, stops) if stops else method
        stability.check(diffrax.Tsit5() if solver is None else solver, float(dt0),
                        as_dynamics(checked).fast_rates(model, jnp.asarray(q0, dtype)))
    try:
        traj, diverged = _simulate(model, q0, qd0, t0, t1, tau, method, f_ext, solver, stepsize_controller, rtol,
                                   atol, dt0, saveat, max_steps, event, adjoint, progress, energy, momentum, residual,
                                   stops)
    except TypeError as e:
        if "forward-mode autodiff" not in str(e):
            raise
        raise TypeError(
            "simulate: forward-mode differentiation (jax.jvp, jax.jacfwd) needs adjoint=diffrax.ForwardMode(); "
            "the default adjoint supports reverse mode (jax.grad, jax.jacrev) only"
        ) from None
    if isinstance(diverged, jax.core.Tracer):  # under jit or vmap: no time in the message
        return eqx.error_if(traj, diverged, _DIVERGED.format(when="", factor=DIVERGENCE))
    if diverged:
        last = traj.ts[jnp.isfinite(traj.ts) & jnp.all(jnp.isfinite(traj.qd), axis=-1)]
        when = f" after t = {float(last[-1]):.6g} (its last finite saved time)" if last.size else ""
        raise DivergenceError(_DIVERGED.format(when=when, factor=DIVERGENCE))
    return traj


class _Stops:
    """How :func:`simulate` adds stops at a model's declared joint limits (``limits=True``).
    The stops are :mod:`mbjax.contact`'s, a layer above this one, which fills these in when it
    is imported (``import mbjax`` does): ``joints(model) -> tuple`` the joints that get stops,
    ``add(model, method, joints) -> method`` the method with them."""

    joints = None
    add = None


STOPS = _Stops()


@filter_jit(one_state=True)
def _simulate(model, q0, qd0, t0, t1, tau, method, f_ext, solver, stepsize_controller, rtol, atol, dt0, saveat,
              max_steps, event, adjoint, progress, energy, momentum, residual, stops):
    q0, qd0 = check_state(model, q0, qd=qd0)
    t0, t1 = eqx.error_if((t0, t1), ~(jnp.isfinite(t0) & jnp.isfinite(t1)), "simulate: t0 and t1 must be finite")
    dynamics = as_dynamics(STOPS.add(model, method, stops) if stops else method)
    adjoint = diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint
    detect = not isinstance(adjoint, (diffrax.BacksolveAdjoint, diffrax.ImplicitAdjoint))
    event = as_event(event, model, atol)
    controller = jnp.zeros(model.nv, qd0.dtype) if tau is None else tau
    if saveat is None:
        ts = jnp.linspace(t0, t1, DEFAULT_SAVES, dtype=qd0.dtype)
        saveat = diffrax.SaveAt(ts=ts, t1=event is not None)
    elif not isinstance(saveat, diffrax.SaveAt):
        saveat = diffrax.SaveAt(ts=jnp.asarray(saveat, qd0.dtype))
    if stepsize_controller is None:
        # steps end on the saved times: saved states carry the solver's accuracy, not that of
        # its (lower-order) dense interpolation
        rtol = eqx.error_if(rtol, (rtol == 0) & (atol == 0), "simulate: rtol and atol are both 0, which no step can "
                            "meet; give a positive tolerance")
        stepsize_controller = diffrax.PIDController(rtol=rtol, atol=atol, step_ts=getattr(saveat.subs, "ts", None))
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        diffrax.Tsit5() if solver is None else solver,
        t0,
        t1,
        dt0,
        (q0, qd0, jnp.zeros((), qd0.dtype)) if energy else (q0, qd0),
        args=(model, dynamics, controller, f_ext),
        saveat=saveat,
        stepsize_controller=stepsize_controller,
        adjoint=adjoint,
        event=with_divergence(event, qd0) if detect else event,
        max_steps=max_steps,
        progress_meter=progress_meter(progress),
    )
    q, qd = sol.ys[:2]
    fields = diagnose(model, sol.ts, q, qd, energy, momentum, residual)
    if energy:
        fields["work"] = jnp.where(jnp.isfinite(sol.ts), sol.ys[2], jnp.nan)
    if not detect:
        user_mask, diverged = sol.event_mask, jnp.asarray(False)
    else:
        user_mask, diverged = (None, sol.event_mask) if event is None else sol.event_mask
    return Trajectory(**fields, event=None if event is None else user_mask, stats=sol.stats), diverged
