#!/usr/bin/env python
"""The acrobot swing-up by direct collocation: mbjax against CasADi + IPOPT, in one run.

The problem (as ``examples/swing_up.py``): the bundled acrobot (Spong's geometry) with both
joints driven, |tau| <= 10 N m, from hanging at rest to upright at rest in 3 s, least
``1e-3 integral |tau|^2 dt``; Hermite–Simpson collocation on N intervals (separated form,
torques quadratic on each interval), both started from the straight path at constant speed
with zero torques, KKT tolerance 1e-8.

- **mbjax**: ``trajopt.solve(problem, transcription=HermiteSimpson())`` (inverse dynamics at
  the knots and midpoints, the block-tridiagonal interior point).
- **CasADi + IPOPT**: the same transcription written in CasADi (``Opti``) on the acrobot's
  closed-form equations of motion (checked here against ``mbjax.aba`` at random states),
  solved by IPOPT with its default sparse linear solver (MUMPS) and exact Hessians.

With ``--batch B``, mbjax also solves the problem (at the first N) from B initial states at
once (``trajopt.solve_batch``, one call), reported per problem against one IPOPT solve: warm
started (its default, continuation from the first problem; first call and again) and, for
reference, each problem from its own guess (``warm_start=False``), with the costs compared. Each
tool is timed on its first call in this process (mbjax: tracing and compilation included;
CasADi: building the problem included) and warm (the same solve again, ``--repeats`` times, the
two tools interleaved; minimum and median), with its iteration count. Both solutions are then
judged the same way: the cost as the exact integral of their quadratic torques, and an
independent re-simulation of those torques by scipy's DOP853 at rtol = atol = 1e-12 on
Pinocchio's ``aba``, whose error at the horizon (q and qd
against upright at rest) is reported.

XLA's flags must be set before jax is imported: ``--xla-threads single`` (default) sets
``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false``. Needs the ``bench`` extra (CasADi) and the
``test`` extra (Pinocchio, scipy). Results go to ``benchmarks/results/<host>_trajopt_<threads>.json``.

    python benchmarks/bench_trajopt.py [--intervals 200 600] [--batch 64] [--repeats 3] [--xla-threads single|default]
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
DURATION, LIMIT, WEIGHT, TOL = 3.0, 10.0, 1e-3, 1e-8


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--intervals", type=int, nargs="+", default=[200, 600])
    p.add_argument("--batch", type=int, default=0, help="also solve from this many initial states at once "
                   "(trajopt.solve_batch, at the first N), against that many IPOPT solves")
    p.add_argument("--repeats", type=int, default=3, help="warm solves of each tool, interleaved (min and median reported)")
    p.add_argument("--xla-threads", choices=["single", "default"], default="single")
    p.add_argument("--out", type=Path, default=None, help="JSON file (default: benchmarks/results/...)")
    return p.parse_args()


ARGS = parse_args()
if ARGS.xla_threads == "single":
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_FLAG).strip()

import casadi as ca  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

jax.config.update("jax_enable_x64", True)

import mbjax  # noqa: E402
from mbjax import trajopt  # noqa: E402
from mbjax.robots import bundled_model_path  # noqa: E402

MODEL = mbjax.load_bundled("acrobot")
UPRIGHT = np.array([np.pi, 0.0])


# ------------------------------------------------------------------ CasADi + IPOPT
def acrobot_casadi():
    """xdot = f(x, u) of the acrobot in closed form (Spong, "The swing up control problem for
    the acrobot", 1995, Eq. 2-3), with the bundled model's numbers."""
    m1, m2, l1, lc1, lc2, i1, i2, g = 1.0, 1.0, 1.0, 0.5, 1.0, 0.083, 0.33, 9.81
    x, u = ca.SX.sym("x", 4), ca.SX.sym("u", 2)
    q1, q2, v1, v2 = x[0], x[1], x[2], x[3]
    c2, s2 = ca.cos(q2), ca.sin(q2)
    m11 = i1 + i2 + m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * c2)
    m12 = i2 + m2 * (lc2**2 + l1 * lc2 * c2)
    m22 = i2 + m2 * lc2**2
    h = m2 * l1 * lc2 * s2
    bias = ca.vertcat(-h * (2 * v1 * v2 + v2**2), h * v1**2)
    gravity = ca.vertcat((m1 * lc1 + m2 * l1) * g * ca.sin(q1) + m2 * g * lc2 * ca.sin(q1 + q2),
                         m2 * g * lc2 * ca.sin(q1 + q2))
    mass = ca.vertcat(ca.horzcat(m11, m12), ca.horzcat(m12, m22))
    return ca.Function("f", [x, u], [ca.vertcat(v1, v2, ca.solve(mass, u - bias - gravity))])


