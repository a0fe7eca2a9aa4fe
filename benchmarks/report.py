#!/usr/bin/env python
"""Markdown tables from the JSON files written by ``bench_dynamics.py``.

    python benchmarks/report.py benchmarks/results/HOST_float64_single.json [more.json ...] [--plot out.png]

Prints, per file, the timing table (mbjax vs Pinocchio), the compile-time table and the XLA
memory analysis, ready to paste into ``benchmarks/README.md``. With two or more files it also
prints the ratio of every shared measurement to the first file's (e.g. threading or YNN).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def t(x):
    if x is None:
        return "-"
    if x < 1e-3:
        return f"{x * 1e6:.1f} µs"
    if x < 1:
        return f"{x * 1e3:.2f} ms"
    return f"{x:.2f} s"


def label(meta):
    return (f"{meta['dtype']}, XLA threads={meta['xla_threads']}, YNN fusions={meta.get('xla_ynn', 'default')}, "
            f"loops={meta.get('xla_loops', 'default')}")


def timing_table(run):
    out = [f"**{label(run['meta'])}** (load average at start/end: "
           f"{run['meta']['loadavg_start'][0]:.1f} / {run['meta'].get('loadavg_end', ['?'])[0]:.1f})", "",
           "| robot | quantity | mbjax | Pinocchio | ratio | ratio (min) | ratio (CPU time) |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for r in run["timings"]:
        ratios = f"{r['ratio']:.1f} | {r['ratio_min']:.1f} | {r['ratio_cpu']:.1f}" if r.get("ratio") else "- | - | -"
        out.append(f"| {r['robot']} | {r['quantity']} | {t(r['mbjax_s'])} | {t(r['pinocchio_s'])} | {ratios} |")
    return "\n".join(out)


def compile_table(run):
    out = ["| robot | function | B | trace | lower | compile | first call (total) |", "|---|---|---:|---:|---:|---:|---:|"]
    for c in run["compile"]:
        out.append(f"| {c['robot']} | {c['function']} | {c['batch'] or ''} | {c['trace_s']:.2f} s | {c['lower_s']:.2f} s | "
                   f"{c['compile_s']:.2f} s | {c['total_s']:.2f} s |")
    return "\n".join(out)


def memory_table(run):
    out = ["| robot | function | B | arguments | outputs | temporaries | peak RSS so far |", "|---|---|---:|---:|---:|---:|---:|"]
    for m in run["memory"]:
        if "temp_size_in_bytes" in m:
            out.append(f"| {m['robot']} | {m['function']} | {m['batch']} | {m['argument_size_in_bytes'] / 2**20:.2f} MiB | "
                       f"{m['output_size_in_bytes'] / 2**20:.2f} MiB | {m['temp_size_in_bytes'] / 2**20:.1f} MiB | "
                       f"{m['peak_rss_mib']:.0f} MiB |")
    return "\n".join(out)


def hlo_table(run):
    out = ["| robot | function | tree levels | kernels in program | kernel launches per call | loop trip counts |",
           "|---|---|---:|---:|---:|---|"]
    for h in run.get("hlo", []):
        loops = ", ".join(map(str, h.get("while_trip_counts", []))) or "-"
        out.append(f"| {h['robot']} | {h['function']} | {h['tree_levels']} | {h['kernels']} | {h.get('launches', '-')} | {loops} |")
    return "\n".join(out)


def compare_table(base, other):
    ref = {(r["robot"], r["quantity"]): r for r in base["timings"]}
    out = [f"time with *{label(other['meta'])}* / time with *{label(base['meta'])}*", "",
           "| robot | quantity | base | other | other / base | other / base (min) |", "|---|---|---:|---:|---:|---:|"]
    for r in other["timings"]:
        s = ref.get((r["robot"], r["quantity"]))
        if s:
            out.append(f"| {r['robot']} | {r['quantity']} | {t(s['mbjax_s'])} | {t(r['mbjax_s'])} | "
                       f"{r['mbjax_s'] / s['mbjax_s']:.2f} | {r['mbjax_min_s'] / s['mbjax_min_s']:.2f} |")
    return "\n".join(out)


def plot(run, path):
    """Time per state against B for each batched quantity, one panel per robot, with
    Pinocchio's time per call as a dashed line of the same colour."""
    import re

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    robots = list(dict.fromkeys(r["robot"] for r in run["timings"]))
    fig, axes = plt.subplots(1, len(robots), figsize=(4 * len(robots), 3.6), squeeze=False)
    for ax, robot in zip(axes[0], robots):
        series = {}
        for r in run["timings"]:
            m = re.match(r"(\w+) vmap B=(\d+) \(per state\)", r["quantity"])
            if r["robot"] == robot and m:
                series.setdefault(m.group(1), []).append((int(m.group(2)), r["mbjax_s"], r["pinocchio_s"]))
        for k, (name, pts) in enumerate(sorted(series.items())):
            pts.sort()
            color = f"C{k}"
            ax.plot([p[0] for p in pts], [p[1] * 1e6 for p in pts], "o-", color=color, label=f"mbjax {name}")
            ax.axhline(pts[0][2] * 1e6, color=color, ls="--", lw=1, label=f"Pinocchio {name}")
        ax.set(xscale="log", yscale="log", xlabel="batch size B", ylabel="µs per state", title=robot)
        batches = sorted({p[0] for pts in series.values() for p in pts})
        ax.set_xticks(batches, [str(b) for b in batches])
        ax.minorticks_off()
        ax.legend(fontsize=7)
    fig.suptitle(label(run["meta"]), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main(argv):
    out = None
    if "--plot" in argv:
        i = argv.index("--plot")
        out, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    runs = [json.loads(Path(p).read_text()) for p in argv]
    if out:
        plot(runs[0], out)
    for run in runs:
        print(timing_table(run), "\n")
        print(compile_table(run), "\n")
        print(memory_table(run), "\n")
        print(hlo_table(run), "\n")
    for other in runs[1:]:
        print(compare_table(runs[0], other), "\n")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
