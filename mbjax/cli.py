"""Command line interface: ``mbjax demo``, ``mbjax simulate`` and ``mbjax info`` (also
``python -m mbjax ...``).

``mbjax demo`` simulates the passive motion of a model (gravity, zero joint torque, optional
joint damping) with :func:`mbjax.simulate` in fixed steps, and reports the energy balance.

``mbjax simulate MODEL`` integrates passive motion with :func:`mbjax.simulate` (diffrax,
adaptive steps) and reports the energy balance: the energy minus the work of the joints'
springs and dampers, whose drift is the integration error, and the energy they dissipated.

``mbjax info`` prints a model's sizes, total mass, kinematic tree, joints, their slices of q
and v, limits and body masses (URDF, MJCF, bundled or example-robot-data models).

``mbjax flags`` prints the ``XLA_FLAGS`` mbjax recommends on CPUs, which the other commands
set for themselves (:func:`mbjax.compilation.set_cpu_flags`).

All run in float64 (``jax_enable_x64`` is switched on before any model is built).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import sys
import time


DEFAULT_MODEL = "double_pendulum"
PLOT_HINT = 'install it with `pip install matplotlib` (or `pip install -e ".[plot]"` in a clone of mbjax)'
#: the methods of mbjax.forward_dynamics (mbjax.methods.METHODS, not imported: `--help` runs without jax)
METHODS = ("aba", "crba", "momentum", "kane", "kkt", "sparse_kkt", "schur", "barycentric")
#: most fixed steps one `mbjax demo` run may take
MAX_DEMO_STEPS = 10_000_000


# ------------------------------------------------------------------------------ options
def _number(low, high, low_open=True, kind=float):
    """An argparse type: a finite ``kind`` in (low, high], or [low, high] when not ``low_open``."""

    def parse(text):
        try:
            x = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if not (math.isfinite(x) and (low < x if low_open else low <= x) and x <= high):
            interval = f"{'(' if low_open else '['}{low:g}, {high:g}]" if kind is float else f"[{low}, {high}]"
            raise argparse.ArgumentTypeError(f"must be a finite number in {interval}; got {text}")
        return x

    return parse


DURATION = _number(0.0, 1e4)  # s
TIME_STEP = _number(0.0, 1.0)  # s
DAMPING = _number(0.0, 1e6, low_open=False)  # N m s/rad
AMPLITUDE = _number(0.0, 10.0, low_open=False)  # rad or m
SEED = _number(0, 2**32 - 1, low_open=False, kind=int)
TOLERANCE = _number(1e-14, 0.1, low_open=False)


def check_options(args):
    """Checks that involve several options: an error message, or None."""
    if args.command != "demo":
        return None
    if args.dt > args.duration:
        return f"--dt {args.dt:g} is longer than --duration {args.duration:g}"
    steps = args.duration / args.dt  # may overflow to inf for a subnormal --dt
    if steps > MAX_DEMO_STEPS:
        return f"--duration / --dt = {steps:.3g} steps, more than {MAX_DEMO_STEPS:.0e}: raise --dt or shorten --duration"
    return None


# ------------------------------------------------------------------------------ models
def load_model(spec: str, floating_base: bool | None = None, mimic: str | None = None, joint_order: str = "file",
               mjcf_ignore=()):
    """Load ``spec``: a URDF or MJCF path, a bundled model name, or an example-robot-data name.

    MJCF files (``.xml`` or ``.mjb``, or a file whose root element is ``<mujoco>``) are
    compiled by MuJoCo (:func:`mbjax.load_mjcf`, ``ignore=mjcf_ignore``); the URDF options do
    not apply to them.

    ``floating_base=None`` keeps the model's default (floating for the bundled quadruped and
    for legged example robots, fixed for a URDF path). ``mimic=None`` keeps the loader's
    default: ``"error"`` for URDF paths, ``"independent"`` for example-robot-data robots (as
    Pinocchio does).
    """
    from . import robots
    from .model.urdf import load_urdf

    kwargs = {"joint_order": joint_order}
    if mimic is not None:
        kwargs["mimic"] = mimic
    if floating_base is not None:
        kwargs["floating_base"] = floating_base
    if os.path.isfile(spec) and _is_mjcf(spec):
        from .model.mjcf import load_mjcf

        return load_mjcf(spec, ignore=mjcf_ignore), f"MJCF {os.path.abspath(spec)}"
    if os.path.isfile(spec):
        return load_urdf(spec, **kwargs), os.path.abspath(spec)
    if spec in robots.BUNDLED_MODELS:
        return robots.load_bundled(spec, **kwargs), f"bundled model {spec!r}"
    if spec in robots.EXAMPLE_ROBOTS:
        return robots.load_example_robot(spec, **kwargs), f"example-robot-data {spec!r}"
    if spec.endswith((".urdf", ".xml", ".mjb")) or os.sep in spec:
        raise FileNotFoundError(f"no model file at {spec!r}")
    raise KeyError(
        f"unknown model {spec!r}: give a path to a .urdf or MJCF (.xml) file, a bundled model "
        f"({', '.join(sorted(robots.BUNDLED_MODELS))}) or, with example-robot-data installed, "
        f"one of {', '.join(sorted(set(robots.EXAMPLE_ROBOTS) - set(robots.BUNDLED_MODELS)))}"
    )


def _is_mjcf(path: str) -> bool:
    if path.endswith(".mjb"):
        return True
    with open(path, encoding="utf-8", errors="replace") as fh:
        head = fh.read(4096)
    return "<mujoco" in head and "<robot" not in head


def tree_drawing(model) -> str:
    """The kinematic tree as text: one line per body with its joint and mass."""
    children: dict[int, list[int]] = {}
    for i, p in enumerate(model.parents):
        children.setdefault(p, []).append(i)
    lines = ["world"]

    def visit(i, prefix, last):
        lines.append(f"{prefix}{'└── ' if last else '├── '}{model.body_names[i]}  "
                     f"({model.joint_types[i]} {model.joint_names[i]}, {float(model.mass[i]):.4g} kg)")
        kids = children.get(i, [])
        for k, c in enumerate(kids):
            visit(c, prefix + ("    " if last else "│   "), k == len(kids) - 1)

    roots = children.get(-1, [])
    for k, r in enumerate(roots):
        visit(r, "", k == len(roots) - 1)
    return "\n".join(lines)


def _floating(model) -> bool:
    return len(model.joint_types) > 0 and model.joint_types[0] == "free" and model.parents[0] == -1


def model_summary(model, source: str) -> str:
    kinds: dict[str, int] = {}
    for t in model.joint_types:
        kinds[t] = kinds.get(t, 0) + 1
    joints = ", ".join(f"{n} {t}" for t, n in kinds.items())
    return "\n".join([
        f"model     {model.name}  ({source})",
        f"base      {f'floating (free joint {model.joint_names[0]})' if _floating(model) else 'fixed'}",
        f"sizes     nq = {model.nq}, nv = {model.nv}, bodies = {model.nbodies}, frames = {model.nframes}",
        f"joints    {joints}",
        f"mass      {float(model.mass.sum()):.6g} kg in total",
    ])


def _fmt_limits(lo, hi) -> str:
    import numpy as np

    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    if lo.size == 0 or (np.all(np.isinf(lo)) and np.all(np.isinf(hi))):
        return "-"
    f = lambda x: "-inf" if x == -np.inf else ("inf" if x == np.inf else f"{x:.4g}")  # noqa: E731
    return ", ".join(f"[{f(a)}, {f(b)}]" for a, b in zip(lo, hi))


def joints_table(model) -> str:
    import numpy as np

    rows = [("#", "joint", "type", "body", "parent", "q", "v", "position limits", "vel. limit", "effort", "mass [kg]")]
    for i, (jname, jtype, body) in enumerate(zip(model.joint_names, model.joint_types, model.body_names)):
        qs, vs = model.q_slice(i), model.v_slice(i)
        p = model.parents[i]
        vel = np.asarray(model.velocity_limit[vs], dtype=float)
        eff = np.asarray(model.effort_limit[vs], dtype=float)
        one = lambda a: "-" if a.size == 0 or np.all(np.isinf(a)) else ", ".join(f"{x:.4g}" for x in a)  # noqa: E731
        rows.append((
            str(i), jname, jtype, body, "world" if p < 0 else model.body_names[p],
            f"{qs.start}:{qs.stop}", f"{vs.start}:{vs.stop}",
            _fmt_limits(model.lower[qs], model.upper[qs]), one(vel), one(eff), f"{float(model.mass[i]):.4g}",
        ))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ------------------------------------------------------------------------------ simulation
def initial_state(model, seed: int = 0, amplitude: float = 1.0, within_limits: bool = False):
    """A reproducible non-trivial start (NumPy arrays ``q0`` (nq,), ``qd0`` (nv,)).

    Revolute, continuous, prismatic, universal and cylindrical coordinates are displaced from
    the neutral configuration by up to ``amplitude`` (rad or m) (``within_limits``: then
    clipped to the model's position limits); spherical, planar and free joints start at their
    neutral configuration. Velocities are Gaussian with standard deviation ``amplitude / 2``.
    Plain NumPy: no compilation before the simulation starts.
    """
    import numpy as np

    from .configuration import neutral

    rng = np.random.default_rng(seed)
    q0 = np.array(neutral(model), dtype=float)
    for i, t in enumerate(model.joint_types):
        qs, vs = model.q_slice(i), model.v_slice(i)
        d = amplitude * rng.uniform(-1.0, 1.0, vs.stop - vs.start)
        if t in ("revolute", "prismatic", "universal", "cylindrical"):
            q0[qs] = d
        elif t == "continuous":
            q0[qs] = (np.cos(d[0]), np.sin(d[0]))
    if within_limits:
        q0 = np.clip(q0, np.asarray(model.lower), np.asarray(model.upper))
    qd0 = 0.5 * amplitude * rng.standard_normal(model.nv)
    return q0, qd0


def joint_stops(model, enabled: bool = True):
    """The stops at the joint limits the model's file declares (:func:`mbjax.contact.joint_limits`,
    critically damped, time constant :data:`mbjax.contact.limits.TIME_CONSTANT`), or None
    (``enabled`` False, or no finite limit on a revolute or prismatic joint)."""
    from .contact.limits import joint_limits, limited_joints

    joints = limited_joints(model) if enabled else []
    return joint_limits(model, joints=joints) if joints else None


def energy_balance(E, W, scale, stops=None, q=None, stored=None) -> str:
    """Lines on the energy balance of a run: the energy ``E`` (T,) against the work ``W`` of the
    joint springs and dampers; with ``stops`` (:class:`mbjax.contact.JointLimits`), how far the
    motion ``q`` (T, nq) went past them, and, where it did, the balance with the energy
    ``stored`` (T,) in them, which they can only lower."""
    import numpy as np

    from .contact.limits import TIME_CONSTANT

    lines = []
    past = 0.0
    if stops is not None:
        past = float(stops.excursion(q))
        lines.append(f"stops     {len(stops.q_lower) + len(stops.q_upper)} joint limits, critically damped (time "
                     f"constant {TIME_CONSTANT:g} s; --no-limits turns them off): "
                     + (f"the motion went past them by at most {past:.2e} (rad or m)" if past else "never reached"))
    if past:
        total = E + stored - W
        rise = np.maximum.accumulate(total) - total[0]
        lines.append(f"balance   E(t) + stops' stored energy - work(t): fell by {(total[0] - total[-1]) / scale:.3e} "
                     f"of E(0), rose by at most {rise.max() / scale:.3e} (the stops only take energy: integration error)")
    else:
        lines.append(f"balance   E(t) - E(0) - work(t): largest relative drift {np.abs(E - E[0] - W).max() / scale:.3e} "
                     "(integration error)")
    return "\n".join(lines)


def passive_run(model, q0, qd0, duration: float, dt: float, damping: float = 0.0, max_records: int = 2000,
                progress: bool = True, stops=None):
    """Simulate ``duration`` seconds of passive motion from (q0, qd0) with :func:`mbjax.simulate`
    in fixed steps of ``dt`` (diffrax's Tsit5 under ``ConstantStepSize``), with the joint
    ``stops`` (:class:`mbjax.contact.JointLimits`) if given.

    ``damping`` (N m s/rad) becomes the model's joint damping on every joint but a floating
    base; its work is integrated with the state (``energy=True``). At most ``max_records + 1``
    samples are kept, on step boundaries, the first at t = 0 and the last at the end.

    **Returns:** a dict of NumPy arrays ``t``, ``q``, ``qd``, ``kinetic``, ``potential``,
    ``work`` (of the dampers), ``stored`` (in the stops), ``com`` (one row per sample) and
    ``steps``, ``dt``, ``wall_s`` (compilation included).
    """
    import diffrax
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    from .contact import WithContacts
    from .dynamics.terms import kinetic_energy, potential_energy
    from .kinematics import center_of_mass
    from .simulation import simulate

    steps = max(1, int(round(duration / dt)))
    stride = max(1, math.ceil(steps / max_records))
    t = np.minimum(np.arange(math.ceil(steps / stride) + 1) * stride, steps) * dt
    damp = np.full(model.nv, float(damping))
    for i, jtype in enumerate(model.joint_types):
        if jtype == "free":
            damp[model.v_slice(i)] = 0.0  # no damping on the floating base
    model = eqx.tree_at(lambda m: m.damping, model, jnp.asarray(damp, model.dtype))
    start = time.perf_counter()
    traj = simulate(model, q0, qd0, 0.0, steps * dt, method="aba" if stops is None else WithContacts(limits=stops),
                    solver=diffrax.Tsit5(), stepsize_controller=diffrax.ConstantStepSize(), dt0=dt, saveat=t,
                    max_steps=steps + 1, energy=True, progress=progress, limits=False)  # the stops are ``stops``
    q, qd = jax.block_until_ready((traj.q, traj.qd))
    wall = time.perf_counter() - start
    terms = jax.jit(jax.vmap(lambda q, qd: (kinetic_energy(model, q, qd), potential_energy(model, q),
                                            center_of_mass(model, q))))
    T, V, com = (np.asarray(x) for x in terms(q, qd))
    stored = np.zeros_like(T) if stops is None else np.asarray(jax.vmap(stops.energy)(q))
    return {"t": t, "q": np.asarray(q), "qd": np.asarray(qd), "kinetic": T, "potential": V,
            "work": np.asarray(traj.work), "stored": stored, "com": com, "steps": steps, "dt": dt, "wall_s": wall}


#: the standing demo's floor: Coulomb friction, and a drop onto it before it stands
FLOOR_FRICTION = 0.8
DROP_HEIGHT = 0.02  # m
#: Gauss-Seidel sweeps per step of the rigid contacts, and the steps one compiled chunk runs
SWEEPS, CHUNK_STEPS = 20, 1000


def feet(model) -> list[str]:
    """The frames a floating-base robot stands on: those named ``*foot*`` (any case) on moving
    bodies, else the origins of its leaf bodies (the ends of its limbs)."""
    bodies = model.topology.frame_bodies
    named = [f for i, f in enumerate(model.frame_names) if "foot" in f.lower() and bodies[i] >= 0]
    if named:
        return named
    parents = set(int(p) for p in model.topology.parents)
    leaves = [b for b in range(len(model.topology.parents)) if b not in parents]
    return [model.frame_names[next(i for i, b in enumerate(bodies) if b == leaf)] for leaf in leaves]


def standing_run(model, duration: float, dt: float, stops=None, max_records: int = 2000, progress: bool = True):
    """The floating-base ``model`` dropped from :data:`DROP_HEIGHT` onto the floor z = 0 and
    standing on :func:`feet` under a PD posture controller holding its neutral configuration:
    rigid contacts with Coulomb friction :data:`FLOOR_FRICTION` and the joint ``stops``
    (:class:`mbjax.contact.JointLimits`, or None) by time stepping (:func:`mbjax.contact.rollout`,
    steps of ``dt``, :data:`SWEEPS` sweeps, the controller's damping implicit), in compiled
    chunks of at most :data:`CHUNK_STEPS` steps, each warm started from the last.

    Gains: every joint but the floating base holds the robot's weight ``m g`` at its standing
    height ``L`` with 0.1 rad of deflection, ``kp = m g L / 0.1``, damped with ``kd = kp / 40``
    (s).

    **Returns:** a dict: ``t``, ``q``, ``height`` (base), ``feet`` (positions, (T, k, 3)),
    ``load`` (the ground's vertical force / weight, one per record), ``kinetic``, ``potential``
    (one row per record, at most ``max_records + 1``), ``feet_names``, ``standing_height`` (the
    posture's), ``gains`` (kp, kd), ``steps``, ``dt``, ``wall_s`` (compilation included).
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    from .configuration import neutral
    from .contact import Plane, RigidContact, TimeStepping, frame_points, rollout
    from .dynamics.terms import kinetic_energy, potential_energy
    from .kinematics import frame_placements
    from .progress import Progress
    from .simulation.controllers import PD, Setpoint

    names = feet(model)
    index = np.asarray([model.frame_index(f) for f in names])
    posture = neutral(model)
    lowest = float(jnp.min(frame_placements(model, posture)[1][index, 2]))
    base_z = model.q_slice(0).start + 2  # the free joint's origin height
    posture = posture.at[base_z].add(-lowest)  # the feet on the floor
    weight = float(jnp.sum(model.mass)) * float(jnp.linalg.norm(model.gravity))
    kp = weight * float(posture[base_z]) / 0.1
    actuated = jnp.ones(model.nv).at[model.v_slice(0)].set(0.0)
    controller = PD(model, kp * actuated, kp / 40 * actuated, Setpoint(posture, jnp.zeros(model.nv)))
    stepping = TimeStepping(RigidContact(frame_points(model, names), Plane.horizontal(0.0), FLOOR_FRICTION), stops,
                            iterations=SWEEPS)

    chunks = max(1, math.ceil(round(duration / dt) / CHUNK_STEPS))
    chunk = max(1, math.ceil(round(duration / dt) / chunks))
    stride = max(1, math.ceil(chunks * chunk / max_records))

    @jax.jit
    def run(q, qd, impulses):
        traj, out = rollout(model, stepping, q, qd, controller, dt, chunk, impulses=impulses)
        _, p = jax.vmap(lambda q: frame_placements(model, q))(traj.q[1:])
        energy = jax.vmap(lambda q, qd: (kinetic_energy(model, q, qd), potential_energy(model, q)))(traj.q[1:],
                                                                                                    traj.qd[1:])
        return traj.q[-1], traj.qd[-1], out.impulses[-1], (traj.q[1:], p[:, index], jnp.sum(out.forces[:, :, 2], 1),
                                                            *energy)

    q, qd = posture.at[base_z].add(DROP_HEIGHT), jnp.zeros(model.nv)
    impulses = jnp.zeros(stepping.size(model), q.dtype)
    _, p0 = frame_placements(model, q)
    records = [(q[None], p0[index][None], jnp.zeros(1), kinetic_energy(model, q, qd)[None],
                potential_energy(model, q)[None])]
    start = time.perf_counter()
    with Progress(chunks * chunk, "standing", "steps", enabled=progress) as bar:
        for c in range(chunks):
            q, qd, impulses, rec = run(q, qd, impulses)
            first = (stride - 1 - c * chunk) % stride  # the records on the global stride
            records.append(tuple(np.asarray(r)[first::stride] for r in rec))
            bar.update(chunk)
    wall = time.perf_counter() - start
    qs, ps, load, T, V = (np.concatenate([np.asarray(r[i]) for r in records]) for i in range(5))
    t = np.arange(len(qs)) * stride * dt
    return {"t": t, "q": qs, "height": qs[:, base_z], "feet": ps, "load": load / weight, "kinetic": T,
            "potential": V, "feet_names": names, "standing_height": float(posture[base_z]), "gains": (kp, kp / 40),
            "steps": chunks * chunk, "dt": dt, "wall_s": wall}


def plot_run(model, run, path: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from .plotting import finish

    t, T, V = run["t"], run["kinetic"], run["potential"]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    for i, (name, jtype) in enumerate(zip(model.joint_names, model.joint_types)):
        qs = model.q_slice(i)
        if jtype in ("revolute", "prismatic"):
            ax1.plot(t, run["q"][:, qs.start], label=name)
        elif jtype == "continuous":
            ax1.plot(t, np.unwrap(np.arctan2(run["q"][:, qs.start + 1], run["q"][:, qs.start])), label=name)
        elif jtype == "free":
            ax1.plot(t, run["q"][:, qs.start + 2], "k--", label=f"{name} z [m]")
    ax1.set_ylabel("joint position [rad or m]")
    ax1.set_title(f"{model.name}: passive motion, dt = {run['dt']:g} s")
    if len(model.joint_names) <= 12:
        ax1.legend(fontsize="small", ncol=2)
    ax1.grid(alpha=0.3)
    E = T + V
    ax2.plot(t, T, label="kinetic")
    ax2.plot(t, V, label="potential")
    ax2.plot(t, E, "k", lw=2, label="total")
    ax2.set_xlabel("time [s]")
    ax2.set_ylabel("energy [J]")
    ax2.legend(fontsize="small")
    ax2.grid(alpha=0.3)
    finish(fig, path)


# ------------------------------------------------------------------------------ commands
def _have_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def cmd_demo(args) -> int:
    import numpy as np

    if args.plot and not _have_matplotlib():
        print(f"mbjax demo: error: --plot needs matplotlib, which is not installed; {PLOT_HINT}, "
              "or run without --plot.", file=sys.stderr)
        return 1

    model, source = load_model(args.model, args.floating_base, args.mimic)
    print(model_summary(model, source))
    stops = joint_stops(model, not args.no_limits)
    if _floating(model) and not args.no_floor:
        return demo_standing(model, stops, args)
    q0, qd0 = initial_state(model, args.seed, args.amplitude, within_limits=stops is not None)
    steps = max(1, int(round(args.duration / args.dt)))
    print(f"simulate  {steps * args.dt:g} s of passive motion (gravity {np.asarray(model.gravity).tolist()} m/s^2, "
          f"zero torque{f', joint damping {args.damping:g} N m s/rad' if args.damping else ''})")
    print(f"          {steps} steps of dt = {args.dt:g} s, mbjax.simulate with diffrax Tsit5 at a constant step size")

    # a diverging run trips mbjax's NaN checks inside jit; jax would log the callback traceback
    logging.getLogger("jax._src.callback").setLevel(logging.CRITICAL)
    try:
        run = passive_run(model, q0, qd0, args.duration, args.dt, args.damping, progress=not args.quiet, stops=stops)
    except Exception as e:  # simulate's divergence check and mbjax's run-time NaN checks
        unstable = re.search(r"unstable on the (.+?) \(.*Take dt0 <= (\S+) s", str(e))
        if isinstance(e, ValueError) and unstable:  # simulate's check of the fixed step
            print(f"mbjax demo: error: the {unstable.group(1)} make the fixed step --dt {args.dt:g} unstable; take "
                  f"--dt {unstable.group(2)} or less, turn the stops off with --no-limits, or run `mbjax simulate` "
                  "(adaptive steps)", file=sys.stderr)
            return 1
        if "NaN or infinite" not in str(e) and "diverged" not in str(e):
            raise
        print(f"mbjax demo: error: the simulation diverged (the state became NaN or infinite); "
              f"try a smaller --dt than {args.dt:g}", file=sys.stderr)
        return 1
    T, V, W, S = run["kinetic"], run["potential"], run["work"], run["stored"]
    E = T + V
    e0 = abs(E[0]) if E[0] != 0 else 1.0
    print(f"energy    initial {E[0]:.9g} J  (kinetic {T[0]:.6g}, potential {V[0]:.6g})")
    print(f"          final   {E[-1]:.9g} J  (kinetic {T[-1]:.6g}, potential {V[-1]:.6g})")
    if args.damping:
        print(f"          dissipated by the joint dampers {0.0 - W[-1]:.6g} J")
    print(energy_balance(E, W, e0, stops, run["q"], S))
    com = run["com"][-1]
    print(f"final CoM [{com[0]:+.6f}, {com[1]:+.6f}, {com[2]:+.6f}] m (world frame)"
          f"{'; no floor (--no-floor), so the floating base falls freely' if _floating(model) else ''}")
    return _demo_end(run, np.all(np.isfinite(E)), lambda path: plot_run(model, run, path), args.plot)


def _demo_end(run, finite, plot, path) -> int:
    """The demo's last lines: the wall time, then an error if the run diverged, else the plot
    (``plot(path)``) if asked for."""
    print(f"time      {run['wall_s']:.2f} s wall, compilation included")
    if not finite:
        print("mbjax demo: error: the simulation diverged (non-finite state); try a smaller --dt", file=sys.stderr)
        return 1
    if path:
        plot(path)
        print(f"plot      {os.path.abspath(path)}")
    return 0


def demo_standing(model, stops, args) -> int:
    """``mbjax demo`` of a floating-base model: it stands on the floor (:func:`standing_run`);
    reports how still it stands over the second half of the run and the ground's load."""
    import numpy as np

    print(f"simulate  {args.duration:g} s standing: dropped {DROP_HEIGHT * 100:g} cm onto the floor z = 0, posture held "
          "by PD on every joint (the neutral configuration)")
    try:
        run = standing_run(model, args.duration, args.dt, stops, progress=not args.quiet)
    except Exception as e:  # mbjax's run-time NaN checks
        if "NaN or infinite" not in str(e):
            raise
        print(f"mbjax demo: error: the simulation diverged (the state became NaN or infinite); try a smaller --dt than "
              f"{args.dt:g}", file=sys.stderr)
        return 1
    kp, kd = run["gains"]
    names = run["feet_names"]
    print(f"floor     rigid contacts at {len(names)} points ({', '.join(names)}), Coulomb friction "
          f"{FLOOR_FRICTION:g}{f', rigid stops at {len(stops.q_lower) + len(stops.q_upper)} joint limits' if stops else ''}"
          f"; contact.rollout: {run['steps']} steps of dt = {run['dt']:g} s, {SWEEPS} Gauss-Seidel sweeps each")
    print(f"posture   PD gains kp = {kp:.4g} N m/rad, kd = {kd:.4g} N m s/rad (implicit)")
    late = run["t"] >= run["t"][-1] / 2
    z, xy, load = run["height"][late], run["feet"][late, :, :2], run["load"][late]
    print(f"standing  base height {run['height'][-1]:.6f} m (posture {run['standing_height']:.6f} m); over the second "
          f"half: height range {np.ptp(z):.2e} m, feet slip {np.abs(xy - xy[0]).max():.2e} m, ground load / weight - 1 "
          f"{np.abs(load - 1).max():.2e}")
    if max(np.ptp(z), np.abs(xy - xy[0]).max()) > 1e-3:
        print("note      it does not stand still (over 1 mm of motion): a robot that balances on flat feet (a "
              "biped) tips over on the points it stands on here")
    return _demo_end(run, np.all(np.isfinite(run["q"])), lambda path: plot_standing(model, run, path), args.plot)


def plot_standing(model, run, path: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .plotting import finish

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    ax1.plot(run["t"], run["height"], label="base height")
    ax1.axhline(run["standing_height"], color="k", ls=":", label="posture")
    ax1.set_ylabel("height [m]")
    ax1.set_title(f"{model.name}: standing on rigid feet, dt = {run['dt']:g} s")
    ax1.legend(fontsize="small")
    ax1.grid(alpha=0.3)
    ax2.plot(run["t"], run["load"])
    ax2.set_xlabel("time [s]")
    ax2.set_ylabel("ground load / weight")
    ax2.grid(alpha=0.3)
    finish(fig, path)


SOLVERS = ("tsit5", "dopri5", "dopri8", "kvaerno5")


def cmd_simulate(args) -> int:
    """``mbjax simulate MODEL``: passive motion with :func:`mbjax.simulate` (adaptive diffrax)."""
    import diffrax
    import jax
    import numpy as np

    from .contact import WithContacts
    from .simulation import simulate

    if (args.plot or args.animate) and not _have_matplotlib():
        print(f"mbjax simulate: error: --plot and --animate need matplotlib, which is not installed; {PLOT_HINT}, "
              "or run without them.", file=sys.stderr)
        return 1
    model, source = load_model(args.model, args.floating_base, args.mimic)
    print(model_summary(model, source))
    stops = joint_stops(model, not args.no_limits)
    q0, qd0 = initial_state(model, args.seed, args.amplitude, within_limits=stops is not None)
    solver = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "dopri8": diffrax.Dopri8,
              "kvaerno5": diffrax.Kvaerno5}[args.solver]()
    print(f"simulate  {args.duration:g} s of passive motion, method {args.method!r}, diffrax {args.solver}, "
          f"rtol = atol = {args.rtol:g}")
    t0 = time.perf_counter()
    method = args.method if stops is None else WithContacts(dynamics=args.method, limits=stops)
    traj = simulate(model, q0, qd0, 0.0, args.duration, method=method, solver=solver, rtol=args.rtol,
                    atol=args.rtol, energy=True, progress=not args.quiet, limits=False)  # the stops are ``stops``
    E, W = np.asarray(traj.energy), np.asarray(traj.work)
    wall = time.perf_counter() - t0
    print(f"steps     {int(traj.stats['num_steps'])} ({int(traj.stats['num_rejected_steps'])} rejected), "
          f"{wall:.2f} s wall including compilation")
    print(f"energy    initial {E[0]:.12g} J, final {E[-1]:.12g} J; work of joint springs and dampers {W[-1]:.6g} J "
          f"(dissipated {0.0 - W[-1]:.6g} J)")
    e0 = max(abs(E[0]), 1e-300)
    stored = None if stops is None else np.asarray(jax.vmap(stops.energy)(traj.q))
    print(energy_balance(E, W, e0, stops, traj.q, stored))
    if args.plot:
        traj.plot(args.plot, model=model)
        print(f"plot      {os.path.abspath(args.plot)}")
    if args.animate:
        from .animation import animate

        animate(model, traj.ts, traj.q, args.animate)
        print(f"animation {os.path.abspath(args.animate)}")
    return 0


def cmd_info(args) -> int:
    model, source = load_model(args.model, args.floating_base, args.mimic, args.joint_order, args.ignore)
    print(model_summary(model, source))
    print()
    print(tree_drawing(model))
    print()
    print(joints_table(model))
    print()
    print(f"frames ({model.nframes}): {', '.join(model.frame_names)}")
    return 0


def cmd_flags(args) -> int:
    from .compilation import flags_line

    print(flags_line())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mbjax", description="mbjax: differentiable rigid multibody dynamics in JAX.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def base_options(p):
        g = p.add_mutually_exclusive_group()
        g.add_argument("--floating-base", dest="floating_base", action="store_true", default=None,
                       help="attach the root link to the world with a free joint")
        g.add_argument("--fixed-base", dest="floating_base", action="store_false",
                       help="weld the root link to the world (default for URDF paths and the double pendulum)")
        p.add_argument("--mimic", choices=("error", "independent"), default=None,
                       help="refuse URDF mimic joints (default for URDF files) or load them as "
                            "independent joints (default for example-robot-data robots)")

    demo = sub.add_parser("demo", help="simulate passive motion of a model and report its energy balance; a "
                                       "floating-base model stands on a floor",
                          description="Simulate a few seconds of passive motion (gravity, zero torque) with a "
                                      "fixed-step integrator (mbjax.simulate) and report the energy balance and the "
                                      "time taken. A floating-base model (e.g. the bundled quadruped) instead stands "
                                      "on a floor on its feet (frames named *foot*, else its limbs' ends) under a PD "
                                      "posture controller, with rigid contacts by time stepping (mbjax.contact."
                                      "rollout); --damping, --seed and --amplitude do not apply to it.")
    demo.add_argument("--model", default=DEFAULT_MODEL,
                      help="bundled model (double_pendulum, quadruped), path to a .urdf, or an "
                           "example-robot-data name such as panda (default: %(default)s)")
    base_options(demo)
    demo.add_argument("--duration", type=DURATION, default=2.0, help="simulated time in s, at most 1e4 "
                                                                     "(default: %(default)s)")
    demo.add_argument("--dt", type=TIME_STEP, default=1e-3, help="time step in s, at most 1 and at most the duration; "
                                                                "at most 1e7 steps (default: %(default)s)")
    demo.add_argument("--damping", type=DAMPING, default=0.0,
                      help="viscous damping on every joint except the floating base, N m s/rad, >= 0 (default: 0)")
    demo.add_argument("--seed", type=SEED, default=0, help="seed of the initial state (default: %(default)s)")
    demo.add_argument("--amplitude", type=AMPLITUDE, default=1.0,
                      help="initial joint displacement (rad) and velocity scale (default: %(default)s)")
    demo.add_argument("--no-limits", action="store_true", help="no stops at the joint limits of the model's file")
    demo.add_argument("--no-floor", action="store_true",
                      help="a floating base falls freely (default: it stands on a floor under a posture controller)")
    demo.add_argument("--plot", metavar="OUT.png", help="save joint positions and energies over time (needs matplotlib)")
    demo.add_argument("--quiet", action="store_true", help="no progress output")
    demo.set_defaults(func=cmd_demo, parser=demo)

    sim = sub.add_parser("simulate", help="integrate passive motion with mbjax.simulate (diffrax, adaptive steps)",
                         description="Integrate passive motion (gravity, zero torque) from a reproducible "
                                     "initial state with mbjax.simulate and report steps and energy drift.")
    sim.add_argument("model", metavar="MODEL", help="bundled model (double_pendulum, quadruped), path to a .urdf, "
                                                    "or an example-robot-data name such as panda")
    base_options(sim)
    sim.add_argument("--duration", type=DURATION, default=5.0, help="simulated time in s, at most 1e4 "
                                                                    "(default: %(default)s)")
    sim.add_argument("--method", choices=METHODS, default="aba", help="forward-dynamics method (default: %(default)s)")
    sim.add_argument("--solver", choices=SOLVERS, default="tsit5", help="diffrax solver (default: %(default)s)")
    sim.add_argument("--rtol", type=TOLERANCE, default=1e-8, help="relative = absolute tolerance, in [1e-14, 0.1] "
                                                                 "(default: %(default)s)")
    sim.add_argument("--seed", type=SEED, default=0, help="seed of the initial state (default: %(default)s)")
    sim.add_argument("--amplitude", type=AMPLITUDE, default=1.0,
                     help="initial joint displacement (rad) and velocity scale (default: %(default)s)")
    sim.add_argument("--no-limits", action="store_true", help="no stops at the joint limits of the model's file")
    sim.add_argument("--plot", metavar="OUT.png", help="save positions, velocities and energy drift (needs matplotlib)")
    sim.add_argument("--animate", metavar="OUT.gif", help="save a 3-D animation of the motion, .gif or .mp4 "
                                                         "(needs matplotlib; .mp4 needs ffmpeg)")
    sim.add_argument("--quiet", action="store_true", help="no progress bar")
    sim.set_defaults(func=cmd_simulate, parser=sim)

    info = sub.add_parser("info", help="print a model's tree, joints, q/v slices, limits and masses",
                          description="Print a model's sizes, total mass, kinematic tree and joints table "
                                      "(names, types, slices of q and v, limits, body masses).")
    info.add_argument("model", help="path to a .urdf or MJCF .xml file, or a bundled / example-robot-data model name")
    info.add_argument("--ignore", nargs="+", default=(), metavar="FEATURE",
                      help="MJCF features to drop instead of refusing the model (see mbjax.load_mjcf)")
    base_options(info)
    info.add_argument("--joint-order", choices=("file", "pinocchio"), default="file",
                      help="order of the joints in q (default: %(default)s)")
    info.set_defaults(func=cmd_info)

    flags = sub.add_parser("flags", help="print the XLA_FLAGS mbjax recommends on CPUs",
                           description="Print the XLA_FLAGS mbjax recommends on CPUs (mbjax.compilation.CPU_FLAGS), "
                                       "for a shell: export XLA_FLAGS=\"$(mbjax flags)\". The other commands set "
                                       "them themselves.")
    flags.set_defaults(func=cmd_flags)
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("mbjax")
    except Exception:  # pragma: no cover - not installed
        return "unknown"


def main(argv=None) -> int:
    """Run the command line; returns the exit status (2 for a bad option, as argparse)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is not None and (problem := check_options(args)):
            args.parser.error(problem)
    except SystemExit as e:  # argparse: --help, --version, or a bad option (already printed)
        return e.code
    if args.command is None:
        parser.print_help()
        return 2

    import jax

    jax.config.update("jax_enable_x64", True)
    from .model.mjcf import MJCFError
    from .model.urdf import URDFError

    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, KeyError, ModuleNotFoundError) as e:  # mbjax's messages say what to do
        msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        if isinstance(e, URDFError) and "mimic" in msg:
            msg += " On the command line: --mimic independent."
        if isinstance(e, MJCFError) and e.features:
            msg += f" On the command line: --ignore {' '.join(e.features)}."
        print(f"mbjax {args.command}: error: {msg}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `mbjax info robot.urdf | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def run() -> int:
    """The ``mbjax`` command (and ``python -m mbjax``): :func:`main` in a process of its own,
    with mbjax's recommended ``XLA_FLAGS`` (:func:`mbjax.compilation.set_cpu_flags`, which keeps
    flags already set)."""
    from .compilation import set_cpu_flags

    set_cpu_flags()
    return main()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
