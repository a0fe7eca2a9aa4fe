#!/usr/bin/env python
"""Cost of forward dynamics against the number of bodies: Mufti's maximal-coordinate methods
(kkt, sparse_kkt, schur, barycentric) and the joint-space ones (aba, crba).

Trees of n = 8 ... 256 bodies with pin (revolute) joints, shaped as a chain and as a balanced
binary tree; single-call latency of ``jax.jit(forward_dynamics)`` (model as an argument), float64, as the
minimum over rounds that call every method once in turn (all methods see the same load).
The scaling exponent p of each method is the least-squares slope of log t against log n over
n >= 32 (small trees are dominated by the fixed cost of a call).

Usage (from the repository root)::

    python benchmarks/bench_formulations.py            # full run, several minutes
    python benchmarks/bench_formulations.py --quick    # n = 8, 16, 32; smoke test

Runs single-threaded: ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false`` and one BLAS thread
(set here before jax is imported). Writes ``benchmarks/results/<host>_formulations.json``.
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

SINGLE_THREAD_FLAG = "--xla_cpu_multi_thread_eigen=false"
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_FLAG).strip()
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import mbjax  # noqa: E402

HERE = Path(__file__).resolve().parent
METHODS = ("aba", "crba", "sparse_kkt", "kkt", "schur", "barycentric")
SHAPES = ("chain", "binary")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="n = 8, 16, 32 and short timings")
    p.add_argument("--sizes", type=int, nargs="+", help="numbers of bodies (default 8 16 32 64 128 256)")
    p.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    p.add_argument("--max-time", type=float, default=None, help="seconds of repeats per method and size (default 1)")
    p.add_argument("--rounds", type=int, default=None, help="at most this many interleaved rounds (default 300)")
    p.add_argument("--out-dir", default=str(HERE / "results"))
    p.add_argument("--no-save", action="store_true")
    a = p.parse_args(argv)
    a.sizes = a.sizes or ([8, 16, 32] if a.quick else [8, 16, 32, 64, 128, 256])
    a.max_time = a.max_time or (0.3 if a.quick else 1.0)
    a.rounds = a.rounds or (50 if a.quick else 300)
    return a


def tree(shape: str, n: int) -> mbjax.Model:
    """n bodies joined by pin joints: a chain, or a balanced binary tree (parent of k: (k-1)//2)."""
    rng = np.random.default_rng(n)
    b = mbjax.ModelBuilder(f"{shape}{n}")
    for k in range(n):
        parent = None if k == 0 else f"b{k - 1 if shape == 'chain' else (k - 1) // 2}"
        axis = rng.normal(size=3)
        d = rng.uniform(0.01, 0.03, 3)  # principal moments (d2 + d3, d1 + d3, d1 + d2): physical
        b.add_body(f"b{k}", parent=parent, joint="revolute", axis=axis / np.linalg.norm(axis),
                   translation=rng.uniform(-0.3, 0.3, 3), mass=rng.uniform(0.5, 2.0),
                   com=rng.uniform(-0.1, 0.1, 3), inertia=np.diag([d[1] + d[2], d[0] + d[2], d[0] + d[1]]))
    return b.build()


def bench_interleaved(fns, max_time, max_rounds):
    """Min and median per function over rounds that call every function once in turn.

    Interleaving exposes all methods to the same load (this machine is shared), and the
    minimum is the run least disturbed by it. Rounds continue until ``max_time`` seconds per
    function have passed or ``max_rounds`` rounds (at least 3).
    """
    times = {k: [] for k in fns}
    start = time.perf_counter()
    for r in range(max_rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
        if r >= 2 and time.perf_counter() - start > max_time * len(fns):
            break
    return {k: (float(np.median(t)), min(t), len(t)) for k, t in times.items()}


def exponent(ns, ts, n_min=32):
    """Least-squares slope of log t against log n over n >= n_min (all n if fewer than 2)."""
    pts = [(n, t) for n, t in zip(ns, ts) if n >= n_min]
    if len(pts) < 2:
        pts = list(zip(ns, ts))
    if len(pts) < 2:  # one size: no slope
        return float("nan")
    x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(x, y, 1)[0])


def main(argv=None):
    args = parse_args(argv)
    try:
        from tqdm import tqdm
    except ImportError:  # progress bar is optional
        tqdm = None
    fd = jax.jit(mbjax.forward_dynamics, static_argnames="method")
    print(f"mbjax {mbjax.__version__}, jax {jax.__version__}, float64, XLA_FLAGS={os.environ['XLA_FLAGS']!r}, "
          f"one BLAS thread, {platform.processor() or platform.machine()} x{os.cpu_count()}", flush=True)
    jobs = [(s, n) for s in SHAPES for n in args.sizes]
    bar = tqdm(jobs, desc="timing") if tqdm else jobs
    rows = []
    models = {}
    for shape, n in bar:
        model = tree(shape, n)
        rng = np.random.default_rng(0)
        q = mbjax.random_configuration(model, jax.random.PRNGKey(n))
        models[shape, n] = (model, q, jnp.asarray(rng.normal(size=n)), jnp.asarray(rng.normal(size=n)))
        model, q, qd, tau = models[shape, n]
        fns, first = {}, {}
        for method in args.methods:
            t0 = time.perf_counter()
            fd(model, q, qd, tau, method=method).block_until_ready()
            first[method] = time.perf_counter() - t0
            fns[method] = lambda method=method: fd(model, q, qd, tau, method=method).block_until_ready()
        for method, (med, best, rounds) in bench_interleaved(fns, args.max_time, args.rounds).items():
            rows.append(dict(shape=shape, n=n, method=method, median_s=med, min_s=best, rounds=rounds,
                             first_call_s=first[method]))
            if tqdm is None:  # progress without tqdm
                print(f"{shape:6s} n={n:<4d} {method:12s} {best * 1e6:10.1f} us  (median {med * 1e6:.1f} us, "
                      f"{rounds} rounds; first call {first[method]:.1f} s)", flush=True)
    # accuracy check on the way: every method agrees with aba
    for (shape, n), (model, q, qd, tau) in models.items():
        ref = fd(model, q, qd, tau, method="aba")
        for m in args.methods:
            err = float(jnp.max(jnp.abs(fd(model, q, qd, tau, method=m) - ref)) / jnp.max(jnp.abs(ref)))
            assert err < 1e-8, f"{m} on {shape}{n}: relative error {err:.1e} against aba"

    fits = {}
    print(f"\n{'shape':7s} {'method':12s} " + " ".join(f"{'n=' + str(n):>10s}" for n in args.sizes) + "   exponent")
    for shape in SHAPES:
        for m in args.methods:
            ts = [r["min_s"] for r in rows if r["shape"] == shape and r["method"] == m]
            fits[f"{shape}/{m}"] = p = exponent(args.sizes, ts)
            print(f"{shape:7s} {m:12s} " + " ".join(f"{t * 1e6:9.0f}u" for t in ts) + f"   {p:6.2f}")
    ratio = {}
    if 64 in args.sizes and {"aba", "sparse_kkt"} <= set(args.methods):
        for shape in SHAPES:
            t = {r["method"]: r["min_s"] for r in rows if r["shape"] == shape and r["n"] == 64}
            ratio[shape] = t["sparse_kkt"] / t["aba"]
            print(f"{shape}: sparse_kkt / aba at n = 64: {ratio[shape]:.2f}")
    print("times: min over interleaved rounds of one jitted call (us); exponent: slope of log t vs log n for n >= 32")
    print("first call (trace + compile + run, s): " + ", ".join(
        f"{r['shape']}{r['n']}/{r['method']} {r['first_call_s']:.1f}" for r in rows if r["n"] == 64 or len(args.sizes) == 1))
    if not args.no_save:
        host = "".join(c if c.isalnum() or c in "-_" else "-" for c in (socket.gethostname() or "local"))
        out = Path(args.out_dir) / f"{host}_formulations{'_quick' if args.quick else ''}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        meta = dict(timing="min over interleaved rounds", jax=jax.__version__, mbjax=mbjax.__version__, python=sys.version.split()[0],
                    xla_flags=os.environ["XLA_FLAGS"], cpu_count=os.cpu_count(), loadavg=os.getloadavg(),
                    dtype="float64", joint="revolute", sizes=args.sizes, date=time.strftime("%Y-%m-%d %H:%M:%S"))
        out.write_text(json.dumps(dict(meta=meta, timings=rows, exponents=fits, sparse_kkt_over_aba_n64=ratio), indent=1))
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
