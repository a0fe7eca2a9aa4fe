#!/usr/bin/env python
"""The shooting examples with each inner solver: Levenberg–Marquardt against FDDP, in one run.

Runs ``examples/panda_point_to_point.py`` and ``examples/free_floating_reorientation.py`` (their
full problems, float64) with ``--solver lm`` and ``--solver fddp``, each as a fresh process, so
that every solve is a first call (tracing and compilation included, as a user meets it); the
solvers alternate within each repeat. Each run's own ``summary.json`` gives the solve's wall
time, cost, iteration counts and its independent re-simulation's error at the horizon. The
table reports the minimum and median time over the repeats.

XLA's flags must be set before jax starts: ``--xla-threads single`` (default) runs the examples
with ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false``. Results go to
``benchmarks/results/<host>_shooting_<threads>.json``.

    python benchmarks/bench_shooting.py [--repeats 2] [--examples panda_point_to_point ...]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = {"panda_point_to_point": ("position_error", "velocity_error"),
            "free_floating_reorientation": ("attitude_error", "velocity_error")}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", nargs="+", choices=list(EXAMPLES), default=list(EXAMPLES))
    p.add_argument("--solvers", nargs="+", choices=["lm", "fddp"], default=["lm", "fddp"])
    p.add_argument("--repeats", type=int, default=2, help="runs of each example and solver, alternating")
    p.add_argument("--xla-threads", choices=["single", "default"], default="single")
    p.add_argument("--host", default=socket.gethostname())
    p.add_argument("--out", type=Path, default=None, help="JSON file (default: benchmarks/results/...)")
    return p.parse_args()


def run(example: str, solver: str, threads: str) -> dict:
    """One run of an example as a fresh process; its summary.json."""
    env = dict(os.environ)
    if threads == "single":
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run([sys.executable, str(HERE.parent / "examples" / f"{example}.py"), "--solver", solver,
                               "--out", out], env=env, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"{example} --solver {solver} failed:\n{done.stderr[-3000:]}")
        return json.loads((Path(out) / "summary.json").read_text(encoding="utf-8"))


def main():
    args = parse_args()
    runs = {(e, s): [] for e in args.examples for s in args.solvers}
    for r in range(args.repeats):
        for example in args.examples:
            for solver in args.solvers:
                summary = run(example, solver, args.xla_threads)
                runs[example, solver].append(summary)
                print(f"repeat {r + 1}/{args.repeats} {example} --solver {solver}: {summary['solve_seconds']:.1f} s, "
                      f"cost {summary['cost']:.6g}, {summary['iterations']} iterations", flush=True)
    rows = []
    for (example, solver), summaries in runs.items():
        seconds = [s["solve_seconds"] for s in summaries]
        last = summaries[-1]
        rows.append({"example": example, "solver": solver, "seconds": seconds, "min_s": min(seconds),
                     "median_s": statistics.median(seconds), "cost": last["cost"], "iterations": last["iterations"],
                     "outer_iterations": last["outer_iterations"], "converged": last["converged"],
                     "final_error": max(last[k] for k in EXAMPLES[example])})
    print("\n| example | solver | first call: min / median (s) | cost | iterations (outer) | re-simulated error |")
    print("|---|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['example']} | {row['solver']} | {row['min_s']:.1f} / {row['median_s']:.1f} | {row['cost']:.6g} | "
              f"{row['iterations']} ({row['outer_iterations']}) | {row['final_error']:.1e} |")
    out = args.out or HERE / "results" / f"{args.host}_shooting_{args.xla_threads}.json"
    out.write_text(json.dumps({"host": args.host, "xla_threads": args.xla_threads, "repeats": args.repeats,
                               "rows": rows}, indent=1), encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
