"""Sayers' satellite (1991, Table 2) slews its camera; the bus turns the other way.

The satellite of ``mbjax.kane.satellite()`` (bus, clock, camera, massless body E and a
flexible boom, no gravity) is simulated with Kane's equations in the paper's own variables:
S q' = v (Eqs. 24, 29) and M u' = f (Eqs. 40, 42), integrated with diffrax (Tsit5,
rtol = atol = 1e-12). The manoeuvre: the clock's motor turns the camera turntable by 90 deg
and the camera's motor tilts it by 30 deg (PD servos on smooth rest-to-rest profiles); the boom's
two joints (q9, q10) are torsional springs with light damping, released from a small
deflection. The bus starts with a slow drift (u1 = 0.02 m/s) and spin (u6 = 0.002 rad/s,
the ramp in q6). All torques are internal, so the linear and angular momentum stay constant
while the bus attitude (Euler angles q4-q6) reacts.

Printed: the bus's net rotation, the camera slew, and the largest relative drift of the
momentum. Plotted (matplotlib): bus attitude, joint angles and momentum against time.

Run ``python examples/kane_satellite.py [--quick] [--out DIR]`` (``--quick``: 10 s instead of
60 s). With matplotlib it saves a plot, ``kane_satellite.png``.
"""

import time

from _common import Example  # first: float64 before any JAX array exists

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from mbjax.kane import kane_dynamics, kane_momentum, satellite

example = Example(__doc__, quick="10 s instead of 60 s")
DURATION = 10.0 if example.quick else 60.0
SLEW = 8.0  # duration of the slew (s)
K_BOOM, C_BOOM = 40.0, 0.8  # boom joint stiffness (N m / rad) and damping (N m s / rad)
TARGET = jnp.radians(jnp.array([90.0, 30.0]))  # clock (q7) and camera (q8) slew
KP, KD = jnp.array([20.0, 10.0]), jnp.array([20.0, 10.0])  # servo gains (N m / rad, N m s / rad)

system = satellite()


def profile(t):
    """Smooth rest-to-rest profile from 0 to 1 over SLEW seconds, and its rate."""
    s = jnp.clip(t / SLEW, 0.0, 1.0)
    return s - jnp.sin(2 * jnp.pi * s) / (2 * jnp.pi), (1 - jnp.cos(2 * jnp.pi * s)) / SLEW * (t < SLEW)


def forces(t, q, u):
    """Generalized forces on the speeds u7-u10 (u = q' there: joint torques). The clock and
    camera motors are PD servos following the slew; the boom joints are damped springs."""
    s, s_dot = profile(t)
    ref, ref_dot = TARGET * s, TARGET * s_dot
    servo = KP * (ref - q[6:8]) + KD * (ref_dot - u[6:8])
    return jnp.zeros(10).at[6:8].set(servo).at[8:].set(-K_BOOM * q[8:] - C_BOOM * u[8:])


def vector_field(t, y, args):
    q, u = y
    dyn = kane_dynamics(system, q, u, forces(t, q, u))
    return dyn.q_dot, dyn.u_dot


q0 = jnp.zeros(10).at[8].set(0.05).at[9].set(-0.03)  # boom slightly deflected
u0 = jnp.zeros(10).at[0].set(0.02).at[5].set(0.002)  # a slow drift and spin of the bus
ts = jnp.linspace(0.0, DURATION, 401)


@jax.jit
def simulate(q0, u0):
    sol = diffrax.diffeqsolve(diffrax.ODETerm(vector_field), diffrax.Tsit5(), 0.0, DURATION, 0.01, (q0, u0),
                              saveat=diffrax.SaveAt(ts=ts), max_steps=100_000,
                              stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-12))
    q, u = sol.ys
    return q, u, jax.vmap(lambda q, u: kane_momentum(system, q, u))(q, u), sol.stats["num_steps"]


t0 = time.perf_counter()
q, u, h, steps = jax.block_until_ready(simulate(q0, u0))
print(f"simulated {DURATION:g} s of the satellite in {int(steps)} steps, {time.perf_counter() - t0:.1f} s wall "
      "(compilation included)")
q, h = np.asarray(q), np.asarray(h)
drift_lin = np.abs(h[:, :3] - h[0, :3]).max() / np.abs(h[0, :3]).max()
drift_ang = np.abs(h[:, 3:] - h[0, 3:]).max() / np.abs(h[0, 3:]).max()
print(f"camera turntable turned {np.degrees(q[-1, 6]):.1f} deg, camera tilted {np.degrees(q[-1, 7]):.1f} deg")
print(f"bus attitude change (q4, q5, q6): {np.degrees(q[-1, 3:6] - q[0, 3:6]).round(3)} deg")
print(f"momentum drift (relative): linear {drift_lin:.2e}, angular {drift_ang:.2e}")
example.record(duration=DURATION, turntable_deg=np.degrees(q[-1, 6]), camera_tilt_deg=np.degrees(q[-1, 7]),
               bus_attitude_change_deg=np.degrees(q[-1, 3:6] - q[0, 3:6]), linear_momentum_drift=drift_lin,
               angular_momentum_drift=drift_ang)
assert max(drift_lin, drift_ang) < 1e-9, "momentum should be conserved"


def figure(plt):
    """Bus attitude, joint angles and momentum against time."""
    t = np.asarray(ts)
    fig, ax = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for k, name in zip((3, 4, 5), ("q4", "q5", "q6")):
        ax[0].plot(t, np.degrees(q[:, k]), label=name)
    ax[0].set_ylabel("bus attitude (deg)")
    ax[0].set_title("Satellite (Sayers 1991, Table 2): bus reaction to a camera slew")
    for k, name in zip((6, 7, 8, 9), ("clock q7", "camera q8", "boom q9", "boom q10")):
        ax[1].plot(t, np.degrees(q[:, k]), label=name)
    ax[1].set_ylabel("joint angle (deg)")
    for k, name in enumerate(("p_x", "p_y", "p_z", "H_x", "H_y", "H_z")):
        ax[2].plot(t, h[:, k] - h[0, k], label=name)
    ax[2].set_ylabel("momentum - initial (SI)")
    ax[2].set_xlabel("t (s)")
    for a in ax:
        a.legend(loc="upper right", fontsize=8)
        a.grid(alpha=0.3)
    return fig


example.figure("kane_satellite.png", figure, dpi=110)
