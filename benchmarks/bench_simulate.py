#!/usr/bin/env python
"""mbjax.simulate vs Pinocchio's aba inside scipy.integrate.solve_ivp, and batch throughput.

Scenario (what a user simulates): posture control of ``panda`` (fixed base) and
``talos_reduced`` (floating base: it falls while its joints hold the posture), a PD law
``tau = M_ii (w^2 (q_ref - q) - 2 z w qd)`` on every actuated joint (w = 5 rad/s, z = 0.7,
M_ii the joint's diagonal inertia at the posture: stiff gains on light fingers would make the
problem stiff for any explicit solver), from a perturbed posture with random joint
velocities, for 10 s.

1. **Matched accuracy, one trajectory.** A reference solution (mbjax, Dopri8 at 1e-12) gives
   the error of each run, |y - y_ref| / (1 + |y_ref|) on 101 saved states. mbjax (Tsit5) and
   scipy's RK45 with Pinocchio's ``aba`` run at rtol = atol in {1e-5 ... 1e-8}; the ratio is
   taken at equal tolerance and, for matched accuracy, against the fastest scipy run whose
   error is no larger than mbjax's at rtol = 1e-6. The baseline integrates the floating base's
   quaternion with ``quat' = quat * (0, w) / 2`` and normalises it before calling Pinocchio.
2. **Batch throughput.** ``simulate_batch`` over B = 1, 64, 1024 perturbed initial states
   (rtol = 1e-6), in simulated seconds per wall second (B x duration / wall time), against the
   scipy + Pinocchio baseline's rate for one trajectory.
3. **Adjoint memory.** XLA's memory analysis of the compiled gradient of a 2 s passive panda
   simulation without joint damping (BacksolveAdjoint cannot run the PD scenario or the URDF's
   damping: integrating a damped system backwards in time is unstable, and its backward solve
   runs out of steps),
   RecursiveCheckpointAdjoint vs BacksolveAdjoint, for max_steps = 4096, 16384, 65536, and how
   far Backsolve's gradient (optimise-then-discretise, to the solver's tolerance) is from
   RecursiveCheckpoint's (the exact gradient of the discrete solution).

XLA's flags must be set before JAX's first computation: ``--xla-threads single`` (default) sets
mbjax's recommended ``XLA_FLAGS`` (:func:`mbjax.compilation.set_cpu_flags`: XLA single-threaded,
small while loops hoisted; ``--xla-loops default`` leaves XLA's own loop threshold) and one BLAS
thread. Results go to ``benchmarks/results/<host>_simulate_<threads>[_loops1k].json``.

    python benchmarks/bench_simulate.py [--quick] [--xla-threads single|default] [--xla-loops hoisted|default]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SINGLE_THREAD_FLAG = "--xla_cpu_multi_thread_eigen=false"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--xla-threads", choices=["single", "default"], default="single")
    p.add_argument("--xla-loops", choices=["hoisted", "default"], default="hoisted",
                   help="with --xla-threads single: hoisted (mbjax.compilation.set_cpu_flags) or XLA's own threshold")
    p.add_argument("--robots", nargs="+", default=["panda", "talos_reduced"])
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--batch-duration", type=float, default=2.0, help="simulated seconds per member in the batch runs")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 64, 1024])
    p.add_argument("--quick", action="store_true", help="2 s runs, B = 1 and 64 (smoke test)")
    p.add_argument("--host", default=socket.gethostname())
    p.add_argument("--no-save", action="store_true")
    return p.parse_args()


ARGS = parse_args()
if ARGS.xla_threads == "single":
    if ARGS.xla_loops == "hoisted":  # mbjax's recommended flags, the single-threaded one among them
        from mbjax.compilation import set_cpu_flags

        set_cpu_flags()
    elif SINGLE_THREAD_FLAG not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_FLAG).strip()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
if ARGS.quick:
    ARGS.duration, ARGS.batch_duration, ARGS.batches = 2.0, 1.0, [1, 64]

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

sys.path.insert(0, str(HERE.parent))
import mbjax  # noqa: E402
from mbjax.simulation import PD, Setpoint, simulate, simulate_batch  # noqa: E402

OMEGA, ZETA = 5.0, 0.7
TOLS = [1e-5, 1e-6, 1e-7, 1e-8]
SAVES = 101


def setup(name):
    model = mbjax.load_example_robot(name, joint_order="pinocchio")
    floating = model.joint_types[0] == "free"
    path = str(mbjax.example_robot_path(name))
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(path)
    assert (pm.nq, pm.nv) == (model.nq, model.nv)
    q_ref = mbjax.neutral(model)
    gains = jnp.diagonal(mbjax.crba(model, q_ref)).at[:6].multiply(0.0 if floating else 1.0)
    pd = PD(model, OMEGA**2 * gains, 2 * ZETA * OMEGA * gains, Setpoint(q_ref, jnp.zeros(model.nv)))
    q0 = mbjax.integrate(model, q_ref, 0.3 * jax.random.normal(jax.random.PRNGKey(2), (model.nv,)))
    qd0 = jax.random.normal(jax.random.PRNGKey(3), (model.nv,))
    return model, pm, floating, pd, q0, qd0, np.asarray(gains)


def quat_mul_xyzw(a, b):
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz])


def scipy_pinocchio(model, pm, floating, q0, qd0, gains, duration, tol, t_eval):
    """What a user would write: Pinocchio's aba in a solve_ivp right-hand side."""
    data = pm.createData()
    nq = model.nq
    q_ref = mbjax.to_pinocchio_configuration(model, mbjax.neutral(model))
    kp, kd = OMEGA**2 * gains, 2 * ZETA * OMEGA * gains
    damping = np.asarray(model.damping)  # the URDF's joint damping, which mbjax.simulate applies

    def rhs(t, y):
        q, v = y[:nq].copy(), y[nq:]
        qdot = np.empty(nq)
        if floating:
            quat = q[3:7]
            qn = quat / np.linalg.norm(quat)
            q[3:7] = qn
            R = pin.Quaternion(qn[3], qn[0], qn[1], qn[2]).toRotationMatrix()
            qdot[:3] = R @ v[:3]
            qdot[3:7] = 0.5 * quat_mul_xyzw(quat, np.array([v[3], v[4], v[5], 0.0]))
            qdot[7:] = v[6:]
            e = np.concatenate([np.zeros(6), q_ref[7:] - q[7:]])
        else:
            qdot[:] = v
            e = q_ref - q
        tau = kp * e - kd * v - damping * v
        return np.concatenate([qdot, pin.aba(pm, data, q, v, tau)])

    y0 = np.concatenate([mbjax.to_pinocchio_configuration(model, q0), np.asarray(qd0)])
    t = time.perf_counter()
    sol = solve_ivp(rhs, (0.0, duration), y0, method="RK45", rtol=tol, atol=tol, t_eval=t_eval)
    wall = time.perf_counter() - t
    q = mbjax.from_pinocchio_configuration(model, sol.y[:nq].T)
    if floating:
        q[:, 3:7] /= np.linalg.norm(q[:, 3:7], axis=1, keepdims=True)
    return wall, q, sol.y[nq:].T, sol.nfev


