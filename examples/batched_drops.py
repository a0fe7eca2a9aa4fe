"""A batch of 1024 balls of different masses dropped onto the floor in one call, each bounce
checked against its closed form.

Balls of radius 0.1 m and masses from 0.1 to 10 kg (log-spaced; uniform spheres) fall from
0.5 m onto a linear spring-damper floor (k = 1e4 N/m, c = 20 N s/m), all in one
``mbjax.simulate_batch`` call over a batch of models (``batch_model=True``; the model's
``mass`` and ``inertia`` leaves carry the batch). The floor acts as the damped oscillator
m d'' + c d' + k d = m g on the penetration d, from d = 0 at the impact speed sqrt(2 g h),
until its force k d + c d' returns to zero: the ball then leaves with a speed and a (slight)
penetration that depend on its mass, which this script finds from the closed-form solution
(the separation time by root finding) and compares with every simulated ball in flight after
its first bounce. Light balls, whose contact is more damped, bounce lower.

Timing: the batch (first call, compilation included, and again) against the same simulation
one ball at a time (``mbjax.simulate``, a few balls, per ball). The batch saves one state per
ball: under ``vmap`` every save rewrites the whole batch's output buffer (251 saves took this
batch from 13 s to 16 s), and its adaptive loop runs as many steps as its slowest ball.

Run ``python examples/batched_drops.py [--quick] [--out DIR]``; with matplotlib it saves
``batched_drops.png``.
"""

import time

from _common import Example  # first: float64 before any JAX array exists

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import brentq

import mbjax
from mbjax import contact

example = Example(__doc__, quick="64 balls instead of 1024")
B = 64 if example.quick else 1024
G, RADIUS, HEIGHT, K, C = 9.81, 0.1, 0.5, 1e4, 20.0
T_END, T_CHECK = 1.0, 0.48  # every ball is in flight after its first bounce at T_CHECK (checked below)

ball = mbjax.ModelBuilder("ball").add_body("ball", joint="free", mass=1.0,
                                           inertia=np.eye(3) * 0.4 * RADIUS**2).build()
masses = np.geomspace(0.1, 10.0, B)
balls = jax.vmap(lambda m: eqx.tree_at(lambda b: (b.mass, b.inertia), ball, (ball.mass * m, ball.inertia * m)))(
    jnp.asarray(masses))
floor = contact.CompliantContact(contact.contact_points(ball, [("ball", contact.sphere(RADIUS))]),
                                 contact.Plane.horizontal(0.0), contact.SpringDamper(K, C))
q0 = jnp.tile(jnp.asarray([0.0, 0.0, HEIGHT + RADIUS, 1.0, 0.0, 0.0, 0.0]), (B, 1))
# one saved state per ball: under vmap every save rewrites the whole batch's output buffer
settings = dict(method=contact.WithContacts(floor), rtol=1e-12, atol=1e-12, saveat=[T_CHECK])


def drop(models, n, **kwargs):
    traj = mbjax.simulate_batch(models, q0[:n], jnp.zeros((n, 6)), 0.0, T_CHECK, batch_model=True, **settings | kwargs)
    return jax.block_until_ready(traj)


t0 = time.perf_counter()
traj = drop(balls, B)
first = time.perf_counter() - t0
t0 = time.perf_counter()
traj = drop(balls, B)
again = time.perf_counter() - t0
alone = []
for i in np.linspace(0, B - 1, 4).astype(int):
    one = jax.tree.map(lambda x: x[i], balls)
    t0 = time.perf_counter()
    jax.block_until_ready(mbjax.simulate(one, q0[i], jnp.zeros(6), 0.0, T_CHECK, **settings))
    alone.append(time.perf_counter() - t0)
