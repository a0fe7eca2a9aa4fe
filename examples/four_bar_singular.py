"""A parallelogram four-bar driven through its change points, where Phi_q loses rank.

Crank and rocker of equal length, coupler as long as the ground link: whenever the crank
angle is a multiple of pi all links are collinear and the linkage can continue as a
parallelogram or fold into an anti-parallelogram (a change point). There the constraint
Jacobian Phi_q drops from rank 2 to rank 1 and the Lagrange-multiplier equations (KKT,
Mufti 1983 Eq. 73) are singular; Huang et al. 2000 calls this the deficiency of the multiplier method.

Without gravity, a parallelogram started with crank speed w keeps it: theta(t) = w t exactly
(its kinetic energy (I_crank + I_rocker + m_coupler l_crank^2) w^2 / 2 does not depend on
theta). The dense KKT solve reports the rank problem at the change point. The SVD solve
(Eq. A-7 ... A-12) with the default cut-off rcond = 1e-10 treats the nearly singular
direction as a constraint and divides by its tiny singular value: the motion leaves the
parallelogram by about 0.7 rad. With rcond = 1e-3 it drops that direction near the change
point (Baumgarte stabilisation pulls the drift back) and follows theta = w t to ~1e-9; the
damped solve does so with its default damping. The singularity-free stepper of Huang et al. 2000
will join this comparison when it exists.

Run ``python examples/four_bar_singular.py [--quick] [--out DIR]`` (``--quick``: 1.7 s instead
of 6.5 s; either passes change points). With matplotlib it saves a plot,
``four_bar_singular.png``.
"""

import functools

from _common import Example  # first: float64 before any JAX array exists

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from mbjax import constraints as C

example = Example(__doc__, quick="1.7 s instead of 6.5 s")
duration = 1.7 if example.quick else 6.5
speed = 2.0
model, closures = C.four_bar(ground=1.0, crank=0.5, coupler=1.0, rocker=0.5)
model = eqx.tree_at(lambda m: m.gravity, model, jnp.zeros(3))
q0 = jnp.zeros(3)  # all links along x: the change point
qd0 = jnp.array([speed, -speed, speed])  # parallelogram motion: the coupler translates
s = np.linalg.svd(np.asarray(C.loop_jacobian(model, closures, q0)), compute_uv=False)
print(f"singular values of Phi_q at the change point: {s}")

try:
    C.constrained_forward_dynamics(model, closures, q0, qd0, jnp.zeros(3), method="kkt").qdd.block_until_ready()
except Exception as e:  # the rank error of the dense KKT solve
    print("kkt:", next(line for line in str(e).splitlines() if "rank-deficient" in line).strip())

ts = jnp.linspace(0.0, duration, 301)


@functools.partial(jax.jit, static_argnames="method")
def solve(y0, rcond, method):
    """The motion from y0 = (q0, qd0); rcond is traced, so both SVD cut-offs share one compilation."""
    field = C.constrained_vector_field(model, closures, method=method, rcond=rcond, alpha=20.0, beta=100.0)
    return diffrax.diffeqsolve(
        diffrax.ODETerm(field), diffrax.Dopri5(), 0.0, duration, 1e-3, y0, saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-9, atol=1e-9), max_steps=100_000)


change_points = int(speed * duration // np.pi)
runs, theta_error = {}, {}
for label, method, rcond in (("svd, rcond 1e-10", "svd", 1e-10), ("svd, rcond 1e-3", "svd", 1e-3),
                             ("damped", "damped", 1e-10)):
    sol = solve((q0, qd0), jnp.asarray(rcond), method)
    qs = np.asarray(sol.ys[0])
    res = np.max(np.abs(np.asarray(jax.vmap(lambda q: C.loop_residual(model, closures, q))(sol.ys[0]))), axis=1)
    runs[label] = (qs, res)
    err = theta_error[label] = np.max(np.abs(qs[:, 0] - speed * np.asarray(ts)))
    print(f"{label:>16}: {int(sol.stats['num_steps'])} steps, |theta - w t| <= {err:.2e} rad, "
          f"max |Phi| = {res.max():.2e}, change points passed: {change_points}")
example.record(duration=duration, change_points=change_points, theta_error=theta_error,
               max_residual={label: res.max() for label, (_, res) in runs.items()})


def figure(plt):
    """Crank angle against w t, conditioning of Phi_q (along the damped run), and the loop residual."""
    sigma = np.asarray(jax.vmap(lambda q: jnp.linalg.svd(C.loop_jacobian(model, closures, q), compute_uv=False))(
        jnp.asarray(runs["damped"][0])))
    fig, axes = plt.subplots(3, 1, sharex=True, figsize=(7, 7))
    for method, (qs, res) in runs.items():
        axes[0].plot(ts, qs[:, 0] - speed * np.asarray(ts), label=f"{method}: crank angle - w t")
        axes[2].semilogy(ts, np.maximum(res, 1e-17), label=method)
    axes[0].set_ylabel("[rad]")
    axes[0].legend()
    axes[1].semilogy(ts, sigma[:, -1] / sigma[:, 0])
    axes[1].set_ylabel("s_min / s_max of Phi_q")
    axes[2].set_ylabel("max |Phi(q)| [m]")
    axes[2].set_xlabel("time [s]")
    axes[2].legend()
    return fig


example.figure("four_bar_singular.png", figure)
