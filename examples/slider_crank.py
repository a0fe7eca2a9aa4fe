"""A slider-crank driven by a constant crank torque: motion and the force in the wrist pin.

The tree is crank -> connecting rod, plus a slider on a prismatic joint; a planar revolute cut
joint pins the rod's tip to the slider. The loop forces come out of
``constrained_forward_dynamics`` as multipliers and as the pin's spatial force
(``ConstrainedDynamics.wrench``). The slider position is checked against the exact
kinematics of the mechanism, ``x = r cos(theta) + sqrt(l^2 - r^2 sin(theta)^2)``.

Run ``python examples/slider_crank.py [--quick] [--out DIR]`` (``--quick``: 1 s instead of 4 s).
With matplotlib it saves a plot, ``slider_crank.png``.
"""

from _common import Example  # first: float64 before any JAX array exists

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from mbjax import constraints as C

example = Example(__doc__, quick="1 s instead of 4 s")
duration = 1.0 if example.quick else 4.0
r, l = 0.3, 1.0
model, closures = C.slider_crank(crank=r, rod=l)
q0 = C.assemble(model, closures, jnp.array([0.3, -0.3, 1.2]))
tau = jnp.array([10.0, 0.0, 0.0])  # N m on the crank
stab = dict(zip(("alpha", "beta"), C.critical(0.05)))
field = C.constrained_vector_field(model, closures, control=lambda t, q, qd, args: tau, **stab)
ts = jnp.linspace(0.0, duration, 201)
sol = jax.jit(lambda y0: diffrax.diffeqsolve(
    diffrax.ODETerm(field), diffrax.Tsit5(), 0.0, duration, 1e-3, y0, saveat=diffrax.SaveAt(ts=ts),
    stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10), max_steps=100_000))((q0, jnp.zeros(3)))
qs, qds = sol.ys
result = jax.jit(jax.vmap(lambda q, qd: C.constrained_forward_dynamics(model, closures, q, qd, tau, **stab)))(qs, qds)
theta, x = np.asarray(qs[:, 0]), np.asarray(qs[:, 2])
exact = r * np.cos(theta) + np.sqrt(l**2 - (r * np.sin(theta)) ** 2)
force = np.linalg.norm(np.asarray(result.wrench[:, 0, :3]), axis=-1)
print(model, closures, sep="\n")
print(f"{int(sol.stats['num_steps'])} steps; crank turned {theta[-1] - theta[0]:.2f} rad in {duration:g} s")
kinematics_error, residual = np.max(np.abs(x - exact)), np.max(np.abs(np.asarray(result.residual)))
print(f"slider position vs exact kinematics: max error {kinematics_error:.2e} m")
print(f"loop residual: max {residual:.2e} m; pin force up to {force.max():.2f} N")
example.record(duration=duration, crank_turn=theta[-1] - theta[0], kinematics_error=kinematics_error,
               max_residual=residual, max_pin_force=force.max())


def figure(plt):
    """Slider position and crank angle, and the force in the wrist pin."""
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(7, 5.5))
    ax1.plot(ts, x, label="slider x [m]")
    ax1.plot(ts, theta, label="crank angle [rad]")
    ax1.legend()
    ax2.plot(ts, force)
    ax2.set_ylabel("wrist-pin force [N]")
    ax2.set_xlabel("time [s]")
    return fig


example.figure("slider_crank.png", figure)
