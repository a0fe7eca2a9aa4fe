"""Long simulations with mbjax.simulate that keep energy and momentum: a passive double
pendulum (gravity) and a free-floating 7-joint arm in zero gravity (free base: quaternion).

Both run 100 s with diffrax's 8th-order Dormand-Prince solver at rtol = atol = 1e-12 and
report the largest relative drift of the energy (and of the arm's spatial momentum) and the
quaternion norm error of the base. With matplotlib installed the arm's run is plotted to
``simulate_conservation.png``.

Run ``python examples/simulate_conservation.py [--quick] [--out DIR]`` (``--quick``: 2 s instead
of 100 s).
"""

import time

from _common import Example  # first: float64 before any JAX array exists

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

import mbjax
from mbjax.simulation import simulate

example = Example(__doc__, quick="2 s instead of 100 s")
duration = 2.0 if example.quick else 100.0
# limits=False: the plain equations of motion. The stops at the joint limits (on by default) would
# take energy wherever a joint passed its limit (the pendulum's +-pi, the arm's).
settings = dict(solver=diffrax.Dopri8(), rtol=1e-12, atol=1e-12, energy=True, momentum=True,
                saveat=jnp.linspace(0.0, duration, 1001), max_steps=1_000_000, progress=duration > 10, limits=False)


def drift(x):
    x = np.asarray(x).reshape(len(x), -1)
    return np.abs(x - x[0]).max() / np.abs(x[0]).max()


pendulum = mbjax.load_bundled("double_pendulum")
t0 = time.perf_counter()
tr = simulate(pendulum, jnp.array([2.0, -1.0]), jnp.zeros(2), 0.0, duration, **settings)
energy = drift(tr.energy)
print(f"double pendulum, {duration:g} s: {int(tr.stats['num_steps'])} steps, {time.perf_counter() - t0:.1f} s wall; "
      f"energy drift {energy:.2e} (relative)")
example.record(duration=duration, pendulum_energy_drift=energy)

arm = mbjax.load_bundled("space_robot")  # 7-joint arm on a satellite, zero gravity
q0 = mbjax.random_configuration(arm, jax.random.PRNGKey(0))
qd0 = jax.random.normal(jax.random.PRNGKey(1), (arm.nv,))
t0 = time.perf_counter()
tr = simulate(arm, q0, qd0, 0.0, duration, **settings)
quat_err = np.abs(np.linalg.norm(np.asarray(tr.q)[:, 3:7], axis=1) - 1).max()
energy, momentum = drift(tr.energy), drift(tr.momentum)
print(f"free-floating arm, {duration:g} s: {int(tr.stats['num_steps'])} steps, {time.perf_counter() - t0:.1f} s wall; "
      f"energy drift {energy:.2e}, momentum drift {momentum:.2e} (relative); | |quat| - 1 | <= {quat_err:.1e}")
example.record(arm_energy_drift=energy, arm_momentum_drift=momentum, quaternion_norm_error=quat_err)
example.figure("simulate_conservation.png", lambda plt: tr.plot(model=arm))
