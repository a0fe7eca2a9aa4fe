#!/usr/bin/env python
"""mbjax vs adam (adam-robotics, JAX back end) vs Pinocchio: batched forward dynamics on CPU.

adam's ``KinDynComputations.aba`` is the other JAX implementation of the articulated-body
algorithm a robotics engineer finds on PyPI. For each floating-base robot of
``example-robot-data`` (``solo12``, ``talos_reduced``; adam's ``aba`` always treats the root as a
free-floating base, so the fixed-base arms would be a different problem), B random states are
evaluated by

- mbjax: ``jax.vmap(mbjax.aba)`` with the model loaded in Pinocchio's joint order, compiled
  with mbjax's XLA options (what ``mbjax.jit`` sets);
- adam: ``jax.vmap`` of ``aba(H, s, v_base, s_dot, tau)`` with the base pose as a homogeneous
  matrix and its velocity in adam's default "mixed" representation (linear velocity of the base
  origin and angular velocity, both in world axes: ``R v`` and ``R w`` for mbjax's body-frame
  base velocity ``(v, w)``), compiled with a plain ``jax.jit`` as a user would;
- Pinocchio: ``pin.aba`` called from Python on the same states, one after another.

The joint accelerations of mbjax and adam are compared on every state (the base accelerations
are in different representations), mbjax's and Pinocchio's on one (relative errors); the timings are interleaved, each repeat timing mbjax,
adam, then 256 Pinocchio calls, and reported per state (median and best repeat) with their
ratios to Pinocchio.

**Its own environment.** adam-robotics 0.5 pins ``jax<=0.6`` and, on jax 0.10, fails under
``jax.vmap`` (it passes a traced array's sharding where jax expects a device), so this script
runs in a virtual environment of its own:

    python -m venv .venv-adam && . .venv-adam/bin/activate
    pip install -e ".[test]" "jax==0.6.0" "jaxlib==0.6.0"
    pip install --no-deps adam-robotics && pip install casadi prettytable urdfdom-py array-api-compat lxml
    python benchmarks/bench_adam.py [--robots solo12 talos_reduced] [--batch 1024 4096] [--json out.json]

adam's URDF reader needs an ``<origin>`` in every ``<inertial>``; where a URDF leaves it out
(solo12, talos_reduced), the script adds the URDF default, the identity, before handing the
text to adam. XLA runs single-threaded (``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false``, set
before jax is imported), float64.
"""

import argparse
import json
import os
import re
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402
from adam.jax import KinDynComputations  # noqa: E402

import mbjax  # noqa: E402
from mbjax.spatial import quat_to_rotation  # noqa: E402

ROBOTS = ("solo12", "talos_reduced")
PIN_STATES = 256  # states per timed round of Pinocchio's calls


def with_inertial_origins(urdf: str) -> str:
    """The URDF text with ``<origin xyz="0 0 0" rpy="0 0 0"/>`` (the URDF default) added to every
    ``<inertial>`` that has none, which adam's reader requires."""
    def fill(match):
        body = match.group(1)
        return match.group(0) if "<origin" in body else f'<inertial><origin xyz="0 0 0" rpy="0 0 0"/>{body}</inertial>'
    return re.sub(r"<inertial>(.*?)</inertial>", fill, urdf, flags=re.S)