def error(q, qd, ref_q, ref_qd):
    y, y_ref = np.concatenate([q, qd], 1), np.concatenate([ref_q, ref_qd], 1)
    return float((np.abs(y - y_ref) / (1.0 + np.abs(y_ref))).max())


def timed(fn, repeats=3):
    """Best wall time of ``fn()`` after one warm-up (compiling) call; returns (time, result, compile)."""
    t = time.perf_counter()
    out = jax.block_until_ready(fn())
    first = time.perf_counter() - t
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        out = jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t)
    return best, out, first - best


def accuracy_section(name, results):
    model, pm, floating, pd, q0, qd0, gains = setup(name)
    T = ARGS.duration
    ts = jnp.linspace(0.0, T, SAVES)
    # limits=False everywhere: scipy + Pinocchio integrate the plain equations of motion
    ref = simulate(model, q0, qd0, 0.0, T, tau=pd, solver=diffrax.Dopri8(), rtol=1e-12, atol=1e-12, saveat=ts,
                   max_steps=1_000_000, limits=False)
    ref_q, ref_qd = np.asarray(ref.q), np.asarray(ref.qd)
    rows = []
    for tol in TOLS:
        wall, tr, comp = timed(lambda tol=tol: simulate(model, q0, qd0, 0.0, T, tau=pd, rtol=tol, atol=tol, saveat=ts,
                                                        limits=False))
        err = error(np.asarray(tr.q), np.asarray(tr.qd), ref_q, ref_qd)
        s_wall, s_q, s_qd, nfev = scipy_pinocchio(model, pm, floating, q0, qd0, gains, T, tol, np.asarray(ts))
        s_err = error(s_q, s_qd, ref_q, ref_qd)
        rows.append(dict(tol=tol, mbjax_s=wall, mbjax_err=err, mbjax_steps=int(tr.stats["num_steps"]),
                         mbjax_compile_s=comp, scipy_s=s_wall, scipy_err=s_err, scipy_nfev=int(nfev)))
        print(f"{name:14s} tol {tol:.0e}: mbjax {wall:7.3f} s err {err:.1e} ({rows[-1]['mbjax_steps']} steps) | "
              f"scipy+pinocchio {s_wall:7.3f} s err {s_err:.1e} ({nfev} rhs) | ratio {s_wall / wall:5.2f}", flush=True)
    mine = next(r for r in rows if r["tol"] == 1e-6)
    matched = [r for r in rows if r["scipy_err"] <= mine["mbjax_err"]]
    best = min(matched, key=lambda r: r["scipy_s"]) if matched else None
    results[name] = dict(nq=model.nq, nv=model.nv, duration=T, rows=rows, matched=dict(
        mbjax_tol=1e-6, mbjax_s=mine["mbjax_s"], mbjax_err=mine["mbjax_err"],
        scipy_tol=best and best["tol"], scipy_s=best and best["scipy_s"], scipy_err=best and best["scipy_err"],
        ratio=best and best["scipy_s"] / mine["mbjax_s"]))
    if best:
        print(f"{name:14s} matched accuracy: mbjax rtol 1e-6 (err {mine['mbjax_err']:.1e}) {mine['mbjax_s']:.3f} s vs "
              f"scipy rtol {best['tol']:.0e} (err {best['scipy_err']:.1e}) {best['scipy_s']:.3f} s: "
              f"{best['scipy_s'] / mine['mbjax_s']:.1f}x", flush=True)
    return model, pd, q0, qd0