def check_casadi_dynamics(f):
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(20):
        q, v, u = rng.uniform(-3, 3, 2), rng.uniform(-3, 3, 2), rng.uniform(-10, 10, 2)
        a = np.asarray(f(np.concatenate([q, v]), u)).ravel()[2:]
        worst = max(worst, np.abs(a - np.asarray(mbjax.aba(MODEL, q, v, u))).max())
    assert worst < 1e-10, f"the closed-form acrobot differs from mbjax.aba by {worst:.1e}"
    return worst


def solve_casadi(N):
    t0 = time.perf_counter()
    f = acrobot_casadi()
    opti = ca.Opti()
    X, U, UM = opti.variable(4, N + 1), opti.variable(2, N + 1), opti.variable(2, N)
    h = DURATION / N
    cost = 0
    for k in range(N):
        xa, xb, ua, ub, um = X[:, k], X[:, k + 1], U[:, k], U[:, k + 1], UM[:, k]
        fa, fb = f(xa, ua), f(xb, ub)
        fm = f(0.5 * (xa + xb) + h / 8 * (fa - fb), um)
        opti.subject_to(xb - xa - h / 6 * (fa + 4 * fm + fb) == 0)
        # the exact integral of |u|^2 for the quadratic through ua, um, ub
        cost += WEIGHT * h * (4 * ca.sumsqr(ua) + 16 * ca.sumsqr(um) + 4 * ca.sumsqr(ub)
                              + 4 * ca.dot(ua, um) + 4 * ca.dot(um, ub) - 2 * ca.dot(ua, ub)) / 30
    opti.minimize(cost)
    opti.subject_to(X[:, 0] == np.zeros(4))
    opti.subject_to(X[:, N] == np.array([np.pi, 0, 0, 0]))
    opti.subject_to(opti.bounded(-LIMIT, ca.vec(U), LIMIT))
    opti.subject_to(opti.bounded(-LIMIT, ca.vec(UM), LIMIT))
    s = np.linspace(0, 1, N + 1)
    opti.set_initial(X, np.vstack([np.pi * s, 0 * s, np.full_like(s, np.pi / DURATION), 0 * s]))
    opti.solver("ipopt", {"print_time": False}, {"print_level": 0, "tol": TOL, "sb": "yes"})
    sol = opti.solve()
    elapsed = time.perf_counter() - t0
    return dict(seconds=elapsed, iterations=int(opti.stats()["iter_count"]), u=np.asarray(sol.value(U)).T,
                um=np.asarray(sol.value(UM)).T)


# ------------------------------------------------------------------ mbjax
def problem(N):
    rest = jnp.zeros(2)
    return trajopt.TrajectoryProblem(MODEL, jnp.zeros(2), rest, DURATION, N + 1, costs=[trajopt.Effort(weight=WEIGHT)],
                                     constraints=[trajopt.TerminalState(jnp.asarray(UPRIGHT), rest),
                                                  trajopt.TorqueLimits(-LIMIT, LIMIT)])


def solve_mbjax(N):
    scheme = trajopt.HermiteSimpson()
    t0 = time.perf_counter()
    solution = trajopt.solve(problem(N), transcription=scheme)
    solution.cost.block_until_ready()
    elapsed = time.perf_counter() - t0
    x = scheme.unpack(problem(N), solution.variables)
    return dict(seconds=elapsed, iterations=int(solution.iterations), converged=bool(solution.converged),
                u=np.asarray(x.u), um=np.asarray(x.um)[:-1])


# ------------------------------------------------------------------ judging both the same way
def judge(u, um):
    """(cost, |q(T) - upright|, |qd(T)|) of knot and midpoint torques u (N+1, 2), um (N, 2)."""
    N = um.shape[0]
    h = DURATION / N
    ua, ub = u[:-1], u[1:]
    effort = (4 * ua * ua + 16 * um * um + 4 * ub * ub + 4 * ua * um + 4 * um * ub - 2 * ua * ub).sum() / 30
    model = pin.buildModelFromUrdf(str(bundled_model_path("acrobot")))
    data = model.createData()

    def torque(t):
        k = min(int(t / h), N - 1)
        s = t / h - k
        return 2 * (s - 0.5) * (s - 1) * ua[k] - 4 * s * (s - 1) * um[k] + 2 * s * (s - 0.5) * ub[k]

    def rhs(t, y):
        return np.concatenate([y[2:], pin.aba(model, data, y[:2], y[2:], torque(t))])

    # steps end on the knots, where the torques' second derivative jumps
    y = np.zeros(4)
    for k in range(N):
        y = solve_ivp(rhs, (k * h, (k + 1) * h), y, method="DOP853", rtol=1e-12, atol=1e-12).y[:, -1]
    return WEIGHT * h * effort, float(np.abs(y[:2] - UPRIGHT).max()), float(np.abs(y[2:]).max())


