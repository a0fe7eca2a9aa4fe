#!/usr/bin/env python
"""mbjax with contacts vs MuJoCo's ``mj_step``: a batch of quadrupeds dropped onto the floor
under a posture controller, in one run.

The model is MJX's own ``barkour_v0`` quadruped (shipped with MuJoCo, nv = 18), its heightfield
floor replaced by a plane (``mbjax.contact.mjcf_contacts`` reads planes). Both simulators run the
same bodies, the same four foot spheres against the same floor, the same joint dampers and
armature, and the same position servos (the model's actuators, read by
``mbjax.load_mjcf_actuators``: kp = 35, kv = 0.65, clamped at 18 N m; targets the ``home``
keyframe). Each trajectory starts from the home pose lifted by 5-15 cm with random joint
offsets and velocities, and lasts ``--duration`` seconds.

- MuJoCo: ``mujoco.rollout`` (its C loop of ``mj_step``, one thread) at the model's own step,
  2 ms, with its soft contacts and joint-limit constraints (solved at every step).
- mbjax: ``mbjax.simulate_batch`` with :class:`mbjax.contact.WithContacts`: a linear
  spring-damper floor (k = 1e4 N/m, c = 300 N s/m per foot, about MuJoCo's default softness on
  a quarter of the robot: time constant 0.02 s, critically damped), friction mu = 1 (the geoms')
  regularised at ``--slip-speed``, and critically damped joint stops of time constant 0.02 s
  (``contact.joint_limits``; MuJoCo's default for its limits). Compliant contacts
  are stiff, so two solvers are timed: Tsit5 at the longest fixed step it is stable at
  (``mbjax.simulation.stability``, times 0.9) and adaptive Tsit5 (rtol = atol = 1e-5).
- mbjax rigid: ``mbjax.contact.rollout`` (vmapped) with :class:`mbjax.contact.TimeStepping`:
  the same feet, friction and stops as rigid constraints, impulses by 20 projected
  Gauss-Seidel sweeps per step, at MuJoCo's step of 2 ms (the servos' damping implicit).

Reported per trajectory: wall time per simulated second (min and median of the repeats;
compilation (trace, lower and compile) excluded, timed apart) and the ratio mbjax / MuJoCo, for each batch size, and
the final base heights of both as a sanity check (they are different contact models: the
heights agree to millimetres, not digits). Float64, ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false``
(set below, before jax is imported).

    python benchmarks/bench_contact.py [--batch 1 64 1024] [--duration 0.5] [--repeats 3] [--json out.json]
"""

import argparse
import json
import os
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from mujoco import rollout  # noqa: E402

import mbjax  # noqa: E402
from mbjax import contact  # noqa: E402
from mbjax.simulation import stability  # noqa: E402

#: projected Gauss-Seidel sweeps per step of the rigid model
RIGID_ITERATIONS = 20
BARKOUR = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data", "barkour_v0", "assets",
                       "barkour_v0_mjx.xml")


def scene():
    """MuJoCo's compiled barkour on a plane, and mbjax's model, contacts and stops of it."""
    spec = mujoco.MjSpec.from_file(BARKOUR)
    for g in spec.geoms:
        if g.type == mujoco.mjtGeom.mjGEOM_HFIELD:
            g.type, g.size, g.hfieldname = mujoco.mjtGeom.mjGEOM_PLANE, [0.0, 0.0, 1.0], ""
    m = spec.compile()
    model = mbjax.load_mjcf(m)
    return m, model


def initial_states(m, model, B, rng):
    """qpos (B, nq) about the home keyframe, lifted 5-15 cm, joints +-0.1 rad; qvel (B, nv) +-0.2."""
    qpos = np.tile(m.key_qpos[0], (B, 1))
    qpos[:, 2] += rng.uniform(0.05, 0.15, B)
    qpos[:, 7:] += rng.uniform(-0.1, 0.1, (B, m.nq - 7))
    qvel = rng.uniform(-0.2, 0.2, (B, m.nv))
    return qpos, qvel


def home_targets(m):
    """Each servo's target: its joint's position in the home keyframe."""
    return m.key_qpos[0][m.jnt_qposadr[m.actuator_trnid[:, 0]]]


def mujoco_run(m, qpos, qvel, duration):
    """Final qpos (B, nq) of ``mujoco.rollout`` from each state, and the wall time."""
    d = mujoco.MjData(m)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    states = np.empty((len(qpos), mujoco.mj_stateSize(m, spec)))
    for i, (q, v) in enumerate(zip(qpos, qvel)):
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = q, v
        mujoco.mj_getState(m, d, states[i], spec)
    ctrl = home_targets(m)
    nstep = int(round(duration / m.opt.timestep))
    control = np.broadcast_to(ctrl, (len(qpos), nstep, m.nu)).copy()
    t0 = time.perf_counter()
    out, _ = rollout.rollout(m, d, states, control)
    wall = time.perf_counter() - t0
    return out[:, -1, 1:1 + m.nq], wall


