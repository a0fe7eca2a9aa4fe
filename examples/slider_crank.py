"""A slider-crank driven by a constant crank torque: motion and the force in the wrist pin.

The tree is crank -> connecting rod, plus a slider on a prismatic joint; a planar revolute cut
joint pins the rod's tip to the slider. The loop forces come out of
``constrained_forward_dynamics`` as multipliers and as the pin's spatial force
(``ConstrainedDynamics.wrench``). The slider position is checked against the exact
kinematics of the mechanism, ``x = r cos(theta) + sqrt(l^2 - r^2 sin(theta)^2)``.

Run ``python examples/slider_crank.py [--quick] [out.png]`` (``--quick``: 1 s instead of 4 s).
"""

import sys

import jax

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from mbjax import constraints as C  # noqa: E402

args = [a for a in sys.argv[1:] if a != "--quick"]
duration = 1.0 if "--quick" in sys.argv else 4.0
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
print(f"slider position vs exact kinematics: max error {np.max(np.abs(x - exact)):.2e} m")
print(f"loop residual: max {np.max(np.abs(np.asarray(result.residual))):.2e} m; pin force up to {force.max():.2f} N")

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("matplotlib is not installed (`pip install matplotlib`): no plot")
else:
    out = args[0] if args else "slider_crank.png"
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(7, 5.5))
    ax1.plot(ts, x, label="slider x [m]")
    ax1.plot(ts, theta, label="crank angle [rad]")
    ax1.legend()
    ax2.plot(ts, force)
    ax2.set_ylabel("wrist-pin force [N]")
    ax2.set_xlabel("time [s]")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"saved {out}")
