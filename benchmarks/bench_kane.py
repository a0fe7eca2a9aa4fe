#!/usr/bin/env python
"""Is Kane's method with building-block joints efficient? (Sayers 1991)

The satellite of Table 2 (``mbjax.kane.satellite()``, 10 DOF, 5 bodies) is evaluated by:

- ``kane``: ``kane_dynamics`` on the building-block system, the paper's variables: M (Eq. 40),
  f (Eq. 42), M u' = f by Cholesky and q' from S q' = v (Eqs. 24, 29);
- ``kane_model``: ``forward_dynamics(model, ..., method="kane")`` on the equivalent mbjax Model
  (Kane's terms mapped to the Model's velocities, qdd);
- ``aba``, ``crba``: ``forward_dynamics(model, ..., method=...)`` on that Model.

For each: XLA's cost analysis of the compiled program (flops, bytes accessed), with the
model's numbers as inputs ("args") and folded in as constants ("const", as in a generated
code where P1 and the composite inertias are precomputed), and the run time of one jitted
call and of a vmapped batch of 1024 states (per state). float64, one thread
(``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false``), runtime checks off (``EQX_ON_ERROR=off``).

Usage: ``python benchmarks/bench_kane.py [--quick]``; writes ``benchmarks/results/<host>_kane.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time
from pathlib import Path

SINGLE_THREAD_FLAG = "--xla_cpu_multi_thread_eigen=false"
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_FLAG).strip()
os.environ.setdefault("EQX_ON_ERROR", "off")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402

import mbjax  # noqa: E402
from mbjax.kane import kane_dynamics, satellite, state_to_model, to_model  # noqa: E402

HERE = Path(__file__).resolve().parent


def timing(fn, args, max_time):
    """Median seconds of one call over repeats filling ``max_time`` (after a warm-up)."""
    jax.block_until_ready(fn(*args))
    times = []
    t_end = time.perf_counter() + max_time
    while time.perf_counter() < t_end or len(times) < 5:
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def programs(system, model):
    """name -> (function of (params, q, v, tau), params, state converter)."""
    def kane(s, q, u, f):
        dyn = kane_dynamics(s, q, u, f)
        return dyn.u_dot, dyn.q_dot

    def fd(method):
        return lambda m, q, qd, tau: mbjax.forward_dynamics(m, q, qd, tau, method=method)

    return {"kane": (kane, system), "kane_model": (fd("kane"), model), "aba": (fd("aba"), model),
            "crba": (fd("crba"), model)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short timings")
    a = p.parse_args(argv)
    max_time = 0.3 if a.quick else 1.0
    system = satellite()
    model = to_model(system)
    rng = np.random.default_rng(0)
    B = 1024
    qs, us = rng.uniform(-1, 1, (B, 10)), rng.uniform(-1, 1, (B, 10))
    forces = np.zeros((B, 10))
    forces[:, 6:] = rng.normal(size=(B, 4))
    qm, qdm = jax.vmap(lambda q, u: state_to_model(system, q, u))(qs, us)
    taum = np.concatenate([np.zeros((B, 6)), forces[:, 6:]], axis=1)
    states = {"kane": (qs, us, forces)}
    results = {"host": socket.gethostname(), "xla_flags": os.environ["XLA_FLAGS"], "system": "satellite (Table 2)",
               "nq": 10, "methods": {}}
    print(f"satellite, float64, {os.environ['XLA_FLAGS']}, EQX_ON_ERROR={os.environ['EQX_ON_ERROR']}")
    print(f"{'method':<12}{'flops args':>12}{'flops const':>13}{'bytes args':>12}{'1 call (us)':>13}"
          f"{'batch/state (us)':>18}")
    for name, (fn, params) in programs(system, model).items():
        q, v, tau = states.get(name, (np.asarray(qm), np.asarray(qdm), taum))
        one = jax.jit(fn)
        cost = one.lower(params, q[0], v[0], tau[0]).compile().cost_analysis()
        const = jax.jit(lambda q, v, t: fn(params, q, v, t))
        cost_c = const.lower(q[0], v[0], tau[0]).compile().cost_analysis()
        t1 = timing(one, (params, q[0], v[0], tau[0]), max_time)
        batched = jax.jit(jax.vmap(fn, in_axes=(None, 0, 0, 0)))
        tb = timing(batched, (params, q, v, tau), max_time) / B
        row = dict(flops_args=cost.get("flops"), flops_const=cost_c.get("flops"),
                   bytes_args=cost.get("bytes accessed"), call_us=1e6 * t1, batch_us_per_state=1e6 * tb)
        results["methods"][name] = row
        print(f"{name:<12}{row['flops_args']:>12.0f}{row['flops_const']:>13.0f}{row['bytes_args']:>12.0f}"
              f"{row['call_us']:>13.1f}{row['batch_us_per_state']:>18.3f}")
    out = HERE / "results" / f"{socket.gethostname()}_kane.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