def best_of(f, *xs, calls=3):
    """The shortest of ``calls`` timed calls of ``f(*xs)`` (blocking), in seconds."""
    best = np.inf
    for _ in range(calls):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*xs))
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--robots", nargs="+", choices=ROBOTS, default=list(ROBOTS))
    p.add_argument("--batch", type=int, nargs="+", default=[1024, 4096])
    p.add_argument("--repeats", type=int, default=7, help="interleaved rounds")
    p.add_argument("--json", help="write the results here")
    a = p.parse_args()
    rows = []
    print(f"jax {jax.__version__}, XLA_FLAGS={os.environ['XLA_FLAGS']}, float64, load average "
          f"{os.getloadavg()[0]:.1f}")
    for name in a.robots:
        path = mbjax.example_robot_path(name)
        model = mbjax.load_example_robot(name, joint_order="pinocchio")
        joints = [n for n, kind in zip(model.joint_names, model.joint_types) if kind != "free"]
        kd = KinDynComputations(with_inertial_origins(path.read_text()), joints,
                                gravity=jnp.concatenate([model.gravity, jnp.zeros(3)]))

        def adam_aba(q, qd, tau):
            R = quat_to_rotation(q[3:7])
            H = jnp.eye(4, dtype=q.dtype).at[:3, :3].set(R).at[:3, 3].set(q[:3])
            return kd.aba(H, q[7:], jnp.concatenate([R @ qd[:3], R @ qd[3:6]]), qd[6:], tau[6:])

        pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
        pdata = pm.createData()
        for B in a.batch:
            rng = np.random.default_rng(0)
            q = jax.vmap(lambda k: mbjax.random_configuration(model, k))(jax.random.split(jax.random.PRNGKey(0), B))
            qd = jnp.asarray(rng.normal(size=(B, model.nv)))
            tau = jnp.asarray(rng.normal(size=(B, model.nv))).at[:, :6].set(0.0)  # nothing acts on the base
            compile_s, fns = {}, {}
            for label, f, options in (("mbjax", lambda q, qd, t: mbjax.aba(model, q, qd, t),
                                       mbjax.compilation.CPU_OPTIONS), ("adam", adam_aba, {})):
                t0 = time.perf_counter()
                fns[label] = jax.jit(jax.vmap(f), compiler_options=options).lower(q, qd, tau).compile()
                compile_s[label] = time.perf_counter() - t0
            ours, theirs = np.asarray(fns["mbjax"](q, qd, tau))[:, 6:], np.asarray(fns["adam"](q, qd, tau))[:, 6:]
            err = float(np.abs(theirs - ours).max() / np.abs(ours).max())
            # writable NumPy arrays, one per state, as a user's loop would hold them
            qp = [np.array(x) for x in np.asarray(mbjax.to_pinocchio_configuration(model, q[:PIN_STATES]))]
            v, t = [np.array(x) for x in np.asarray(qd[:PIN_STATES])], [np.array(x) for x in np.asarray(tau[:PIN_STATES])]
            first = np.asarray(fns["mbjax"](q, qd, tau))[0]
            pin_err = float(np.abs(pin.aba(pm, pdata, qp[0], v[0], t[0]) - first).max() / np.abs(first).max())

            def pinocchio():
                for i in range(len(qp)):
                    pin.aba(pm, pdata, qp[i], v[i], t[i])

            times = {"mbjax": [], "adam": [], "pinocchio": []}
            for _ in range(a.repeats):
                for label, f in fns.items():
                    times[label].append(best_of(f, q, qd, tau) / B)
                times["pinocchio"].append(best_of(pinocchio) / len(qp))
            med = {k: float(np.median(x)) for k, x in times.items()}
            best = {k: float(np.min(x)) for k, x in times.items()}
            row = dict(robot=name, nv=model.nv, batch=B, **{f"{k}_s": med[k] for k in med},
                       **{f"{k}_min_s": best[k] for k in best},
                       mbjax_ratio=med["mbjax"] / med["pinocchio"], adam_ratio=med["adam"] / med["pinocchio"],
                       mbjax_ratio_min=best["mbjax"] / best["pinocchio"], adam_ratio_min=best["adam"] / best["pinocchio"],
                       compile_mbjax_s=compile_s["mbjax"], compile_adam_s=compile_s["adam"],
                       joint_qdd_rel_err=err, pinocchio_rel_err=pin_err)
            rows.append(row)
            print(f"{name:13s} nv {model.nv:2d} B {B:5d}: per state mbjax {med['mbjax'] * 1e6:6.2f} µs, adam "
                  f"{med['adam'] * 1e6:6.2f} µs, Pinocchio {med['pinocchio'] * 1e6:6.2f} µs; ratios to Pinocchio "
                  f"mbjax {row['mbjax_ratio']:.2f}x (best {row['mbjax_ratio_min']:.2f}x), adam {row['adam_ratio']:.2f}x "
                  f"(best {row['adam_ratio_min']:.2f}x); compile {compile_s['mbjax']:.1f} / {compile_s['adam']:.1f} s; "
                  f"joint accelerations agree to {err:.1e}, Pinocchio's (one state) to {pin_err:.1e}", flush=True)
    if a.json:
        from importlib.metadata import version

        meta = dict(xla_flags=os.environ["XLA_FLAGS"], loadavg_end=os.getloadavg(), jax=jax.__version__,
                    adam=version("adam-robotics"), pinocchio=pin.__version__)
        with open(a.json, "w") as fh:
            json.dump(dict(meta=meta, rows=rows), fh, indent=1)
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
