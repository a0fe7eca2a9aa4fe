"""A ball bouncing on the floor and a box sliding down a slope, with mbjax.contact's compliant
contact model.

The ball (1 kg, radius 0.1 m) is dropped from 0.5 m onto a linear spring-damper floor
(k = 1e4 N/m, c = 20 N s/m): without gravity a bounce would return it at e times its impact
speed, e = 0.744 in closed form for this law (``SpringDamper.restitution``); gravity acts during
the contact too, so its apex heights fall by a little more than e^2 = 0.554 per bounce (0.53 at
first, less as the impacts slow down). The box (1 kg, 0.2 m sides) on a 0.3 rad slope with Coulomb friction mu = 0.2 slides
with the acceleration g (sin 0.3 - mu cos 0.3) = 1.02 m/s^2, which the run measures from its
positions. Both simulations use ``mbjax.simulate`` with ``method=contact.WithContacts(...)``.

Run ``python examples/contact_bounce.py [--out DIR]`` (the run is already quick); with
matplotlib it saves ``contact_bounce.png``.
"""

import time

from _common import Example  # first: float64 before any JAX array exists

import jax.numpy as jnp
import numpy as np

import mbjax
from mbjax import contact

example = Example(__doc__, quick=None)
G = 9.81

# ------------------------------------------------------------------------------ bouncing ball
ball = mbjax.ModelBuilder("ball").add_body("ball", joint="free", mass=1.0, inertia=np.eye(3) * 0.004).build()
law = contact.SpringDamper(1e4, 20.0)
floor = contact.CompliantContact(contact.contact_points(ball, [("ball", contact.sphere(0.1))]),
                                 contact.Plane.horizontal(0.0), law, contact.Friction(0.5, 1e-3))
t0 = time.perf_counter()
traj = mbjax.simulate(ball, jnp.asarray([0.0, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0]), jnp.zeros(6), 0.0, 2.5,
                      method=contact.WithContacts(floor), saveat=jnp.linspace(0.0, 2.5, 2001))
height = np.asarray(traj.q[:, 2]) - 0.1  # the ball's lowest point above the floor
peaks = [height[i] for i in range(1, len(height) - 1) if height[i - 1] < height[i] >= height[i + 1] and height[i] > 1e-3]
e = float(law.restitution(1.0))
print(f"ball: simulated in {time.perf_counter() - t0:.1f} s; apex heights {np.round(peaks, 4)} m; "
      f"ratios {np.round(np.divide(peaks[1:], peaks[:-1]), 3)} against e^2 = {e**2:.3f}")

# ------------------------------------------------------------------------------- sliding box
angle, mu = 0.3, 0.2
box = mbjax.ModelBuilder("box").add_body("box", joint="free", mass=1.0, inertia=np.eye(3) / 150).build()
slope = contact.CompliantContact(contact.contact_points(box, [("box", contact.box((0.1, 0.1, 0.1)))]),
                                 contact.Plane.slope(angle), contact.SpringDamper(1e6, 1e3), contact.Friction(mu, 1e-4))
R = np.asarray(mbjax.spatial.axis_angle_rotation(jnp.asarray([0.0, -1.0, 0.0]), jnp.asarray(angle)))
quat = np.asarray([np.cos(angle / 2), 0.0, -np.sin(angle / 2), 0.0])  # the same rotation, (w, x, y, z)
start = R @ np.array([0.0, 0.0, 0.1 - G * np.cos(angle) / 4e6])  # resting on its four corners
ts = jnp.linspace(0.0, 1.0, 101)
t0 = time.perf_counter()
slide = mbjax.simulate(box, jnp.asarray(np.concatenate([start, quat])), jnp.zeros(6), 0.0, 1.0,
                       method=contact.WithContacts(slope), saveat=ts, rtol=1e-9, atol=1e-9)
down = -R[:, 0]  # down the slope
s = (np.asarray(slide.q[:, :3]) - start) @ down
a = (s[100] - 2 * s[75] + s[50]) / 0.25**2  # constant acceleration after the first instants
coulomb = G * (np.sin(angle) - mu * np.cos(angle))
print(f"box: simulated in {time.perf_counter() - t0:.1f} s; slides at {a:.6f} m/s^2, Coulomb's law {coulomb:.6f} "
      f"(relative difference {abs(a / coulomb - 1):.1e})")
example.record(apex_heights=peaks, restitution=e, slope_acceleration=a, coulomb_acceleration=coulomb)


def figure(plt):
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 6))
    ax1.plot(np.asarray(traj.ts), height)
    ax1.set_xlabel("time [s]")
    ax1.set_ylabel("ball above the floor [m]")
    ax1.set_title(f"bouncing ball, linear spring-damper floor (e = {e:.3f})")
    ax2.plot(np.asarray(ts), s, label="simulated")
    ax2.plot(np.asarray(ts), 0.5 * coulomb * np.asarray(ts) ** 2, "--", label="g (sin - mu cos) t^2 / 2")
    ax2.set_xlabel("time [s]")
    ax2.set_ylabel("box down the slope [m]")
    ax2.legend()
    fig.tight_layout()
    return fig


example.figure("contact_bounce.png", figure)
