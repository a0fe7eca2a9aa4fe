"""The bundled quadruped standing on the floor under a PD posture controller, then dropped from
0.5 m, with mbjax.contact's compliant contacts at its four feet (default) or its rigid ones
(``--contacts rigid``).

Feet: points at the ``*_FOOT`` frames (``contact.frame_points``); floor: a linear spring-damper
(k = 5e4 N/m, c = 800 N s/m per foot: 0.6 mm of sinking under the robot's weight) with
Coulomb friction mu = 0.8 regularised at 1e-3 m/s. Standing: started 2 cm high with its joints
0.05-0.1 rad off the posture, the robot settles; the run checks that its base height then stays
steady to 1 mm, its feet slip less than 1 mm, and the ground carries its weight (the sum of the
contact forces). Dropped: the same robot released 0.5 m above the floor lands and comes to rest
on its feet.

Solvers: the friction law is stiff (mu f_n / v_s on a leg of 0.35 kg: 7e4 1/s), which holds an
explicit solver to ~17 µs steps even at rest. Standing 10 s uses diffrax's implicit
``Kvaerno5``, whose steps grow once the robot is still (~2200 steps); the drop uses ``Tsit5``,
because at the impacts the forces' kinks stall the implicit solver's Newton iterations. With
``--quick`` the second of standing uses ``Tsit5`` too (one compiled program for both runs).

Rigid (``--contacts rigid``): the same feet as rigid point contacts with Coulomb friction
mu = 0.8 (``contact.RigidContact``), time stepping at 2 ms (``contact.rollout``: impulses by 20
projected Gauss–Seidel sweeps per step, the controller's damping implicit). The feet neither
sink nor creep, so the robot stands at the posture's height exactly.

Run ``python examples/quadruped_stand.py [--quick] [--contacts compliant|rigid] [--out DIR]``;
with matplotlib it saves ``quadruped_stand.png`` (``quadruped_stand_rigid.png``).
"""

import time

from _common import Example  # first: float64 before any JAX array exists

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import mbjax
from mbjax import contact

example = Example(__doc__, quick="1 s standing and 0.6 s after the drop instead of 10 s and 2 s",
                  options=lambda p: p.add_argument("--contacts", choices=["compliant", "rigid"], default="compliant",
                                                   help="compliant feet (simulate) or rigid ones (time stepping)"))
RIGID = example.args.contacts == "rigid"
model = mbjax.load_bundled("quadruped")
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
k = 5e4
points, ground = contact.frame_points(model, FEET), contact.Plane.horizontal(0.0)
if RIGID:
    floor = contact.RigidContact(points, ground, 0.8)
    stepping, DT = contact.TimeStepping(floor, iterations=20), 2e-3
else:
    floor = contact.CompliantContact(points, ground, contact.SpringDamper(k, 800.0), contact.Friction(0.8, 1e-3))
    dynamics = contact.WithContacts(floor)
weight = float(jnp.sum(model.mass)) * 9.81
# legs straight down, the compliant feet sunk under the load
q_stand = mbjax.neutral(model).at[2].set(0.44 if RIGID else 0.44 - weight / 4 / k)
gains = lambda g: jnp.concatenate([jnp.zeros(6), jnp.full(8, g)])  # noqa: E731 - no torque on the base
posture = mbjax.PD(model, gains(200.0), gains(5.0), mbjax.Setpoint(q_stand, jnp.zeros(model.nv)))


def run(q0, duration, solver):
    """The trajectory (201 saved states, or every step when rigid), the vertical force the
    ground carries at the end, and the wall time."""
    t0 = time.perf_counter()
    if RIGID:
        traj, steps = contact.rollout(model, stepping, q0, jnp.zeros(model.nv), posture, DT, int(round(duration / DT)))
        load = float(jnp.sum(steps.forces[-1, :, 2]))
        traj = eqx.tree_at(lambda t: t.stats, traj, {"num_steps": len(steps.residual)})
    else:
        traj = mbjax.simulate(model, q0, jnp.zeros(model.nv), 0.0, duration, tau=posture, method=dynamics,
                              solver=solver, rtol=1e-6, atol=1e-8, saveat=jnp.linspace(0.0, duration, 201),
                              max_steps=1_000_000)
        load = float(jnp.sum(floor.forces(model, traj.q[-1], traj.qd[-1])[1][:, 2]))
    jax.block_until_ready(traj.q)
    return traj, load, time.perf_counter() - t0


def feet_xy(traj):
    _, p = jax.vmap(lambda q: mbjax.frame_placements(model, q))(traj.q)
    return np.asarray(p)[:, [model.frame_index(f) for f in FEET], :2]


# ----------------------------------------------------------------------------------- standing
stand_time = 1.0 if example.quick else 10.0
q0 = q_stand.at[2].add(0.02).at[7:].add(jnp.asarray([0.1, -0.1, -0.1, 0.1, 0.05, -0.05, -0.05, 0.05]))
stand, load, wall = run(q0, stand_time, diffrax.Tsit5() if example.quick else diffrax.Kvaerno5())
ts, z = np.asarray(stand.ts), np.asarray(stand.q[:, 2])
settled = ts >= stand_time / 2
height_range = float(z[settled].max() - z[settled].min())
xy = feet_xy(stand)[settled]
slip = float(np.abs(xy - xy[0]).max())
load = load / weight - 1
print(f"standing {stand_time:g} s: {int(stand.stats['num_steps'])} steps in {wall:.1f} s (compilation included); "
      f"base height {z[-1]:.6f} m, its range over the second half {height_range:.1e} m; feet slip over it "
      f"{slip:.1e} m; contact forces / weight - 1 = {load:.1e}")

# ------------------------------------------------------------------------------------ dropped
drop_time = 0.6 if example.quick else 2.0
drop, _, wall = run(q_stand.at[2].add(0.5), drop_time, diffrax.Tsit5())
zd = np.asarray(drop.q[:, 2])
print(f"dropped from 0.5 m: {int(drop.stats['num_steps'])} steps in {wall:.1f} s; lowest base height {zd.min():.4f} m, "
      f"final {zd[-1]:.4f} m (standing: {float(q_stand[2]):.4f} m)")
example.record(height_range=height_range, feet_slip=slip, load_error=load, final_height=float(z[-1]),
               drop_final_height=float(zd[-1]), drop_lowest_height=float(zd.min()), standing_height=float(q_stand[2]))


def figure(plt):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.plot(ts, z, label="base height")
    ax1.axhline(float(q_stand[2]), color="k", ls=":", label="posture")
    ax1.set_xlabel("time [s]")
    ax1.set_ylabel("base height [m]")
    ax1.set_title(f"standing ({example.args.contacts} feet)")
    ax1.legend()
    ax2.plot(np.asarray(drop.ts), zd)
    ax2.axhline(float(q_stand[2]), color="k", ls=":")
    ax2.set_xlabel("time [s]")
    ax2.set_title("dropped from 0.5 m")
    fig.tight_layout()
    return fig


example.figure("quadruped_stand_rigid.png" if RIGID else "quadruped_stand.png", figure)