def mbjax_program(m, model, slip_speed, solver_kind, duration):
    """A jitted ``(qpos, qvel) -> final qpos`` batch simulation, and its fixed step (or None)."""
    floor = contact.mjcf_contacts(model, m, contact.SpringDamper(1e4, 300.0), slip_speed=slip_speed)
    limits = contact.joint_limits(model, time_constant=0.02)
    dynamics = contact.WithContacts(floor, limits=limits)
    home = jnp.asarray(m.key_qpos[0])
    servo = mbjax.load_mjcf_actuators(m).control(jnp.asarray(home_targets(m)))
    if solver_kind == "rigid":
        stepping = contact.TimeStepping(contact.RigidContact(floor.points, floor.ground, floor.friction.coefficient),
                                        limits, iterations=RIGID_ITERATIONS)
        dt = m.opt.timestep
        steps = int(round(duration / dt))

        @jax.jit
        def run(qpos, qvel):
            one = lambda q, v: contact.rollout(model, stepping, q, v, servo, dt, steps)[0].q[-1]  # noqa: E731
            return jax.vmap(one)(qpos, qvel)

        return run, dt
    kwargs = dict(tau=servo, method=dynamics, saveat=[duration], max_steps=2_000_000)
    dt = None
    if solver_kind == "fixed":
        R = stability.stability_function(diffrax.Tsit5())
        rates = np.concatenate([np.ravel(r) for r in dynamics.fast_rates(model, home).values()])
        dt = 0.9 * stability.largest_stable_step(R, rates, 1e-2)
        kwargs |= dict(stepsize_controller=diffrax.ConstantStepSize(), dt0=dt)
    else:
        kwargs |= dict(rtol=1e-5, atol=1e-5)

    @jax.jit
    def run(qpos, qvel):
        return mbjax.simulate_batch(model, qpos, qvel, 0.0, duration, **kwargs).q[:, -1]

    return run, dt


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 64, 1024])
    parser.add_argument("--duration", type=float, default=0.5, help="simulated seconds per trajectory")
    parser.add_argument("--slip-speed", type=float, default=1e-2, help="mbjax's friction regularisation (m/s)")
    parser.add_argument("--solvers", nargs="+", default=["rigid", "fixed", "adaptive"],
                        choices=["rigid", "fixed", "adaptive"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()

    m, model = scene()
    rng = np.random.default_rng(0)
    print(f"barkour_v0 on a plane (nv {m.nv}), {args.duration} s per trajectory; load {os.getloadavg()[0]:.2f}; "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']}")
    results = {"duration": args.duration, "slip_speed": args.slip_speed, "load": os.getloadavg()[0],
               "xla_flags": os.environ["XLA_FLAGS"], "rows": []}
    programs = {kind: mbjax_program(m, model, args.slip_speed, kind, args.duration) for kind in args.solvers}
    for B in args.batch:
        qpos, qvel = initial_states(m, model, B, rng)
        q_in, v_in = jnp.asarray(qpos), mbjax.from_mujoco_velocity(model, qpos, qvel)
        compile_s, compiled = {}, {}
        for kind, (run, _) in programs.items():  # trace, lower and compile (no run)
            t0 = time.perf_counter()
            compiled[kind] = run.lower(q_in, v_in).compile()
            compile_s[kind] = time.perf_counter() - t0
        times = {name: [] for name in ["mujoco", *programs]}
        finals = {}
        for _ in range(args.repeats):  # interleaved: MuJoCo, then each mbjax program
            finals["mujoco"], wall = mujoco_run(m, qpos, qvel, args.duration)
            times["mujoco"].append(wall)
            for kind, run in compiled.items():
                t0 = time.perf_counter()
                finals[kind] = np.asarray(jax.block_until_ready(run(q_in, v_in)))
                times[kind].append(time.perf_counter() - t0)
        per = {k: np.asarray(v) / (B * args.duration) for k, v in times.items()}  # wall s per simulated s
        row = {"batch": B, "compile_s": compile_s, "heights": {k: float(np.mean(f[:, 2])) for k, f in finals.items()}}
        for k, v in per.items():
            row[k] = {"min": float(v.min()), "median": float(np.median(v))}
        for kind, (_, dt) in programs.items():
            row[kind] |= {"ratio_min": row[kind]["min"] / row["mujoco"]["min"],
                          "ratio_median": row[kind]["median"] / row["mujoco"]["median"], "dt": dt}
        results["rows"].append(row)
        line = f"B = {B:5d}: MuJoCo {row['mujoco']['min'] * 1e3:8.3f} ms per simulated s per trajectory"
        for kind in programs:
            line += (f" | mbjax {kind} {row[kind]['min'] * 1e3:9.2f} ms ({row[kind]['ratio_min']:6.1f}x min, "
                     f"{row[kind]['ratio_median']:6.1f}x median; compile {compile_s[kind]:.1f} s)")
        print(line)
        print("         mean final base height: " + ", ".join(f"{k} {h:.4f} m" for k, h in row["heights"].items()))
    for kind, (_, dt) in programs.items():
        if kind == "rigid":
            print(f"mbjax rigid: time stepping at dt = {dt:.3g} s, {RIGID_ITERATIONS} sweeps per step")
        elif dt is not None:
            print(f"mbjax {kind}: Tsit5 at dt = {dt:.3g} s (0.9 x the longest stable step on the contacts' rates)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
