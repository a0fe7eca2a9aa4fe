#!/usr/bin/env python
"""States per chunk of the batched kernels, interleaved: what each candidate chunk size costs
per state for the batched ``aba``, ``rnea``, ``crba`` (B = 4096 by default) and derivatives
(``aba_derivatives`` and ``jax.jacfwd(aba)``, B = 256), all candidates in one process.

A batch runs its kernel on chunks of C states in a ``lax.map`` (:func:`mbjax.dynamics.levels.run_chunked`):
large enough to amortise each kernel's launch, small enough for the chunk's working set to stay in
cache. ``mbjax.dynamics.levels.CHUNK`` and ``DERIVATIVE_CHUNK`` are read when a function is
traced, so each candidate compiles its own programs; then every round times each program once
(the least mean of ``--reps`` blocks of calls), round after round, so that the machine's drift
reaches all candidates alike. The table gives per robot and function the minimum and median
over the rounds per state, and the ratio of each candidate's minimum to the current setting's.

float64, mbjax's recommended ``XLA_FLAGS`` (``mbjax.compilation.set_cpu_flags``) unless given.

    python benchmarks/bench_chunk.py [--robots solo12 talos_reduced] [--chunks 32 64 128]
        [--functions aba rnea crba aba_derivatives jacfwd] [--rounds 9] [--json out.json]
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

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import mbjax  # noqa: E402
from mbjax.dynamics import levels  # noqa: E402

#: function -> (which chunk setting it reads, default batch size)
FUNCTIONS = {"aba": ("CHUNK", 4096), "rnea": ("CHUNK", 4096), "crba": ("CHUNK", 4096),
             "aba_derivatives": ("DERIVATIVE_CHUNK", 256), "jacfwd": ("DERIVATIVE_CHUNK", 256)}


def aba_jacobian(model, q, qd, tau):
    """``jax.jacfwd`` of aba in (q tangent, qd, tau), as ``bench_dynamics.py`` times it."""
    def f(dq, qd, tau):
        return mbjax.aba(model, mbjax.integrate(model, q, dq), qd, tau)

    return jax.jacfwd(f, argnums=(0, 1, 2))(jnp.zeros(model.nv, qd.dtype), qd, tau)


def program(name, chunk, setting, args):
    """The batched function ``name`` traced at ``args`` and compiled with ``setting = chunk``."""
    body = {"aba": mbjax.aba, "rnea": mbjax.rnea, "crba": lambda m, q, *_: mbjax.crba(m, q),
            "aba_derivatives": mbjax.aba_derivatives, "jacfwd": aba_jacobian}[name]
    # as bench_dynamics.py times them: jax.jacfwd in a plain jax.jit, the others with mbjax's options
    options = {} if name == "jacfwd" else dict(compiler_options=mbjax.compilation.cpu_options())
    fn = jax.jit(jax.vmap(body, in_axes=(None, 0, 0, 0)), **options)
    old = getattr(levels, setting)
    setattr(levels, setting, chunk)
    jax.clear_caches()  # JAX caches the batched traces of the jitted functions inside
    try:
        return fn.trace(*args).lower().compile()
    finally:
        setattr(levels, setting, old)


def block_min(fn, args, reps, B):
    """The least mean time per state of one call over ``reps`` blocks."""
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(2):
            out = fn(*args)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - t0) / 2 / B)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--robots", nargs="+", default=["ur5", "panda", "solo12", "talos_reduced"])
    ap.add_argument("--functions", nargs="+", default=list(FUNCTIONS), choices=list(FUNCTIONS))
    ap.add_argument("--chunks", nargs="+", type=int, default=[32, 64, 128])
    ap.add_argument("--batch", type=int, help="batch size of every function (default: 4096, derivatives 256)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    print("chunk sizes (current: CHUNK = %d, DERIVATIVE_CHUNK = %d); XLA_FLAGS=%s"
          % (levels.CHUNK, levels.DERIVATIVE_CHUNK, os.environ.get("XLA_FLAGS", "")), flush=True)
    for robot in args.robots:
        model = mbjax.load_example_robot(robot, joint_order="pinocchio")
        rng = np.random.default_rng(0)
        inputs = {}
        for name in args.functions:
            B = args.batch or FUNCTIONS[name][1]
            q = jax.vmap(lambda k: mbjax.random_configuration(model, k))(jax.random.split(jax.random.PRNGKey(0), B))
            qd, x = (jnp.asarray(rng.standard_normal((B, model.nv))) for _ in range(2))
            inputs[name] = (model, q, qd, x)
        progs = {(name, c): program(name, c, FUNCTIONS[name][0], inputs[name])
                 for name in args.functions for c in args.chunks}
        times = {k: [] for k in progs}
        for _ in range(args.rounds):
            for (name, c), fn in progs.items():
                times[name, c].append(block_min(fn, inputs[name], args.reps, inputs[name][1].shape[0]))
        for name in args.functions:
            current = getattr(levels, FUNCTIONS[name][0])
            ref = min(times[name, current]) if (name, current) in times else None
            for c in args.chunks:
                t = times[name, c]
                row = dict(robot=robot, function=name, batch=inputs[name][1].shape[0], chunk=c,
                           min_us=1e6 * min(t), median_us=1e6 * float(np.median(t)))
                row["ratio_to_current"] = min(t) / ref if ref else None
                rows.append(row)
                print("%-14s %-16s B=%-5d C=%-4d min %8.3f  median %8.3f us/state  %s" % (
                    robot, name, row["batch"], c, row["min_us"], row["median_us"],
                    "" if ref is None else "%.2fx current" % row["ratio_to_current"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(xla_flags=os.environ.get("XLA_FLAGS", ""), load=os.getloadavg(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
