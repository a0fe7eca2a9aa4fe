"""Long simulations with mbjax.simulate that keep energy and momentum: a passive double
pendulum (gravity) and a free-floating 7-joint arm in zero gravity (free base: quaternion).

Both run 100 s with diffrax's 8th-order Dormand-Prince solver at rtol = atol = 1e-12 and
report the largest relative drift of the energy (and of the arm's spatial momentum) and the
quaternion norm error of the base. ``--small`` runs 2 s instead (for tests). With matplotlib
installed the arm's run is plotted to ``simulate_conservation.png`` (or the path given).

    python examples/simulate_conservation.py [--small] [out.png]
"""

import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import mbjax  # noqa: E402
from mbjax.simulation import simulate  # noqa: E402

args = [a for a in sys.argv[1:] if a != "--small"]
duration = 2.0 if "--small" in sys.argv else 100.0
out = args[0] if args else "simulate_conservation.png"
settings = dict(solver=diffrax.Dopri8(), rtol=1e-12, atol=1e-12, energy=True, momentum=True,
                saveat=jnp.linspace(0.0, duration, 1001), max_steps=1_000_000, progress=duration > 10)


def drift(x):
    x = np.asarray(x).reshape(len(x), -1)
    return np.abs(x - x[0]).max() / np.abs(x[0]).max()


pendulum = mbjax.load_bundled("double_pendulum")
t0 = time.perf_counter()
tr = simulate(pendulum, jnp.array([2.0, -1.0]), jnp.zeros(2), 0.0, duration, **settings)
print(f"double pendulum, {duration:g} s: {int(tr.stats['num_steps'])} steps, {time.perf_counter() - t0:.1f} s wall; "
      f"energy drift {drift(tr.energy):.2e} (relative)")

arm = mbjax.load_bundled("space_robot")  # 7-joint arm on a satellite, zero gravity
q0 = mbjax.random_configuration(arm, jax.random.PRNGKey(0))
qd0 = jax.random.normal(jax.random.PRNGKey(1), (arm.nv,))
t0 = time.perf_counter()
tr = simulate(arm, q0, qd0, 0.0, duration, **settings)
quat_err = np.abs(np.linalg.norm(np.asarray(tr.q)[:, 3:7], axis=1) - 1).max()
print(f"free-floating arm, {duration:g} s: {int(tr.stats['num_steps'])} steps, {time.perf_counter() - t0:.1f} s wall; "
      f"energy drift {drift(tr.energy):.2e}, momentum drift {drift(tr.momentum):.2e} (relative); "
      f"| |quat| - 1 | <= {quat_err:.1e}")

try:
    tr.plot(out, model=arm)
    print(f"plot: {out}")
except ImportError as e:
    print(e)
