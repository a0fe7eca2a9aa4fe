#!/usr/bin/env python
"""mbjax vs MJX: batched forward dynamics of MJCF models on CPU, contacts off, in one run.

For each model (MJX's own test models: ``humanoid`` (nv 27), ``barkour_v0`` (18),
``shadow_hand`` (30)), B random states are evaluated by

- MJX: ``jax.vmap(mjx.forward)`` on ``mjx.Data`` with ``qpos``, ``qvel`` and
  ``qfrc_applied`` set (contacts, the constraint solver and the actuators disabled);
- mbjax: ``mbjax.aba(model, q, qd, tau + passive_forces(model, q, qd))`` with the model loaded
  by ``mbjax.load_mjcf`` and the velocities and forces mapped from MuJoCo's coordinates,
  then the accelerations mapped back (``mbjax.to_mujoco_acceleration``), so that both return
  MuJoCo's ``qacc``.

Both in float64 (``jax_enable_x64``) with mbjax's recommended ``XLA_FLAGS`` unless given
(``mbjax.compilation.set_cpu_flags``: XLA single-threaded, small while loops hoisted), interleaved: each repeat times MJX, then mbjax. The
script checks that the two ``qacc`` agree and prints time per state, the ratio mbjax / MJX
(median and best repeats) and compile times; ``--json`` writes them. mbjax is timed twice: as
``jax.jit`` compiles it, and with mbjax's XLA options (``compiler_options=
mbjax.compilation.CPU_OPTIONS``, what ``mbjax.jit`` sets; MJX is compiled as a user would).

    python benchmarks/bench_mjx.py [--batch 1024 4096] [--repeats 7] [--json out.json]
"""

import argparse
import json
import os
import time

from mbjax.compilation import set_cpu_flags  # noqa: E402  (imports jax, makes no backend)

if "XLA_FLAGS" not in os.environ:  # mbjax's recommended flags unless given
    set_cpu_flags()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from mujoco import mjx  # noqa: E402

import mbjax  # noqa: E402

DATA = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data")
MODELS = {
    "humanoid": "humanoid/humanoid.xml",
    "barkour_v0": "barkour_v0/assets/barkour_v0_mjx.xml",
    "shadow_hand": "shadow_hand/scene_right.xml",
}


def random_states(m, B, rng):
    """qpos (random joint positions within limits, unit quaternions), qvel, qfrc_applied."""
    qpos = np.tile(m.qpos0, (B, 1))
    for j in range(m.njnt):
        a, kind = m.jnt_qposadr[j], m.jnt_type[j]
        if kind == mujoco.mjtJoint.mjJNT_FREE:
            qpos[:, a:a + 3] = rng.normal(size=(B, 3))
            quat = rng.normal(size=(B, 4))
            qpos[:, a + 3:a + 7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
        elif kind == mujoco.mjtJoint.mjJNT_BALL:
            quat = rng.normal(size=(B, 4))
            qpos[:, a:a + 4] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
        else:
            lo, hi = m.jnt_range[j] if m.jnt_limited[j] else (-1.0, 1.0)
            qpos[:, a] = rng.uniform(lo, hi, size=B)
    return qpos, rng.normal(size=(B, m.nv)), rng.normal(size=(B, m.nv))


def timed(f, *xs, repeats):
    jax.block_until_ready(f(*xs))
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*xs))
        out.append(time.perf_counter() - t0)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, nargs="+", default=[1024, 4096])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    p.add_argument("--json", help="write the results here")
    a = p.parse_args()
    rows = []
    print(f"XLA_FLAGS={os.environ['XLA_FLAGS']}, float64, load average {os.getloadavg()[0]:.1f}")
    for name in a.models:
        m = mujoco.MjModel.from_xml_path(os.path.join(DATA, MODELS[name]))
        off = mujoco.mjtDisableBit
        # contacts and constraints off; actuators off too (their forces at ctrl = 0, e.g. a
        # position servo's -kp q, are not part of the multibody model mbjax compares)
        m.opt.disableflags |= off.mjDSBL_CONTACT | off.mjDSBL_CONSTRAINT | off.mjDSBL_ACTUATION
        model = mbjax.load_mjcf(m)
        mx = mjx.put_model(m)
        d0 = mjx.make_data(mx)

        def mjx_forward(qpos, qvel, f):
            d = d0.replace(qpos=qpos, qvel=qvel, qfrc_applied=f)
            return mjx.forward(mx, d).qacc

        def mbjax_forward(qpos, qvel, f):
            qd = mbjax.from_mujoco_velocity(model, qpos, qvel)
            tau = mbjax.from_mujoco_force(model, qpos, f) + mbjax.passive_forces(model, qpos, qd)
            return mbjax.to_mujoco_acceleration(model, qpos, qd, mbjax.aba(model, qpos, qd, tau))

        for B in a.batch:
            xs = [jnp.asarray(x) for x in random_states(m, B, np.random.default_rng(0))]
            fns, compile_s = {}, {}
            for label, f, options in (("mjx", mjx_forward, {}), ("mbjax", mbjax_forward, {}),
                                      ("mbjax.jit", mbjax_forward, mbjax.compilation.CPU_OPTIONS)):
                t0 = time.perf_counter()
                fns[label] = jax.jit(jax.vmap(f), compiler_options=options).lower(*xs).compile()
                compile_s[label] = time.perf_counter() - t0
            ref, got = np.asarray(fns["mjx"](*xs)), np.asarray(fns["mbjax"](*xs))
            err = float(np.abs(got - ref).max() / np.abs(ref).max())
            times = {label: [] for label in fns}
            for _ in range(a.repeats):  # interleaved
                for label in times:
                    times[label] += timed(fns[label], *xs, repeats=1)
            med = {k: float(np.median(v)) / B for k, v in times.items()}
            best = {k: float(np.min(v)) / B for k, v in times.items()}
            row = dict(model=name, nv=m.nv, batch=B, mjx_s=med["mjx"], mbjax_s=med["mbjax"],
                       ratio=med["mbjax"] / med["mjx"], ratio_min=best["mbjax"] / best["mjx"],
                       mbjax_jit_s=med["mbjax.jit"], ratio_jit=med["mbjax.jit"] / med["mjx"],
                       ratio_jit_min=best["mbjax.jit"] / best["mjx"], compile_mjx_s=compile_s["mjx"],
                       compile_mbjax_s=compile_s["mbjax"], compile_mbjax_jit_s=compile_s["mbjax.jit"], qacc_rel_err=err)
            rows.append(row)
            print(f"{name:12s} nv {m.nv:2d} B {B:5d}: MJX {med['mjx'] * 1e6:7.2f} µs, mbjax {med['mbjax'] * 1e6:7.2f} µs "
                  f"per state; ratio {row['ratio']:.2f} (best {row['ratio_min']:.2f}); with mbjax's options "
                  f"{med['mbjax.jit'] * 1e6:7.2f} µs, ratio {row['ratio_jit']:.2f} (best {row['ratio_jit_min']:.2f}); "
                  f"compile {compile_s['mjx']:.1f} / {compile_s['mbjax']:.1f} / {compile_s['mbjax.jit']:.1f} s; "
                  f"qacc agree to {err:.1e}", flush=True)
    if a.json:
        meta = dict(xla_flags=os.environ["XLA_FLAGS"], loadavg_end=os.getloadavg(), jax=jax.__version__,
                    mujoco=mujoco.__version__)
        with open(a.json, "w") as fh:
            json.dump(dict(meta=meta, rows=rows), fh, indent=1)
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
