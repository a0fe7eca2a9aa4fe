"""Simulate the double pendulum shipped with mbjax and watch its energy.

A fixed-step semi-implicit (symplectic) Euler integrator in a few lines: velocity first with
the articulated-body algorithm, then position with ``mbjax.integrate``, the whole loop a
jitted ``jax.lax.scan``. The integrator is first order and, with a mass matrix that depends
on q, not symplectic in (q, qd): the energy drifts, at a rate proportional to dt (halving dt
halves it), which the two runs below show.

Run ``python examples/pendulum_energy.py [--quick] [--out DIR]`` (``--quick`` changes nothing:
the run is already quick). With matplotlib installed it saves a plot, ``pendulum_energy.png``;
without, it prints a table.
"""

import time

from _common import Example  # first: float64 before any JAX array exists

import jax
import jax.numpy as jnp
import numpy as np

import mbjax

example = Example(__doc__, quick=None)
model = mbjax.load_bundled("double_pendulum")
print(model)


def simulate(q0, qd0, dt, steps):
    """States after every step, (steps, nq) and (steps, nv), with their energies."""

    def step(state, _):
        q, qd = state
        qd = qd + dt * mbjax.aba(model, q, qd, jnp.zeros(model.nv))  # velocity first ...
        q = mbjax.integrate(model, q, dt * qd)  # ... then position
        energy = mbjax.kinetic_energy(model, q, qd) + mbjax.potential_energy(model, q)
        return (q, qd), (q, energy)

    _, (qs, energies) = jax.lax.scan(step, (q0, qd0), None, length=steps)
    return qs, energies


simulate = jax.jit(simulate, static_argnums=(2, 3))

q0 = jnp.array([2.0, -1.0])  # released from well above the horizontal: chaotic motion
qd0 = jnp.zeros(model.nv)
E0 = float(mbjax.kinetic_energy(model, q0, qd0) + mbjax.potential_energy(model, q0))
duration = 3.0
results, drifts = {}, []
for dt in (2e-3, 1e-3):
    steps = int(round(duration / dt))
    t0 = time.perf_counter()
    qs, E = jax.block_until_ready(simulate(q0, qd0, dt, steps))
    wall = time.perf_counter() - t0
    drift = np.max(np.abs(np.asarray(E) - E0))
    results[dt] = (np.arange(1, steps + 1) * dt, np.asarray(qs), np.asarray(E))
    drifts.append(drift)
    print(f"dt = {dt:g} s: {steps} steps in {wall:.2f} s (compile included), "
          f"max |E(t) - E(0)| = {drift:.3e} J (E(0) = {E0:.6f} J)")
example.record(dt=list(results), energy_drift=drifts, initial_energy=E0)
t, qs, E = results[1e-3]


def figure(plt):
    """Joint angles of the finer run, and the energy error of both."""
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(7, 5.5))
    ax1.plot(t, qs[:, 0], label="joint1")
    ax1.plot(t, qs[:, 1], label="joint2")
    ax1.set_ylabel("angle [rad]")
    ax1.legend()
    for dt, (tt, _, EE) in results.items():
        ax2.plot(tt, EE - E0, label=f"dt = {dt:g} s")
    ax2.set_xlabel("time [s]")
    ax2.set_ylabel("E(t) - E(0) [J]")
    ax2.legend()
    return fig


if not example.figure("pendulum_energy.png", figure):
    print("so here is a table instead:")
    print("   t [s]   joint1 [rad]   joint2 [rad]    E(t) - E(0) [J]")
    for k in range(0, len(t), len(t) // 12):
        print(f"  {t[k]:6.3f}   {qs[k, 0]:+12.6f}   {qs[k, 1]:+12.6f}   {E[k] - E0:+16.3e}")