def main():
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; load average {os.getloadavg()[0]:.2f}")
    print(f"closed-form acrobot vs mbjax.aba: {check_casadi_dynamics(acrobot_casadi()):.1e}")
    rows = []
    for N in ARGS.intervals:
        first = {"mbjax": solve_mbjax(N), "casadi": solve_casadi(N)}
        warm = {"mbjax": [], "casadi": []}
        for _ in range(ARGS.repeats):  # interleaved, so that both see the same machine
            warm["mbjax"].append(solve_mbjax(N))
            warm["casadi"].append(solve_casadi(N))
        for tool in ("mbjax", "casadi"):
            last = warm[tool][-1]
            cost, q_error, qd_error = judge(last["u"], last["um"])
            times = [w["seconds"] for w in warm[tool]]
            row = dict(tool=tool, intervals=N, first_s=first[tool]["seconds"], warm_s=min(times),
                       warm_median_s=float(np.median(times)), warm_all_s=times, iterations=last["iterations"], cost=cost,
                       q_error=q_error, qd_error=qd_error)
            rows.append(row)
            print(f"N={N:4d} {tool:7s} first {row['first_s']:6.2f} s  warm min {row['warm_s']:6.2f} s, median "
                  f"{row['warm_median_s']:6.2f} s  {row['iterations']:3d} iterations  cost {cost:.6f}  re-simulated end "
                  f"error {q_error:.1e} rad, {qd_error:.1e} rad/s", flush=True)
        m, c = rows[-2], rows[-1]
        print(f"        mbjax / CasADi: first {m['first_s'] / c['first_s']:.2f}x, warm {m['warm_s'] / c['warm_s']:.2f}x "
              f"(min), {m['warm_median_s'] / c['warm_median_s']:.2f}x (median), cost {m['cost'] / c['cost'] - 1:+.2%}")
    if ARGS.batch:
        N, B = ARGS.intervals[0], ARGS.batch
        q0 = np.stack([np.linspace(0.0, 0.5, B), np.linspace(0.0, -0.3, B)], axis=1)
        ipopt = next(r for r in rows if r["tool"] == "casadi" and r["intervals"] == N)["warm_s"]
        batches = {}
        # warm started (the default: continuation from the first problem) twice, then each problem
        # from its own guess once, for reference
        for label, warm_start in (("first", True), ("warm", True), ("cold starts", False)):
            t0 = time.perf_counter()
            batch = trajopt.solve_batch(problem(N), q0, warm_start=warm_start, progress=False)
            batch.cost.block_until_ready()
            seconds = time.perf_counter() - t0
            iterations = np.asarray(batch.iterations)
            print(f"N={N:4d} mbjax solve_batch (warm_start={warm_start}), B = {B} initial states, {label}: "
                  f"{seconds:.2f} s, {seconds / B:.3f} s per problem = {seconds / B / ipopt:.2f}x one IPOPT solve, "
                  f"{int(np.sum(np.asarray(batch.converged)))}/{B} converged, iterations {int(iterations.min())}-"
                  f"{int(iterations.max())} (total {int(iterations.sum())}), cost {float(np.min(batch.cost)):.5f}-"
                  f"{float(np.max(batch.cost)):.5f}", flush=True)
            rows.append(dict(tool="mbjax solve_batch", label=label, warm_start=warm_start, intervals=N, batch=B,
                             seconds=seconds, per_problem_per_ipopt=seconds / B / ipopt,
                             converged=int(np.sum(np.asarray(batch.converged))), iterations=iterations.tolist(),
                             cost=np.asarray(batch.cost).tolist()))
            batches[warm_start] = batch
        lower = np.asarray(batches[True].cost) < np.asarray(batches[False].cost) * (1 - 1e-9)
        higher = np.asarray(batches[True].cost) > np.asarray(batches[False].cost) * (1 + 1e-9)
        print(f"        warm started against cold: lower cost for {int(lower.sum())}, higher for {int(higher.sum())}, "
              f"the same for {int(B - lower.sum() - higher.sum())} of {B} problems")
    threads = ARGS.xla_threads
    out = ARGS.out or HERE / "results" / f"{socket.gethostname()}_trajopt_{threads}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(host=socket.gethostname(), platform=platform.platform(), python=sys.version,
                                   jax=jax.__version__, casadi=ca.__version__, xla_flags=os.environ.get("XLA_FLAGS", ""),
                                   load=os.getloadavg()[0], rows=rows), indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