alone = min(alone[1:])  # the first compiled the program
steps = np.asarray(traj.stats["num_steps"])
print(f"{B} balls in one call: {first:.1f} s (compilation included), again {again:.2f} s = {again / B * 1e3:.2f} ms per "
      f"ball; one ball at a time {alone * 1e3:.1f} ms per ball ({alone * B / again:.1f}x the batch's time); the batch "
      f"runs {steps.max()} steps, as many as its slowest ball (mean {steps.mean():.0f})")


# ------------------------------------------------------------------ the bounce in closed form
def bounce(m):
    """(time in contact, penetration and upward speed at separation) of a ball of mass m."""
    v0 = np.sqrt(2 * G * HEIGHT)
    s, wd = C / (2 * m), np.sqrt(K / m - (C / (2 * m)) ** 2)
    a = -m * G / K  # x = d - m g / k, the oscillation about the loaded equilibrium
    b = (v0 + s * a) / wd

    def state(t):
        e = np.exp(-s * t)
        x = e * (a * np.cos(wd * t) + b * np.sin(wd * t))
        xd = e * ((b * wd - s * a) * np.cos(wd * t) - (a * wd + s * b) * np.sin(wd * t))
        return x + m * G / K, xd

    force = lambda t: K * state(t)[0] + C * state(t)[1]  # noqa: E731
    grid = np.linspace(1e-9, 2 * np.pi / wd, 2001)
    f = np.array([force(t) for t in grid])
    j = np.argmax(f < 0)  # the first sign change: the floor lets go
    t = brentq(force, grid[j - 1], grid[j], xtol=1e-15, rtol=1e-15)
    d, dd = state(t)
    return t, d, -dd


t_impact = np.sqrt(2 * HEIGHT / G)
contact_time, depth, speed = np.array([bounce(m) for m in masses]).T
flight = T_CHECK - t_impact - contact_time
assert np.all(flight > 0) and np.all(2 * speed / G > flight), "a ball is not in flight at T_CHECK"
expected_z = RADIUS - depth + speed * flight - 0.5 * G * flight**2
expected_vz = speed - G * flight
z, vz = np.asarray(traj.q[:, -1, 2]), np.asarray(traj.qd[:, -1, 2])
errors = np.maximum(np.abs(z - expected_z), np.abs(vz - expected_vz))
error = errors.max()
apex = expected_z - RADIUS + expected_vz**2 / (2 * G)
print(f"first bounce against the closed form, all {B} balls at t = {T_CHECK} s: largest error {error:.1e} (m, m/s), "
      f"for {masses[errors.argmax()]:.3g} kg; rebound apex {apex.min():.4f} m (0.1 kg) to {apex.max():.4f} m (10 kg)")
example.record(balls=B, first_call_s=first, warm_s=again, per_ball_one_at_a_time_s=alone, bounce_error=error,
               apex_light=float(apex[0]), apex_heavy=float(apex[-1]))
assert error < 1e-7, "the simulated bounces differ from the closed form"


def figure(plt):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    some = np.linspace(0, B - 1, 6).astype(int)
    ts = jnp.linspace(0.0, T_END, 401)
    paths = mbjax.simulate_batch(jax.tree.map(lambda x: x[some], balls), q0[:6], jnp.zeros((6, 6)), 0.0, T_END,
                                 batch_model=True, **settings | dict(saveat=ts))
    for i, height in zip(some, np.asarray(paths.q[:, :, 2]) - RADIUS):
        ax1.plot(np.asarray(ts), height, label=f"{masses[i]:.2g} kg")
    ax1.set_xlabel("time [s]")
    ax1.set_ylabel("ball above the floor [m]")
    ax1.legend(fontsize="small")
    ax1.set_title(f"{B} drops in one simulate_batch call")
    ax2.semilogx(masses, apex, "k-", label="closed form")
    ax2.semilogx(masses, z - RADIUS + vz**2 / (2 * G), ".", ms=3, label="simulated")
    ax2.set_xlabel("mass [kg]")
    ax2.set_ylabel("apex after the first bounce [m]")
    ax2.legend()
    fig.tight_layout()
    return fig


example.figure("batched_drops.png", figure)