def batch_section(name, model, pd, q0, qd0, results):
    T = ARGS.batch_duration
    key = jax.random.PRNGKey(7)
    base = results[name]["matched"]
    baseline_rate = ARGS.duration / base["scipy_s"] if base["scipy_s"] else None
    out = []
    for B in ARGS.batches:
        k1, k2 = jax.random.split(jax.random.fold_in(key, B))
        dq = 0.1 * jax.random.normal(k1, (B, model.nv))
        qs = jax.vmap(mbjax.integrate, (None, None, 0))(model, q0, dq)
        qds = qd0 + 0.1 * jax.random.normal(k2, (B, model.nv))
        run = lambda: simulate_batch(model, qs, qds, 0.0, T, tau=pd, rtol=1e-6, atol=1e-6,  # noqa: E731
                                     saveat=jnp.array([0.0, T]), limits=False)
        wall, tr, comp = timed(run, repeats=1 if B >= 1024 else 3)
        rate = B * T / wall
        out.append(dict(B=B, wall_s=wall, compile_s=comp, sim_s_per_wall_s=rate,
                        max_steps_taken=int(np.max(tr.stats["num_steps"])),
                        vs_scipy_per_trajectory=rate / baseline_rate if baseline_rate else None))
        print(f"{name:14s} B = {B:5d}: {wall:8.3f} s for {B} x {T:g} s = {rate:10.1f} simulated s / wall s"
              + (f" ({rate / baseline_rate:.1f}x scipy+pinocchio)" if baseline_rate else ""), flush=True)
    results[name]["batch"] = dict(duration=T, rtol=1e-6, baseline_sim_s_per_wall_s=baseline_rate, rows=out)


