#!/usr/bin/env python
"""mbjax vs Pinocchio: forward/inverse dynamics, mass matrix and ABA derivatives, on CPU.

Measures, in one run and on the same machine:

- single-call latency of jitted ``mbjax.aba`` (model passed as an argument, and model closed
  over as a constant) vs ``pinocchio.aba`` called from Python;
- batched (``jax.vmap``) throughput of ``aba`` (B = 1024, 4096), ``rnea`` and ``crba``
  (largest B), as time per state, vs Pinocchio's per-call time in a Python loop over states;
- the full Jacobian of ``aba`` with respect to (q tangent, qd, tau), with ``jax.jacfwd`` and
  with ``mbjax.aba_derivatives`` (single call and batched), vs
  ``pinocchio.computeABADerivatives``; ``mbjax.rnea_derivatives`` vs
  ``pinocchio.computeRNEADerivatives``;
- trace / lower / compile time of every jitted function, XLA's memory analysis of the compiled
  batched functions, the process's peak RSS, and op counts of the compiled HLO.

XLA's CPU options must be chosen before jax is imported, so this script is a small driver
that never imports jax itself: it re-executes itself once per (dtype, threading, YNN)
combination with the environment set: ``--xla-threads single`` (the default) sets
``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false`` and one OpenBLAS/OpenMP/MKL thread;
``--xla-threads one`` also ``NPROC=1``, which sizes XLA:CPU's own thread pool (the one that
runs independent kernels of a program side by side) to one thread;
``--xla-ynn off`` disables XLA:CPU's YNNPACK fusions; ``--xla-loops hoisted`` (the default)
adds mbjax's recommended loop flag (``mbjax.compilation.CPU_FLAGS``: while loops that access
under 100 MB compiled into one kernel each), ``--xla-loops default`` keeps XLA's 1 KB;
``--xla-scheduler memory`` (the default) adds mbjax's scheduler flag (XLA:CPU's memory-optimised
scheduler for every program, where jaxlib has it), ``--xla-scheduler default`` keeps XLA's own;
``--malloc reuse`` (the default) applies mbjax's glibc settings that keep freed memory for the
next large result (``mbjax.allocator``, part of ``mbjax.compilation.set_cpu_flags``), ``--malloc
glibc`` runs with glibc's own.

Usage (from the repository root)::

    python benchmarks/bench_dynamics.py --quick                      # smoke test, ~1.5 min
    python benchmarks/bench_dynamics.py --dtype float64              # full run, ~5-8 min
    python benchmarks/bench_dynamics.py --dtype both --xla-threads both
    python benchmarks/bench_dynamics.py --robots panda --quantities aba --xla-threads both
    python benchmarks/bench_dynamics.py --quantities aba rnea crba --xla-threads single one

Each run prints a table and writes
``benchmarks/results/<host>_<dtype>_<threads>[_noynn][_loops1k].json``; ``report.py`` renders it as
Markdown. See ``benchmarks/README.md`` for what each column means.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROBOTS = ["ur5", "panda", "solo12", "talos_reduced"]
QUANTITIES = ["aba", "aba_closed", "rnea", "crba", "jac"]
SINGLE_THREAD_FLAG = "--xla_cpu_multi_thread_eigen=false"
THREADS = ["single", "one", "default"]
NO_YNN_FLAG = "--xla_cpu_experimental_ynn_fusion_type="  # empty list: no YNNPACK fusions
#: XLA:CPU's small while loops up to 100 MB in one kernel: mbjax.compilation.CPU_FLAGS's backend
#: option (checked against it in each run)
LOOPS_FLAG = "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=100000000"
#: XLA:CPU's memory-optimised scheduler for every program: mbjax.compilation.CPU_FLAGS's, where jaxlib
#: has the flag (0.10 on; checked against it in each run)
SCHEDULER_FLAG = "--xla_cpu_scheduler_type=CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED"
CHILD_ENV = "MBJAX_BENCH_CHILD"


# ------------------------------------------------------------------------------------ driver
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", choices=["float64", "float32", "both"], default="float64")
    p.add_argument("--xla-threads", nargs="+", choices=THREADS + ["both"], default=["single"],
                   help=f"single: XLA_FLAGS={SINGLE_THREAD_FLAG} and OPENBLAS/OMP/MKL_NUM_THREADS=1; "
                   "one: single and NPROC=1 (XLA:CPU's thread pool of one thread); "
                   "default: XLA's and OpenBLAS's own threading; both: single and default. "
                   "Several: one run each, then each compared with the first")
    p.add_argument("--xla-ynn", choices=["default", "off", "both"], default="default",
                   help=f"off: XLA_FLAGS+={NO_YNN_FLAG}, no YNNPACK fusions (applied by default by jaxlib 0.10 "
                   "on CPU; several times slower on an earlier formulation of aba); results file gets a '_noynn' suffix")
    p.add_argument("--xla-loops", choices=["hoisted", "default", "both"], default="hoisted",
                   help=f"hoisted: XLA_FLAGS+={LOOPS_FLAG} (mbjax's recommended flags, "
                   "mbjax.compilation.set_cpu_flags); default: XLA's own threshold of 1 KB; results file gets a "
                   "'_loops1k' suffix")
    p.add_argument("--xla-scheduler", choices=["memory", "default"], default="memory",
                   help=f"memory: XLA_FLAGS+={SCHEDULER_FLAG} where jaxlib has it (0.10 on; mbjax's recommended "
                   "flags, mbjax.compilation.set_cpu_flags: a user's plain jax.jit of one state runs its kernels on "
                   "the calling thread); default: XLA's own scheduler; results file gets a '_sched-default' suffix")
    p.add_argument("--malloc", choices=["reuse", "glibc"], default="reuse",
                   help="reuse: mbjax.allocator.reuse_freed_memory() (mbjax's recommended settings, "
                   "mbjax.compilation.set_cpu_flags); glibc: glibc's own malloc settings (results above 32 MB are "
                   "fresh pages on every call); results file gets a '_glibc' suffix")
    p.add_argument("--quick", action="store_true",
                   help="ur5+panda, B=1024 only, few repeats, no batched Jacobian / closed-over batched aba (smoke test)")
    p.add_argument("--robots", nargs="+", choices=ROBOTS, help="subset of robots (default: all; --quick: ur5 panda)")
    p.add_argument("--quantities", nargs="+", choices=QUANTITIES, help="subset of measurements (default: all)")
    p.add_argument("--batch", type=int, nargs="+", help="batch sizes for aba (default 1024 4096; --quick: 1024); "
                   "rnea/crba/closed-over aba use the largest")
    p.add_argument("--jac-batch", type=int, help="batch size of the batched ABA Jacobian (default 256)")
    p.add_argument("--repeats", type=int, help="most timing repeats; median and min reported (default 31; --quick: 7)")
    p.add_argument("--min-time", type=float, help="seconds one timing repeat lasts, at least one call (default 0.01)")
    p.add_argument("--max-time", type=float, help="seconds of repeats per measurement, at least 3 repeats (default 3; --quick: 1)")
    p.add_argument("--host", default=None, help="name used in the results file (default: hostname, or 'local')")
    p.add_argument("--out-dir", default=str(HERE / "results"))
    p.add_argument("--no-save", action="store_true", help="do not write the JSON file")
    a = p.parse_args(argv)
    a.robots = a.robots or (["ur5", "panda"] if a.quick else ROBOTS)
    a.quantities = a.quantities or QUANTITIES
    a.batch = sorted(a.batch or ([1024] if a.quick else [1024, 4096]))
    a.jac_batch = a.jac_batch or 256
    a.repeats = a.repeats or (7 if a.quick else 31)
    a.min_time = a.min_time or 0.01
    a.max_time = a.max_time or (1.0 if a.quick else 3.0)
    a.host = a.host or _hostname()
    return a


def _hostname():
    h = socket.gethostname() or "local"
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in h) or "local"


def _jaxlib_at_least(version: tuple) -> bool:
    """Whether the installed jaxlib is ``version`` or newer (read without importing it)."""
    try:
        from importlib.metadata import version as installed
        return tuple(int(x) for x in installed("jaxlib").split(".")[:2]) >= version
    except Exception:  # noqa: BLE001
        return False


def xla_flags(threads: str, ynn: str, loops: str, scheduler: str = "memory") -> str:
    """The inherited XLA_FLAGS with the threading, YNN, loop and scheduler flags set as asked."""
    ours = ("--xla_cpu_multi_thread_eigen", "--xla_cpu_experimental_ynn_fusion_type", "--xla_backend_extra_options",
            "--xla_cpu_scheduler_type")
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(ours)]
    if threads != "default":
        flags.append(SINGLE_THREAD_FLAG)
    if ynn == "off":
        flags.append(NO_YNN_FLAG)
    if loops == "hoisted":
        flags.append(LOOPS_FLAG)
    if scheduler == "memory" and _jaxlib_at_least((0, 10)):  # an unknown flag ends the process
        flags.append(SCHEDULER_FLAG)
    return " ".join(flags)


def blas_env(threads: str) -> dict:
    """BLAS/LAPACK threads: one in ``single`` and ``one`` modes, the library's default otherwise;
    in ``one`` mode also XLA:CPU's thread pool of one thread (``NPROC``, read when jax makes its
    CPU client).

    XLA:CPU calls LAPACK/BLAS (scipy's OpenBLAS) for Cholesky, LU and triangular solves; on a
    small loaded machine OpenBLAS's own threads made one 38 x 38 triangular solve take ~15 ms
    instead of tens of microseconds.
    """
    if threads == "default":
        return {}
    names = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    return {n: "1" for n in names} | ({"NPROC": "1"} if threads == "one" else {})


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if os.environ.get(CHILD_ENV):
        (args.xla_threads,) = args.xla_threads  # the driver passes one mode to each run
        return run(args)
    dtypes = ["float64", "float32"] if args.dtype == "both" else [args.dtype]
    threads = list(dict.fromkeys(t for x in args.xla_threads for t in (["single", "default"] if x == "both" else [x])))
    ynns = ["default", "off"] if args.xla_ynn == "both" else [args.xla_ynn]
    loops = ["hoisted", "default"] if args.xla_loops == "both" else [args.xla_loops]
    base = _strip(argv, ("--dtype", "--xla-threads", "--xla-ynn", "--xla-loops"))
    unset = ()  # glibc reads its settings when a run starts: none of mbjax's for --malloc glibc
    if args.malloc == "glibc":
        from mbjax.allocator import MALLOC_SETTINGS as unset
    rc = 0
    for d in dtypes:
        for t in threads:
            for y in ynns:
                for lp in loops:
                    env = dict(os.environ, XLA_FLAGS=xla_flags(t, y, lp, args.xla_scheduler), **blas_env(t),
                               **{CHILD_ENV: "1"})
                    for name in unset:
                        env.pop(name, None)
                    cmd = [sys.executable, str(Path(__file__).resolve()), *base, "--dtype", d, "--xla-threads", t,
                           "--xla-ynn", y, "--xla-loops", lp]
                    print(f"\n=== dtype={d} xla-threads={t} xla-ynn={y} xla-loops={lp}  (XLA_FLAGS={env['XLA_FLAGS']!r}) ===",
                          flush=True)
                    rc |= subprocess.run(cmd, env=env).returncode
    if not args.no_save:
        for d in dtypes:
            for lp in loops:
                for y in ynns:
                    for t in threads[1:]:
                        compare_runs(args, d, (threads[0], y, lp), (t, y, lp), "XLA threading")
                for t in threads:
                    if len(ynns) == 2:
                        compare_runs(args, d, (t, "off", lp), (t, "default", lp), "YNNPACK fusions")
            if len(loops) == 2:
                for t in threads:
                    for y in ynns:
                        compare_runs(args, d, (t, y, "default"), (t, y, "hoisted"), "small while loops hoisted")
    return rc


def _strip(argv, options):
    """argv without the given options and their values (``--opt v ...`` and ``--opt=v``)."""
    out, skip = [], False
    for a in argv:
        if skip and not a.startswith("--"):
            continue
        skip = a in options
        if skip:
            continue
        if any(a.startswith(o + "=") for o in options):
            continue
        out.append(a)
    return out


def results_path(args, dtype, threads, ynn, loops) -> Path:
    suffix = ("_noynn" if ynn == "off" else "") + ("_loops1k" if loops == "default" else "") + (
        "_sched-default" if args.xla_scheduler == "default" else "") + ("_glibc" if args.malloc == "glibc" else "")
    return Path(args.out_dir) / f"{args.host}_{dtype}_{threads}{suffix}.json"


def compare_runs(args, dtype, base, other, what):
    """Print time(other) / time(base) for every measurement the two runs share."""
    try:
        a, b = (json.loads(results_path(args, dtype, *k).read_text()) for k in (base, other))
    except FileNotFoundError:
        return
    ref = {(r["robot"], r["quantity"]): r for r in a["timings"]}
    label = lambda k: f"threads={k[0]},ynn={k[1]},loops={k[2]}"  # noqa: E731
    print(f"\n{what}, {dtype}: time with {label(other)} / time with {label(base)}")
    print(f"{'robot':<14} {'quantity':<36} {'base':>12} {'other':>12} {'other/base':>11}")
    for r in b["timings"]:
        s = ref.get((r["robot"], r["quantity"]))
        if s:
            print(f"{r['robot']:<14} {r['quantity']:<36} {fmt_t(s['mbjax_s'])} {fmt_t(r['mbjax_s'])} "
                  f"{r['mbjax_s'] / s['mbjax_s']:>11.2f}")


def fmt_t(t):
    if t is None:
        return f"{'-':>12}"
    if t < 1e-3:
        return f"{t * 1e6:>9.2f} us"
    if t < 1:
        return f"{t * 1e3:>9.2f} ms"
    return f"{t:>10.2f} s"


# ------------------------------------------------------------------------------------ worker
def run(args):
    if "jax" in sys.modules:
        raise RuntimeError("jax was imported before XLA_FLAGS could be set")
    os.environ["XLA_FLAGS"] = xla_flags(args.xla_threads, args.xla_ynn, args.xla_loops, args.xla_scheduler)  # as the driver
    for n in blas_env("one"):
        os.environ.pop(n, None)
    os.environ.update(blas_env(args.xla_threads))
    if args.malloc == "reuse":  # before JAX makes its threads
        from mbjax.allocator import reuse_freed_memory

        reuse_freed_memory()
    import gc
    import resource
    from functools import partial

    import jax

    jax.config.update("jax_enable_x64", args.dtype == "float64")
    import jax.numpy as jnp
    import numpy as np
    import pinocchio as pin

    import mbjax
    from mbjax.robots import EXAMPLE_ROBOTS

    assert LOOPS_FLAG.split("=", 1)[1] == mbjax.compilation.CPU_FLAGS["xla_backend_extra_options"], \
        "LOOPS_FLAG is not mbjax.compilation.CPU_FLAGS's loop threshold"
    assert args.xla_scheduler == "default" or SCHEDULER_FLAG in mbjax.compilation.flags_line() or not _jaxlib_at_least((0, 10)), \
        "SCHEDULER_FLAG is not mbjax.compilation.CPU_FLAGS's scheduler"
    dtype = jnp.float64 if args.dtype == "float64" else jnp.float32
    # what mbjax.jit compiles with (mbjax.compilation): the "(mbjax.jit)" rows
    MBJAX_JIT = partial(jax.jit, compiler_options=mbjax.compilation.CPU_OPTIONS)
    log = partial(print, flush=True)
    meta = metadata(args, jax, np, pin, mbjax)
    log(f"mbjax benchmark: dtype={args.dtype}, xla-threads={args.xla_threads}, xla-ynn={args.xla_ynn}, "
        f"xla-loops={args.xla_loops} (XLA_FLAGS={meta['xla_flags']!r}), malloc={args.malloc} {meta['malloc']}, "
        f"jax {jax.__version__} on {jax.devices()[0].platform}, pinocchio {pin.__version__}, "
        f"{meta['cpu']} x{meta['cpu_count']}, load avg {meta['loadavg_start']}")
    timings, compiles, memory, hlo = [], [], [], []

    # --------------------------------------------------------------------- timing helpers
    def bench(*fns):
        """Median (and min) over repeats of the mean time of one call of each of ``fns`` (which
        block), timed in alternating repeats: mbjax and its peer see the same load on the machine
        (a Pinocchio timed once per robot, before mbjax's rows, read 4.9 and 7.0 µs per ``crba``
        of talos_reduced in two runs of session 43's noisy machine, minutes apart).

        Each repeat of a function makes ``number`` calls lasting about ``args.min_time`` (at
        least one call); there are as many rounds of repeats as fit in ``args.max_time``
        seconds, between 3 and ``args.repeats``. Short repeats let the minimum see through other
        load on the machine.
        """
        numbers, rounds = [], 0.0
        for fn in fns:
            fn()  # warm-up
            t0 = time.perf_counter()
            fn()
            t1 = max(time.perf_counter() - t0, 1e-7)
            numbers.append(max(1, round(args.min_time / t1)))
            rounds += numbers[-1] * t1
        repeats = min(args.repeats, max(3, int(args.max_time / rounds)))
        per, cpu, faults = ([[] for _ in fns] for _ in range(3))
        gc_was = gc.isenabled()
        gc.disable()
        try:
            for _ in range(repeats):
                for i, (fn, number) in enumerate(zip(fns, numbers)):
                    f0, c0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time(), time.perf_counter()
                    for _ in range(number):
                        fn()
                    per[i].append((time.perf_counter() - t0) / number)
                    cpu[i].append((time.process_time() - c0) / number)
                    faults[i].append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / number)
        finally:
            if gc_was:
                gc.enable()
        out = []
        for p_, c_, f_, number in zip(per, cpu, faults, numbers):
            p_, c_ = sorted(p_), sorted(c_)
            # first touches of fresh memory: glibc maps blocks above 32 MB anew for every call (results
            # or XLA scratch buffers that large), ~1 µs per 4 KB page on a virtual machine (README, session 29)
            out.append({"median": p_[len(p_) // 2], "min": p_[0], "max": p_[-1], "cpu_median": c_[len(c_) // 2],
                        "number": number, "repeats": p_, "page_faults": sum(f_) / len(f_)})
        return out

    def compile_jit(fn, *xs, name, robot, batch=None, jit=jax.jit):
        """Trace, lower and compile ``jit(fn)`` (``jax.jit`` with or without options) at ``xs``,
        timing each stage.

        The jitted function reuses that compilation on its first call (measured too), so the
        stages add up to the cold first-call cost.
        """
        f = jit(fn)
        t0 = time.perf_counter()
        traced = f.trace(*xs)
        t1 = time.perf_counter()
        lowered = traced.lower()
        t2 = time.perf_counter()
        compiled = lowered.compile()
        t3 = time.perf_counter()
        jax.block_until_ready(f(*xs))
        t4 = time.perf_counter()
        rec = {"robot": robot, "function": name, "batch": batch, "trace_s": t1 - t0, "lower_s": t2 - t1,
               "compile_s": t3 - t2, "first_call_s": t4 - t3, "total_s": t4 - t0}
        try:
            ca = compiled.cost_analysis()
            ca = ca[0] if isinstance(ca, (list, tuple)) else ca
            rec["flops"] = float(ca.get("flops", float("nan")))
        except Exception:  # noqa: BLE001 - optional backend feature
            pass
        compiles.append(rec)
        log(f"  compile {robot:<13} {name:<30} trace {rec['trace_s']:6.2f} s  lower {rec['lower_s']:6.2f} s  "
            f"compile {rec['compile_s']:6.2f} s  (first call total {rec['total_s']:6.2f} s)")
        return f, compiled

    def record(robot, model, quantity, fn, peer, batch=None, note=None):
        """Time ``fn`` (mbjax) and ``peer`` (a :func:`pin_loop`, or None) in alternating repeats
        (:func:`bench`) and log their ratio; ``batch``: states per call of ``fn``."""
        mb, *peer_t = bench(fn, *([peer] if peer else []))
        pin_t = {k: peer_t[0][k] / peer.calls for k in ("median", "min", "cpu_median")} if peer else None
        per_state = mb["median"] / (batch or 1)
        pin_s, pin_min = (pin_t["median"], pin_t["min"]) if pin_t else (None, None)
        r = {"robot": robot, "nq": model.nq, "nv": model.nv, "dtype": args.dtype, "threads": args.xla_threads,
             "ynn": args.xla_ynn,
             "quantity": quantity, "batch": batch, "mbjax_s": per_state, "mbjax_call_s": mb["median"],
             "mbjax_min_s": mb["min"] / (batch or 1), "mbjax_number": mb["number"], "mbjax_repeats": len(mb["repeats"]),
             "pinocchio_s": pin_s, "pinocchio_min_s": pin_min, "ratio": per_state / pin_s if pin_t else None,
             "ratio_min": mb["min"] / (batch or 1) / pin_min if pin_t else None,
             "mbjax_cpu_s": mb["cpu_median"] / (batch or 1), "pinocchio_cpu_s": pin_t["cpu_median"] if pin_t else None,
             "mbjax_page_faults_per_call": mb["page_faults"]}
        r["ratio_cpu"] = r["mbjax_cpu_s"] / r["pinocchio_cpu_s"] if pin_t else None
        if note:
            r["note"] = note
        timings.append(r)
        ratios = (f"{r['ratio']:8.2f}x  (min: {fmt_t(r['mbjax_min_s'])} / {fmt_t(pin_min)} = {r['ratio_min']:.2f}x; "
                  f"cpu: {fmt_t(r['mbjax_cpu_s'])} / {fmt_t(r['pinocchio_cpu_s'])} = {r['ratio_cpu']:.2f}x)"
                  if pin_t else f"(min: {fmt_t(r['mbjax_min_s'])}; cpu: {fmt_t(r['mbjax_cpu_s'])})")
        faults = f"  page faults/call {mb['page_faults']:.0f}" if mb["page_faults"] >= 1 else ""
        log(f"  time    {robot:<13} {quantity:<35} mbjax {fmt_t(per_state)}  pinocchio {fmt_t(pin_s)}  {ratios}{faults}")

    def pin_loop(fn, states):
        """A Python loop calling a Pinocchio binding on each of ``states``; ``calls``: how many."""
        def loop():
            for s in states:
                fn(*s)
        loop.calls = len(states)
        return loop

    # --------------------------------------------------------------------------- robots
    for name in args.robots:
        floating = EXAMPLE_ROBOTS[name][1]
        path = str(mbjax.example_robot_path(name))
        model = mbjax.load_example_robot(name, joint_order="pinocchio", dtype=dtype)
        pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(path)
        pdata = pm.createData()
        nv, nq = model.nv, model.nq
        levels = len(model.topology.levels)
        log(f"\n{name}: nq={nq} nv={nv} bodies={model.nbodies} tree levels={levels} "
            f"(pinocchio nq={pm.nq} nv={pm.nv})")

        # random valid states; the same ones (quaternions reordered) for Pinocchio
        Bmax = max(args.batch + ([args.jac_batch] if "jac" in args.quantities else []))
        rng = np.random.default_rng(0)
        keys = jax.random.split(jax.random.PRNGKey(0), Bmax)
        Q = np.asarray(jax.vmap(lambda k: mbjax.random_configuration(model, k))(keys))
        V = rng.normal(size=(Bmax, nv))
        T = rng.normal(size=(Bmax, nv)) * 10.0
        A = rng.normal(size=(Bmax, nv))
        Qp = mbjax.to_pinocchio_configuration(model, Q)
        n_pin = min(Bmax, 256)
        pin_states = [(pm, pdata, Qp[i].copy(), V[i].copy(), T[i].copy()) for i in range(n_pin)]
        pin_states_a = [(pm, pdata, Qp[i].copy(), V[i].copy(), A[i].copy()) for i in range(n_pin)]
        pin_states_q = [(pm, pdata, Qp[i].copy()) for i in range(n_pin)]
        Qj, Vj, Tj, Aj = (jnp.asarray(x, dtype) for x in (Q, V, T, A))
        q0, v0, t0_, a0 = Qj[0], Vj[0], Tj[0], Aj[0]

        # ---------------------------------------------------------------- ABA
        if "aba" in args.quantities or "aba_closed" in args.quantities:
            pin_aba = pin_loop(pin.aba, pin_states)
        if "aba" in args.quantities:
            f, c = compile_jit(lambda m, q, v, t: mbjax.aba(m, q, v, t), model, q0, v0, t0_, name="aba", robot=name)
            hlo.append({"robot": name, "function": "aba single", "tree_levels": levels, **hlo_stats(c)})
            # the states given to Pinocchio are the same (quaternions reordered): check on one
            err = float(np.abs(np.asarray(f(model, q0, v0, t0_)) - pin.aba(pm, pdata, Qp[0], V[0], T[0])).max())
            log(f"  check   max|aba_mbjax - aba_pinocchio| = {err:.2e} at one state")
            record(name, model, "aba single (model arg)", lambda: f(model, q0, v0, t0_).block_until_ready(), pin_aba)
            # the same with mbjax.jit's options (XLA:CPU's memory-optimised scheduler, mbjax.compilation)
            f, _ = compile_jit(lambda m, q, v, t: mbjax.aba(m, q, v, t), model, q0, v0, t0_, name="aba (mbjax.jit)",
                               robot=name, jit=MBJAX_JIT)
            record(name, model, "aba single (model arg, mbjax.jit)", lambda: f(model, q0, v0, t0_).block_until_ready(),
                   pin_aba)
            # the public call from Python, as the README shows it
            record(name, model, "aba single (public call)",
                   lambda: mbjax.aba(model, q0, v0, t0_).block_until_ready(), pin_aba)
            # the floor under any jitted call: dispatch of a function that returns its input
            f, _ = compile_jit(lambda m, q, v, t: t, model, q0, v0, t0_, name="identity", robot=name)
            record(name, model, "jit floor: identity (model arg)", lambda: f(model, q0, v0, t0_).block_until_ready(),
                   None, note="dispatch floor: a jitted function returning tau, same arguments as aba")
            f, _ = compile_jit(lambda q, v, t: t, q0, v0, t0_, name="identity (no model)", robot=name)
            record(name, model, "jit floor: identity (no model)", lambda: f(q0, v0, t0_).block_until_ready(),
                   None, note="dispatch floor: a jitted function of (q, qd, tau) returning tau")
        if "aba_closed" in args.quantities:
            f, _ = compile_jit(lambda q, v, t: mbjax.aba(model, q, v, t), q0, v0, t0_, name="aba (closed)", robot=name)
            record(name, model, "aba single (model closed)", lambda: f(q0, v0, t0_).block_until_ready(), pin_aba)
            # the same compiled as mbjax's one-state entry points are (mbjax.fused with the loop flag)
            f = mbjax.jit(lambda q, v, t: mbjax.aba(model, q, v, t), one_state=True)  # no .trace: not timed
            f(q0, v0, t0_).block_until_ready()
            record(name, model, "aba single (model closed, mbjax.jit one_state)",
                   lambda: f(q0, v0, t0_).block_until_ready(), pin_aba)
        if "aba" in args.quantities:
            for B in args.batch:
                xs = (model, Qj[:B], Vj[:B], Tj[:B])
                fb = jax.vmap(mbjax.aba, in_axes=(None, 0, 0, 0))
                f, c = compile_jit(fb, *xs, name="aba vmap", robot=name, batch=B)
                memory.append(memory_record(c, name, "aba vmap", B, resource))
                if B == max(args.batch):
                    hlo.append({"robot": name, "function": f"aba vmap B={B}", "tree_levels": levels, **hlo_stats(c)})
                record(name, model, f"aba vmap B={B} (per state)", lambda: f(*xs).block_until_ready(), pin_aba, B)
            # the same compiled with mbjax.jit's options (YNNPACK for dots only, mbjax.compilation)
            B = max(args.batch)
            xs = (model, Qj[:B], Vj[:B], Tj[:B])
            f, _ = compile_jit(jax.vmap(mbjax.aba, in_axes=(None, 0, 0, 0)), *xs, name="aba vmap (mbjax.jit)", robot=name,
                               batch=B, jit=MBJAX_JIT)
            record(name, model, f"aba vmap B={B} (mbjax.jit, per state)", lambda: f(*xs).block_until_ready(),
                   pin_aba, B)
        if "aba_closed" in args.quantities and not args.quick:
            B = max(args.batch)
            fb = jax.vmap(lambda q, v, t: mbjax.aba(model, q, v, t))
            f, _ = compile_jit(fb, Qj[:B], Vj[:B], Tj[:B], name="aba vmap (closed)", robot=name, batch=B)
            record(name, model, f"aba vmap B={B} (closed, per state)",
                   lambda: f(Qj[:B], Vj[:B], Tj[:B]).block_until_ready(), pin_aba, B)

        # ---------------------------------------------------------------- RNEA, CRBA
        B = max(args.batch)
        if "rnea" in args.quantities:
            pin_rnea = pin_loop(pin.rnea, pin_states_a)
            f, _ = compile_jit(lambda m, q, v, a: mbjax.rnea(m, q, v, a), model, q0, v0, a0, name="rnea", robot=name)
            record(name, model, "rnea single (model arg)", lambda: f(model, q0, v0, a0).block_until_ready(), pin_rnea)
            record(name, model, "rnea single (public call)",
                   lambda: mbjax.rnea(model, q0, v0, a0).block_until_ready(), pin_rnea)
            xs = (model, Qj[:B], Vj[:B], Aj[:B])
            f, c = compile_jit(jax.vmap(mbjax.rnea, in_axes=(None, 0, 0, 0)), *xs, name="rnea vmap", robot=name, batch=B)
            memory.append(memory_record(c, name, "rnea vmap", B, resource))
            record(name, model, f"rnea vmap B={B} (per state)", lambda: f(*xs).block_until_ready(), pin_rnea, B)
            f, _ = compile_jit(jax.vmap(mbjax.rnea, in_axes=(None, 0, 0, 0)), *xs, name="rnea vmap (mbjax.jit)",
                               robot=name, batch=B, jit=MBJAX_JIT)
            record(name, model, f"rnea vmap B={B} (mbjax.jit, per state)", lambda: f(*xs).block_until_ready(),
                   pin_rnea, B)
        if "crba" in args.quantities:
            pin_crba = pin_loop(pin.crba, pin_states_q)
            f, _ = compile_jit(lambda m, q: mbjax.crba(m, q), model, q0, name="crba", robot=name)
            record(name, model, "crba single (model arg)", lambda: f(model, q0).block_until_ready(), pin_crba,
                   note="pinocchio.crba fills the upper triangle only")
            xs = (model, Qj[:B])
            f, c = compile_jit(jax.vmap(mbjax.crba, in_axes=(None, 0)), *xs, name="crba vmap", robot=name, batch=B)
            memory.append(memory_record(c, name, "crba vmap", B, resource))
            record(name, model, f"crba vmap B={B} (per state)", lambda: f(*xs).block_until_ready(), pin_crba, B,
                   note="pinocchio.crba fills the upper triangle only")
            f, _ = compile_jit(jax.vmap(mbjax.crba, in_axes=(None, 0)), *xs, name="crba vmap (mbjax.jit)", robot=name,
                               batch=B, jit=MBJAX_JIT)
            record(name, model, f"crba vmap B={B} (mbjax.jit, per state)", lambda: f(*xs).block_until_ready(),
                   pin_crba, B, note="pinocchio.crba fills the upper triangle only")

        # ---------------------------------------------------------------- ABA Jacobian
        if "jac" in args.quantities:
            def aba_jac(m, q, v, t):
                """d qdd / d(q tangent, qd, tau): three (nv, nv) blocks, by forward mode."""
                def f(dq, v, t):
                    return mbjax.aba(m, mbjax.integrate(m, q, dq), v, t)
                return jax.jacfwd(f, argnums=(0, 1, 2))(jnp.zeros(m.nv, v.dtype), v, t)

            pin_jac = pin_loop(pin.computeABADerivatives, pin_states)
            f, _ = compile_jit(aba_jac, model, q0, v0, t0_, name="aba jacfwd", robot=name)
            record(name, model, "aba jacfwd single (model arg)", lambda: jax.block_until_ready(f(model, q0, v0, t0_)),
                   pin_jac, note="vs pinocchio.computeABADerivatives")
            f, _ = compile_jit(mbjax.aba_derivatives, model, q0, v0, t0_, name="aba_derivatives", robot=name)
            record(name, model, "aba_derivatives single (model arg)",
                   lambda: jax.block_until_ready(f(model, q0, v0, t0_)), pin_jac,
                   note="vs pinocchio.computeABADerivatives")
            # the public call from Python (compiled with mbjax's options: a plain jax.jit of a
            # function of the model runs it on XLA's thread pool, mbjax.compilation)
            record(name, model, "aba_derivatives single (public call)",
                   lambda: jax.block_until_ready(mbjax.aba_derivatives(model, q0, v0, t0_)), pin_jac,
                   note="vs pinocchio.computeABADerivatives")
            pin_rnea_jac = pin_loop(pin.computeRNEADerivatives, pin_states)
            f, _ = compile_jit(mbjax.rnea_derivatives, model, q0, v0, t0_, name="rnea_derivatives", robot=name)
            record(name, model, "rnea_derivatives single (model arg)",
                   lambda: jax.block_until_ready(f(model, q0, v0, t0_)), pin_rnea_jac,
                   note="vs pinocchio.computeRNEADerivatives")
            record(name, model, "rnea_derivatives single (public call)",
                   lambda: jax.block_until_ready(mbjax.rnea_derivatives(model, q0, v0, t0_)), pin_rnea_jac,
                   note="vs pinocchio.computeRNEADerivatives")
        if "jac" in args.quantities and not args.quick:  # batched Jacobians: 3-15 s of compilation each
            Bj = args.jac_batch
            xs = (model, Qj[:Bj], Vj[:Bj], Tj[:Bj])
            f, c = compile_jit(jax.vmap(aba_jac, in_axes=(None, 0, 0, 0)), *xs, name="aba jacfwd vmap", robot=name, batch=Bj)
            memory.append(memory_record(c, name, "aba jacfwd vmap", Bj, resource))
            record(name, model, f"aba jacfwd vmap B={Bj} (per state)", lambda: jax.block_until_ready(f(*xs)),
                   pin_jac, Bj, note="vs pinocchio.computeABADerivatives")
            f, c = compile_jit(jax.vmap(mbjax.aba_derivatives, in_axes=(None, 0, 0, 0)), *xs, name="aba_derivatives vmap",
                               robot=name, batch=Bj)
            memory.append(memory_record(c, name, "aba_derivatives vmap", Bj, resource))
            record(name, model, f"aba_derivatives vmap B={Bj} (per state)", lambda: jax.block_until_ready(f(*xs)),
                   pin_jac, Bj, note="vs pinocchio.computeABADerivatives")
            f, c = compile_jit(jax.vmap(mbjax.rnea_derivatives, in_axes=(None, 0, 0, 0)), *xs,
                               name="rnea_derivatives vmap", robot=name, batch=Bj)
            memory.append(memory_record(c, name, "rnea_derivatives vmap", Bj, resource))
            record(name, model, f"rnea_derivatives vmap B={Bj} (per state)", lambda: jax.block_until_ready(f(*xs)),
                   pin_rnea_jac, Bj, note="vs pinocchio.computeRNEADerivatives")

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        log(f"  memory  peak RSS of the process so far: {rss:.0f} MiB")
        memory.append({"robot": name, "function": "process", "peak_rss_mib": rss})
        jax.clear_caches()

    meta["loadavg_end"] = os.getloadavg()
    meta["wall_s"] = time.perf_counter() - T_START
    print_tables(args, timings, compiles, memory, hlo)
    if not args.no_save:
        out = results_path(args, args.dtype, args.xla_threads, args.xla_ynn, args.xla_loops)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"meta": meta, "timings": timings, "compile": compiles, "memory": memory, "hlo": hlo},
                                  indent=1, default=_json_default))
        log(f"\nwrote {out}")
    return 0


def _json_default(x):
    try:
        return x.item()
    except AttributeError:
        return str(x)


def memory_record(compiled, robot, function, batch, resource):
    rec = {"robot": robot, "function": function, "batch": batch,
           "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    try:
        ma = compiled.memory_analysis()
        for k in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes", "alias_size_in_bytes",
                  "generated_code_size_in_bytes"):
            rec[k] = int(getattr(ma, k))
    except Exception as e:  # noqa: BLE001 - not every backend has it
        rec["memory_analysis"] = f"unavailable: {e}"
    return rec


def hlo_stats(compiled):
    """Op counts of the optimized HLO, as XLA:CPU runs it.

    On XLA:CPU every non-trivial instruction of the entry computation, of while-loop bodies
    and of conditional branches (fusion, dot, custom-call, copy, scatter, ...) is one kernel
    launch ("thunk"); their number, not the arithmetic, bounds small-model latency.
    ``kernels``: such instructions in the program text (each loop body counted once);
    ``launches``: the same weighted by the loops' known trip counts (cheapest branch of each
    conditional), i.e. kernels executed per call; ``ops``: opcodes over those computations.
    """
    import re

    text = compiled.as_text()
    comps, entry, cur = {}, None, None
    header = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
    for line in text.splitlines():
        m = header.match(line)
        if m:
            cur = comps.setdefault(m.group(2), [])
            if m.group(1):
                entry = m.group(2)
            continue
        if line.startswith("}"):
            cur = None
        elif cur is not None and "=" in line:
            cur.append(line)
    op_re = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][a-z0-9\-]*)\(")
    trivial = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast"}
    ops, seen, trips = {}, set(), []

    def ref(line, key):
        m = re.search(key + r"=%?([\w.\-]+)", line)
        return m.group(1) if m else None

    def walk(name, count_static):
        """Kernel launches of one run of computation ``name``."""
        launches = 0
        first = name not in seen
        seen.add(name)
        for line in comps.get(name, ()):
            m = op_re.match(line)
            if not m:
                continue
            op = m.group(1)
            if first and count_static:
                ops[op] = ops.get(op, 0) + 1
            if op in trivial:
                continue
            launches += 1
            if op == "while":
                n = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
                n = int(n.group(1)) if n else 1
                trips.append(n)
                launches += n * walk(ref(line, "body"), count_static) + (n + 1) * walk(ref(line, "condition"), count_static)
            elif op == "conditional":
                br = re.search(r"branch_computations=\{([^}]*)\}", line)
                names = [b.strip().lstrip("%") for b in br.group(1).split(",")] if br else []
                names += [x for x in (ref(line, "true_computation"), ref(line, "false_computation")) if x]
                launches += min((walk(b, count_static) for b in names), default=0)
            elif op == "call":
                launches += walk(ref(line, "to_apply"), count_static)
        return launches

    launches = walk(entry, True)
    return {"kernels": sum(n for k, n in ops.items() if k not in trivial), "launches": launches,
            "while_trip_counts": trips, "fusions": ops.get("fusion", 0), "custom_calls": ops.get("custom-call", 0),
            "ops": dict(sorted(ops.items(), key=lambda kv: -kv[1]))}


def metadata(args, jax, np, pin, mbjax):
    import jaxlib

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        root = Path(mbjax.__file__).resolve().parent.parent
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "mbjax"],
                                    capture_output=True, text=True).stdout.strip())
    except OSError:
        commit, dirty = None, None
    import hashlib

    src = hashlib.sha256()
    for f in sorted(Path(mbjax.__file__).resolve().parent.rglob("*.py")):
        src.update(f.read_bytes())
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": args.host, "cpu": cpu, "cpu_count": os.cpu_count(),
            "platform": platform.platform(), "python": platform.python_version(), "jax": jax.__version__,
            "jaxlib": jaxlib.__version__, "numpy": np.__version__, "pinocchio": pin.__version__,
            "mbjax": mbjax.__version__, "mbjax_commit": commit, "mbjax_dirty": dirty,
            "mbjax_source_sha256": src.hexdigest()[:16], "mbjax_path": str(Path(mbjax.__file__).resolve().parent), "dtype": args.dtype,
            "xla_threads": args.xla_threads, "xla_ynn": args.xla_ynn, "xla_loops": args.xla_loops,
            "xla_scheduler": args.xla_scheduler, "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "malloc": {n: v for n, v in os.environ.items() if n.startswith("MALLOC_")},
            "threads_env": {n: os.environ.get(n) for n in blas_env("one")},
            "jax_backend": jax.default_backend(), "args": {k: v for k, v in vars(args).items()},
            "loadavg_start": os.getloadavg(),
            "notes": ["times are per call (single) or per state (vmap rows: batched call time / B)",
                      "pinocchio is always float64 (its Python bindings are double only), one binding call "
                      "per state in a Python loop",
                      "ratio = mbjax / pinocchio (> 1: mbjax slower), median wall times; ratio_min: the same with "
                      "the fastest repeat of each; ratio_cpu: median process CPU time (time.process_time) of each, "
                      "robust to other load on the machine as long as XLA runs single-threaded"]}


def print_tables(args, timings, compiles, memory, hlo):
    print(f"\n== mbjax vs Pinocchio, dtype={args.dtype}, XLA threads={args.xla_threads}, YNN fusions={args.xla_ynn}, "
          f"loops={args.xla_loops} "
          f"(times per call, or per state for vmap rows; ratio = mbjax / pinocchio of median wall times, ratio(min) of "
          f"fastest repeats, ratio(cpu) of median process CPU times) ==")
    print(f"{'robot':<14} {'dtype':<8} {'quantity':<36} {'mbjax':>12} {'pinocchio':>12} {'ratio':>9} {'ratio(min)':>11} "
          f"{'ratio(cpu)':>11}")
    for r in timings:
        ratios = (f"{r['ratio']:8.2f}x {r['ratio_min']:10.2f}x {r['ratio_cpu']:10.2f}x" if r["ratio"]
                  else f"{'-':>9} {'-':>11} {'-':>11}")
        print(f"{r['robot']:<14} {r['dtype']:<8} {r['quantity']:<36} {fmt_t(r['mbjax_s'])} {fmt_t(r['pinocchio_s'])} {ratios}")
    print("\n== compile (jax.jit(f).trace / .lower / .compile; first call = cold total) ==")
    print(f"{'robot':<14} {'function':<22} {'B':>5} {'trace':>8} {'lower':>8} {'compile':>8} {'total':>8}")
    for c in compiles:
        print(f"{c['robot']:<14} {c['function']:<22} {c['batch'] or '':>5} {c['trace_s']:7.2f}s {c['lower_s']:7.2f}s "
              f"{c['compile_s']:7.2f}s {c['total_s']:7.2f}s")
    mem = [m for m in memory if "temp_size_in_bytes" in m]
    if mem:
        print("\n== XLA memory analysis of the compiled batched functions (MiB) ==")
        print(f"{'robot':<14} {'function':<18} {'B':>5} {'arguments':>10} {'outputs':>9} {'temporaries':>12} {'peak RSS':>9}")
        for m in mem:
            print(f"{m['robot']:<14} {m['function']:<18} {m['batch']:>5} {m['argument_size_in_bytes'] / 2**20:10.2f} "
                  f"{m['output_size_in_bytes'] / 2**20:9.2f} {m['temp_size_in_bytes'] / 2**20:12.2f} {m['peak_rss_mib']:9.0f}")
    if hlo:
        print("\n== optimized HLO of aba: kernels in the program, kernel launches per call (loops unrolled by trip count) ==")
        print(f"{'robot':<14} {'function':<18} {'levels':>6} {'kernels':>8} {'launches':>9} {'loops':>10}  top ops")
        for h in hlo:
            top = ", ".join(f"{k} {n}" for k, n in list(h["ops"].items())[:6])
            loops = ",".join(map(str, h["while_trip_counts"])) or "-"
            print(f"{h['robot']:<14} {h['function']:<18} {h['tree_levels']:>6} {h['kernels']:>8} {h['launches']:>9} "
                  f"{loops:>10}  {top}")


T_START = time.perf_counter()

if __name__ == "__main__":
    sys.exit(main())
