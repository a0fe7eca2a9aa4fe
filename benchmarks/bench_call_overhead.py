#!/usr/bin/env python
"""What XLA:CPU's runtime charges a single call, apart from its arithmetic: the costs that
bound a single ``mbjax.aba`` (ur5: about 1 µs of arithmetic in a 12 µs call, session 39).

Interleaved rounds (each round times every variant once, the minimum of ``--reps`` blocks of
``--calls`` calls; the table gives minima and medians over the rounds), float64, mbjax's
recommended ``XLA_FLAGS`` unless given (``mbjax.compilation.set_cpu_flags``):

- ``floor``: a jitted ``tau + 1`` of (q, qd, tau) (ur5's sizes); ``floor + check``: the same
  with an ``eqx.error_if`` on q, the conditional and host callback that mbjax's input checks
  add to every public call;
- ``constants K``: ``K`` constant arrays of six numbers (a closed-over model's arrays, a tree's
  index tables): each is a buffer of the program, and ``packed K`` the same numbers as slices
  of one constant behind ``lax.optimization_barrier`` (without it XLA folds the slices back
  into ``K`` constants);
- ``kernels K``: a chain of ``K`` small matrix products (a kernel each, XLA:CPU's thunks), and
  ``one loop K`` the same inside a ``lax.while_loop`` of one trip whose count XLA cannot see,
  which the small-loop hoisting of mbjax's flags compiles into one function;
- ``reductions K``: ``K`` sums of six numbers, each a reduction (whose own small computation's
  scalars XLA:CPU allocates on the heap at every call: three ``malloc`` / ``free`` pairs a
  reduction, session 40), and ``written out K`` the same sums term by term (what
  :mod:`mbjax.fused` makes of reductions);
- ``no check, ... flops``: a program above 1000 flops without a host callback, which PJRT
  hands to a worker thread (``context switches`` per call, from ``getrusage``), against the
  same with the check's callback, which makes it run on the calling thread;
  ``--no-async-dispatch`` sets ``jax_cpu_enable_async_dispatch`` off (docs/performance.md),
  which runs every program there.

    python benchmarks/bench_call_overhead.py [--rounds 9] [--no-async-dispatch] [--json out.json]
"""

import argparse
import functools
import json
import os
import resource
import time

from mbjax.compilation import set_cpu_flags  # noqa: E402  (imports jax, makes no backend)

if "XLA_FLAGS" not in os.environ:
    set_cpu_flags()

import equinox as eqx  # noqa: E402
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402


def check(x, q):
    return eqx.error_if(x, jnp.isnan(q).any(), "q contains NaN")


def with_constants(k, packed):
    """tau + 1 combined with ``k`` constant 6-vectors, separate or sliced out of one buffer."""
    values = np.random.default_rng(k).normal(size=(max(k, 1), 6))

    def f(q, qd, tau):
        if packed:
            buffer = lax.optimization_barrier(jnp.asarray(values.ravel()))
            cs = [buffer[6 * i:6 * i + 6] for i in range(k)]
        else:
            cs = [jnp.asarray(values[i]) for i in range(k)]
        out = tau + 1.0
        for i, c in enumerate(cs):
            out = out * c if i % 2 else out + c
        return check(out, q)

    return f


def one_trip(fun, x):
    """``fun(x)`` in a while loop of one trip, its count and its input hidden from XLA."""
    def body(carry):
        i, y = lax.optimization_barrier((carry[0], x))
        return i + 1, fun(y)

    return lax.while_loop(lambda c: c[0] < 1, body, (lax.optimization_barrier(jnp.int32(0)), jnp.zeros_like(x)))[1]


def with_kernels(k, loop):
    """A chain of ``k`` 6 x 6 products (a kernel each), optionally in a one-trip loop."""
    W = np.random.default_rng(k).normal(size=(max(k, 1), 6, 6)) / 6

    def chain(x):
        for i in range(k):
            x = jnp.tanh(W[i] @ x)
        return x

    def f(q, qd, tau):
        return check(one_trip(chain, tau) if loop else chain(tau), q)

    return f


def with_reductions(k, written_out):
    """tau combined with ``k`` sums of six numbers: reductions, or the terms added one by one."""
    def f(q, qd, tau):
        out = tau
        for i in range(k):
            x = out * (i + 1.5)
            out = out + (functools.reduce(lax.add, [x[j] for j in range(6)]) if written_out else x.sum())
        return check(out, q)

    return f


def heavy(with_check):
    """About 2600 flops (PJRT runs programs under 1000 on the calling thread)."""
    W = np.random.default_rng(0).normal(size=(8, 6, 6)) / 6

    def f(q, qd, tau):
        x = tau
        for i in range(8):
            x = jnp.tanh(W[i] @ (x * x) @ W[i].T).sum(0) + qd
        return check(x, q) if with_check else x

    return f


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--no-async-dispatch", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.no_async_dispatch:  # before JAX's first computation
        jax.config.update("jax_cpu_enable_async_dispatch", False)

    variants = {"floor": lambda q, qd, tau: tau + 1.0, "floor + check": lambda q, qd, tau: check(tau + 1.0, q)}
    for k in (10, 40, 80):
        variants[f"constants {k}"] = with_constants(k, False)
        variants[f"packed {k}"] = with_constants(k, True)
    for k in (20, 60):
        variants[f"kernels {k}"] = with_kernels(k, False)
        variants[f"one loop {k}"] = with_kernels(k, True)
    for k in (10, 30):
        variants[f"reductions {k}"] = with_reductions(k, False)
        variants[f"written out {k}"] = with_reductions(k, True)
    variants["no check, 2600 flops"] = heavy(False)
    variants["check, 2600 flops"] = heavy(True)

    rng = np.random.default_rng(1)
    q, qd, tau = (jnp.asarray(rng.normal(size=6)) for _ in range(3))
    compiled = {}
    for name, f in variants.items():
        jf = jax.jit(f)
        jax.block_until_ready(jf(q, qd, tau))
        compiled[name] = jf
    times = {name: [] for name in compiled}
    switches = {name: [] for name in compiled}
    for _ in range(args.rounds):
        for name, jf in compiled.items():
            best = float("inf")
            for _ in range(args.reps):
                r0 = resource.getrusage(resource.RUSAGE_SELF)
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    jax.block_until_ready(jf(q, qd, tau))
                best = min(best, (time.perf_counter() - t0) / args.calls)
                r1 = resource.getrusage(resource.RUSAGE_SELF)
                switches[name].append((r1.ru_nvcsw + r1.ru_nivcsw - r0.ru_nvcsw - r0.ru_nivcsw) / args.calls)
            times[name].append(best)

    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}, async dispatch {not args.no_async_dispatch}, "
          f"jax {jax.__version__}, load {os.getloadavg()[0]:.2f}")
    print(f"{'variant':24s} {'min µs':>8s} {'median µs':>10s} {'context switches/call':>22s}")
    rows = []
    for name in compiled:
        row = {"variant": name, "min_us": 1e6 * min(times[name]), "median_us": 1e6 * float(np.median(times[name])),
               "switches_per_call": float(np.median(switches[name]))}
        rows.append(row)
        print(f"{name:24s} {row['min_us']:8.2f} {row['median_us']:10.2f} {row['switches_per_call']:22.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"xla_flags": os.environ.get("XLA_FLAGS", ""), "async_dispatch": not args.no_async_dispatch,
                       "jax": jax.__version__, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
