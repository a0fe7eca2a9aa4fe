"""An MJCF ragdoll knocked over by a thrown ball: capsules and spheres hit the floor and each other.

The model is MJCF text (below): a ragdoll (a free pelvis, a torso, a head and four limbs of
capsules and spheres on hinge joints with dampers and limits, 13 bodies) and a free 2.9 kg
ball. ``contact.mjcf_contacts`` gives the geoms' contacts with the floor and
``contact.mjcf_pairs`` those between bodies, paired as MuJoCo pairs them (not a body with its
parent); both take a linear spring-damper (k = 5e5 N/m, c = 3000 N s/m) and Coulomb friction
mu = 0.8 regularised at 0.01 m/s; the joint ranges become critically damped stops
(``contact.joint_limits``, time constant 0.01 s). The ragdoll starts standing (its feet 1 mm
above the floor); the ball, thrown at 5 m/s from 1.2 m to its side, hits its arm and it topples.
Adaptive Tsit5 (rtol = atol = 1e-6).

Checks: the energy (kinetic, gravity's and the contact springs' and stops') never increases
(the dampers and friction only take energy out); the ball did hit the ragdoll; no shape sinks
into the floor or into another body by more than 2 cm; the ragdoll ends on the floor (its
pelvis below 0.3 m) and nearly still (its velocities below 0.1 rad/s and m/s; the ball rolls
on, nothing resists rolling). With matplotlib it draws the heights and the energy
(``ragdoll_fall.png``) and writes an animation (``ragdoll_fall.gif``).

Run ``python examples/ragdoll_fall.py [--quick] [--out DIR]``.
"""

import time

from _common import Example  # first: float64 before any JAX array exists

import jax
import jax.numpy as jnp
import numpy as np

import mbjax
from mbjax import contact

example = Example(__doc__, quick="the first 1.5 s (the throw, the fall and the landing) instead of 4 s")

RAGDOLL = """<mujoco model="ragdoll">
  <compiler angle="radian"/>
  <default>
    <joint type="hinge" damping="2" armature="0.02" limited="true"/>
    <geom type="capsule" friction="0.8" density="1000"/>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1"/>
    <body name="pelvis" pos="0 0 0.98">
      <freejoint/>
      <geom name="pelvis" fromto="0 -0.08 0 0 0.08 0" size="0.09"/>
      <body name="torso" pos="0 0 0.1">
        <joint name="waist" axis="0 1 0" range="-0.5 0.8"/>
        <geom name="torso" fromto="0 0 0.05 0 0 0.35" size="0.1"/>
        <body name="head" pos="0 0 0.52">
          <joint name="neck" axis="0 1 0" range="-0.6 0.6"/>
          <geom name="head" type="sphere" size="0.1"/>
        </body>
        <body name="upper_arm_right" pos="0 -0.21 0.38">
          <joint name="shoulder_right" axis="0 1 0" range="-2.5 1.0"/>
          <geom name="upper_arm_right" fromto="0 0 0 0 0 -0.27" size="0.04"/>
          <body name="lower_arm_right" pos="0 0 -0.31">
            <joint name="elbow_right" axis="0 1 0" range="-2.4 0"/>
            <geom name="lower_arm_right" fromto="0 0 0 0 0 -0.24" size="0.035"/>
            <geom name="hand_right" type="sphere" pos="0 0 -0.29" size="0.045"/>
          </body>
        </body>
        <body name="upper_arm_left" pos="0 0.21 0.38">
          <joint name="shoulder_left" axis="0 1 0" range="-2.5 1.0"/>
          <geom name="upper_arm_left" fromto="0 0 0 0 0 -0.27" size="0.04"/>
          <body name="lower_arm_left" pos="0 0 -0.31">
            <joint name="elbow_left" axis="0 1 0" range="-2.4 0"/>
            <geom name="lower_arm_left" fromto="0 0 0 0 0 -0.24" size="0.035"/>
            <geom name="hand_left" type="sphere" pos="0 0 -0.29" size="0.045"/>
          </body>
        </body>
      </body>
      <body name="thigh_right" pos="0 -0.1 -0.06">
        <joint name="hip_right" axis="0 1 0" range="-1.6 0.5"/>
        <geom name="thigh_right" fromto="0 0 0 0 0 -0.36" size="0.06"/>
        <body name="shin_right" pos="0 0 -0.42">
          <joint name="knee_right" axis="0 1 0" range="0 2.4"/>
          <geom name="shin_right" fromto="0 0 0 0 0 -0.33" size="0.05"/>
          <body name="foot_right" pos="0 0 -0.4">
            <joint name="ankle_right" axis="0 1 0" range="-0.7 0.7"/>
            <geom name="foot_right" fromto="-0.04 0 0 0.14 0 0" size="0.04"/>
          </body>
        </body>
      </body>
      <body name="thigh_left" pos="0 0.1 -0.06">
        <joint name="hip_left" axis="0 1 0" range="-1.6 0.5"/>
        <geom name="thigh_left" fromto="0 0 0 0 0 -0.36" size="0.06"/>
        <body name="shin_left" pos="0 0 -0.42">
          <joint name="knee_left" axis="0 1 0" range="0 2.4"/>
          <geom name="shin_left" fromto="0 0 0 0 0 -0.33" size="0.05"/>
          <body name="foot_left" pos="0 0 -0.4">
            <joint name="ankle_left" axis="0 1 0" range="-0.7 0.7"/>
            <geom name="foot_left" fromto="-0.04 0 0 0.14 0 0" size="0.04"/>
          </body>
        </body>
      </body>
    </body>
    <body name="ball" pos="0 -1.2 1.2">
      <freejoint name="ball"/>
      <geom name="ball" type="sphere" size="0.12" density="400"/>
    </body>
  </worldbody>
</mujoco>"""

