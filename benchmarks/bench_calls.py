#!/usr/bin/env python
"""Single calls, interleaved: what one ``aba`` / ``rnea`` / ``aba_derivatives`` call costs
from Python, by the ways a user makes it, against Pinocchio in the same rounds.

Per robot and function, each round times every variant once (the minimum over ``--reps``
blocks of ``--calls`` calls), round after round, so that the machine's drift reaches all of
them alike; the table gives the minimum and the median over the rounds, and each variant's
ratio to the closed-over program and to Pinocchio (minima). Variants:

- ``closed``: ``jax.jit(lambda q, qd, x: f(model, q, qd, x))``, the model's arrays constants
  (with mbjax's flags one function, :mod:`mbjax.fused`, since session 41);
- ``mbjax.jit(closed)``: the same with ``mbjax.jit(..., one_state=True)``, compiled as mbjax's
  own one-state entry points are (without YNNPACK);
- ``jax.jit(model)``: ``jax.jit(lambda m, q, qd, x: f(m, q, qd, x))``, the model an argument;
- ``mbjax.jit(model)``: the same with ``mbjax.jit`` (XLA:CPU's memory-optimised scheduler,
  :mod:`mbjax.compilation`);
- ``public``: ``mbjax.aba(model, q, qd, tau)`` called as the README shows;
- ``pinocchio``: ``pin.aba`` / ``pin.rnea`` / ``pin.computeABADerivatives`` from Python.

float64, mbjax's recommended ``XLA_FLAGS`` (``mbjax.compilation.set_cpu_flags``) unless given.

    python benchmarks/bench_calls.py [--robots ur5 panda solo12 talos_reduced]
        [--functions aba rnea aba_derivatives] [--rounds 9] [--json out.json]
"""

import argparse
import json
import os
import time

from mbjax.compilation import set_cpu_flags  # noqa: E402  (imports jax, makes no backend)

if "XLA_FLAGS" not in os.environ:  # mbjax's recommended flags unless given
    set_cpu_flags()
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402

import mbjax  # noqa: E402
from mbjax.robots import EXAMPLE_ROBOTS  # noqa: E402

PINOCCHIO = {"aba": pin.aba, "rnea": pin.rnea, "aba_derivatives": pin.computeABADerivatives}


def block_min(fn, calls, reps):
    """The least mean time of one call over ``reps`` blocks of ``calls`` calls."""
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = fn()
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def variants(name, model, pm, pdata, q, qd, x, qp):
    f = getattr(mbjax, name)
    g = lambda m, q, qd, x: f(m, q, qd, x)  # noqa: E731
    closed = jax.jit(lambda q, qd, x: f(model, q, qd, x))
    one = mbjax.jit(lambda q, qd, x: f(model, q, qd, x), one_state=True)
    arg, opt = jax.jit(g), mbjax.jit(g)
    p, v, t = qp, np.asarray(qd), np.asarray(x)
    return {
        "closed": lambda: closed(q, qd, x),
        "mbjax.jit(closed)": lambda: one(q, qd, x),
        "jax.jit(model)": lambda: arg(model, q, qd, x),
        "mbjax.jit(model)": lambda: opt(model, q, qd, x),
        "public": lambda: f(model, q, qd, x),
        "pinocchio": lambda: PINOCCHIO[name](pm, pdata, p, v, t),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robots", nargs="+", default=["ur5", "panda", "solo12", "talos_reduced"])
    ap.add_argument("--functions", nargs="+", default=["aba", "rnea", "aba_derivatives"], choices=list(PINOCCHIO))
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    print(f"jax {jax.__version__}, pinocchio {pin.__version__}, XLA_FLAGS={os.environ['XLA_FLAGS']!r}, "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    for robot in args.robots:
        model = mbjax.load_example_robot(robot, joint_order="pinocchio")
        path, floating = str(mbjax.example_robot_path(robot)), EXAMPLE_ROBOTS[robot][1]
        pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(path)
        pdata = pm.createData()
        rng = np.random.default_rng(0)
        q = mbjax.random_configuration(model, jax.random.PRNGKey(0))
        qd, x = rng.normal(size=model.nv), rng.normal(size=model.nv)
        qp = np.asarray(mbjax.to_pinocchio_configuration(model, q))
        for name in args.functions:
            fns = variants(name, model, pm, pdata, q, jax.numpy.asarray(qd), jax.numpy.asarray(x), qp)
            for fn in fns.values():  # compile and warm up
                jax.block_until_ready(fn())
            times = {k: [] for k in fns}
            for _ in range(args.rounds):
                for k, fn in fns.items():
                    times[k].append(block_min(fn, args.calls, args.reps))
            best = {k: min(v) for k, v in times.items()}
            for k, v in times.items():
                rows.append({"robot": robot, "function": name, "variant": k, "min_s": best[k],
                             "median_s": float(np.median(v)), "per_closed": best[k] / best["closed"],
                             "per_pinocchio": best[k] / best["pinocchio"]})
            print(f"{robot:<14} {name:<16} " + "  ".join(
                f"{k} {best[k] * 1e6:.1f}/{np.median(v) * 1e6:.1f}" for k, v in times.items()), flush=True)
            print(f"{'':<31}ratios (min) to closed: " + "  ".join(
                f"{k} {best[k] / best['closed']:.2f}" for k in fns if k not in ("closed", "pinocchio"))
                + f";  closed / pinocchio {best['closed'] / best['pinocchio']:.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"xla_flags": os.environ["XLA_FLAGS"], "load_end": os.getloadavg(), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