def memory_section(results):
    model, pm, floating, pd, q0, qd0, gains = setup("panda")
    # without the URDF's joint damping: backwards in time it is anti-damping, and the backward
    # solve of BacksolveAdjoint then runs out of steps
    model = eqx.tree_at(lambda m: m.damping, model, jnp.zeros_like(model.damping))
    out = []
    for max_steps in (4_096, 16_384, 65_536):
        for adj_name, adjoint in (("RecursiveCheckpointAdjoint", diffrax.RecursiveCheckpointAdjoint()),
                                  ("BacksolveAdjoint", diffrax.BacksolveAdjoint())):
            def loss(qd0, adjoint=adjoint, max_steps=max_steps):
                tr = simulate(model, q0, qd0, 0.0, 2.0, rtol=1e-8, atol=1e-8, adjoint=adjoint,
                              saveat=diffrax.SaveAt(t1=True), max_steps=max_steps, limits=False)
                return jnp.sum(tr.q[-1] ** 2)

            compiled = jax.jit(jax.grad(loss)).lower(qd0).compile()
            mem = compiled.memory_analysis()
            t = time.perf_counter()
            try:
                grad = np.asarray(jax.block_until_ready(compiled(qd0)))
                run = f"{time.perf_counter() - t:.3f} s"
            except Exception as e:  # the backward solve has its own step budget
                grad, run = None, "failed: " + str(e).split("\n")[0][-120:]
            if adj_name == "RecursiveCheckpointAdjoint":
                reference = grad  # the discretise-then-optimise gradient
            difference = (None if grad is None or reference is None
                          else float(np.max(np.abs(grad - reference)) / np.max(np.abs(reference))))
            row = dict(adjoint=adj_name, max_steps=max_steps, temp_bytes=int(mem.temp_size_in_bytes),
                       output_bytes=int(mem.output_size_in_bytes), argument_bytes=int(mem.argument_size_in_bytes),
                       run=run, gradient_difference=difference)
            out.append(row)
            print(f"gradient memory {adj_name:27s} max_steps {max_steps:6d}: temp {row['temp_bytes'] / 2**20:8.2f} MiB,"
                  f" run {run}" + ("" if difference is None or adj_name == "RecursiveCheckpointAdjoint" else
                                   f", gradient {difference:.1e} (relative) from RecursiveCheckpointAdjoint's"),
                  flush=True)
    results["adjoint_memory"] = dict(robot="panda", duration=2.0, rows=out)


def main():
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r} (--xla-threads {ARGS.xla_threads}, --xla-loops {ARGS.xla_loops}); "
          f"jax {jax.__version__}, diffrax {diffrax.__version__}, pinocchio {pin.__version__}", flush=True)
    results = dict(meta=dict(host=ARGS.host, platform=platform.platform(), processor=platform.processor(),
                             xla_flags=os.environ.get("XLA_FLAGS", ""), xla_threads=ARGS.xla_threads,
                             jax=jax.__version__, diffrax=diffrax.__version__, pinocchio=pin.__version__,
                             loadavg_before=os.getloadavg(),
                             scenario=f"PD posture control, kp = w^2 M_ii, kd = 2 z w M_ii, w={OMEGA}, z={ZETA}"))
    for name in ARGS.robots:
        model, pd, q0, qd0 = accuracy_section(name, results)
        batch_section(name, model, pd, q0, qd0, results)
    memory_section(results)
    results["meta"]["loadavg_after"] = os.getloadavg()
    if not ARGS.no_save:
        loops = "_loops1k" if ARGS.xla_threads == "single" and ARGS.xla_loops == "default" else ""
        path = HERE / "results" / f"{ARGS.host}_simulate_{ARGS.xla_threads}{loops}{'_quick' if ARGS.quick else ''}.json"
        path.write_text(json.dumps(results, indent=1))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