DURATION = 1.5 if example.quick else 4.0
model = mbjax.load_mjcf(RAGDOLL)
law, friction = contact.SpringDamper(5e5, 3000.0), 1e-2
floor = contact.mjcf_contacts(model, RAGDOLL, law, slip_speed=friction)
touch = contact.mjcf_pairs(model, RAGDOLL, law, slip_speed=friction)
stops = contact.joint_limits(model, time_constant=0.01)
dynamics = contact.WithContacts([floor, touch], limits=stops)
print(f"{model}\n{len(floor.points)} candidate spheres on the floor, {len(touch.pairs)} pairs of shapes between "
      f"bodies, {len(stops.v_lower) + len(stops.v_upper)} joint stops; total mass {float(jnp.sum(model.mass)):.1f} kg")

# a free joint's q is its body's pose in the world: the pelvis 1 mm above where the feet touch the
# floor, the ball 1.2 m to the side; the ball thrown at the chest (its qd: linear velocity in its axes)
ball = model.joint_names.index("ball")
q0 = mbjax.neutral(model).at[2].set(0.921)
q0 = q0.at[model.q_slice(ball)].set(jnp.asarray([0.0, -1.2, 1.2, 1.0, 0.0, 0.0, 0.0]))
qd0 = jnp.zeros(model.nv).at[model.v_slice(ball)].set(jnp.asarray([0.0, 5.0, 1.0, 0.0, 0.0, 0.0]))
start = time.perf_counter()
traj = mbjax.simulate(model, q0, qd0, 0.0, DURATION, method=dynamics, rtol=1e-6, atol=1e-6,
                      saveat=jnp.linspace(0.0, DURATION, 241), max_steps=1_000_000)
jax.block_until_ready(traj.q)
wall = time.perf_counter() - start
print(f"simulated {DURATION} s in {wall:.1f} s (compilation included)")


def energy(q, qd):
    stored = floor.potential_energy(model, q) + touch.potential_energy(model, q) + stops.energy(q)
    return mbjax.kinetic_energy(model, q, qd) + mbjax.potential_energy(model, q) + stored


def deepest(q):
    tk_floor, _ = floor.forces(model, q, jnp.zeros(model.nv))
    tk_pairs, _ = touch.forces(model, q, jnp.zeros(model.nv))
    return jnp.max(tk_floor.depth), jnp.max(tk_pairs.depth)


E = np.asarray(jax.vmap(energy)(traj.q, traj.qd))
into_floor, into_bodies = (np.asarray(x) for x in jax.vmap(deepest)(traj.q))
pair_depths = np.asarray(jax.vmap(lambda q: touch.forces(model, q, jnp.zeros(model.nv))[0].depth)(traj.q))
hit = [f"{model.body_names[touch.pairs.body[i]]}-{model.body_names[touch.pairs.body[j]]}"
       for k, (i, j) in enumerate(zip(touch.pairs.first, touch.pairs.second)) if pair_depths[:, k].max() > 0]
rise = float(np.max(np.diff(E)))
pelvis = np.asarray(traj.q[:, 2])
speed = float(jnp.max(jnp.abs(traj.qd[-1, :model.v_slice(ball).start])))  # the ragdoll's (the ball rolls on)
print(f"energy {E[0]:.2f} J -> {E[-1]:.2f} J, largest rise between saved states {rise:.1e} J")
print(f"bodies that hit each other: {', '.join(hit) or 'none'}")
print(f"pelvis {pelvis[0]:.3f} m -> {pelvis[-1]:.3f} m; deepest into the floor {into_floor.max() * 1e3:.1f} mm, "
      f"into another body {into_bodies.max() * 1e3:.1f} mm; the ragdoll's final speeds up to {speed:.2e}")
example.record(solve_seconds=wall, energy_start=E[0], energy_end=E[-1], energy_rise=rise, pelvis_end=pelvis[-1],
               depth_floor=into_floor.max(), depth_bodies=into_bodies.max(), final_speed=speed, pairs_hit=len(hit))

assert rise <= 1e-6 * E[0], "the energy rose"
assert any("ball" in pair for pair in hit), "the ball missed"
assert into_floor.max() < 0.02 and into_bodies.max() < 0.02, "a shape sank too deep"
if not example.quick:
    assert pelvis[-1] < 0.3, "the ragdoll did not end lying on the floor"
    assert speed < 0.1, "the ragdoll is still moving"


def draw(plt):
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.plot(traj.ts, pelvis, label="pelvis")
    head = np.asarray(jax.vmap(lambda q: mbjax.frame_placements(model, q)[1][model.frame_index("head")])(traj.q))
    a.plot(traj.ts, head[:, 2], label="head")
    a.set(xlabel="t (s)", ylabel="height (m)", title="the ragdoll, hit by the ball at 0.17 s, topples")
    a.legend()
    b.plot(traj.ts, E - E[0])
    b.set(xlabel="t (s)", ylabel="E(t) - E(0) (J)", title="energy: dampers and friction take it out")
    return fig


example.figure("ragdoll_fall.png", draw=draw)
example.animation("ragdoll_fall.gif", model, traj.ts, traj.q, max_frames=40 if example.quick else 240,
                  title="an MJCF ragdoll hit by a ball: contacts with the floor and between bodies")
