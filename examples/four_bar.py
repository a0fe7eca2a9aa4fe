"""A planar four-bar linkage released from rest, and the drift of its loop-closure residual.

The four-bar is a tree (crank, coupler, rocker) plus a revolute cut joint pinning the coupler
tip to the rocker tip. The constrained equations only impose Phi_ddot = 0, so the residual
Phi(q) drifts with the integrator's error. Three runs of the same Dopri8 solve (diffrax):

- no stabilisation: the drift is measured;
- Baumgarte stabilisation, critically damped with a 0.1 s time constant (Mufti, Remark 4);
- projection of (q, qd) back onto the constraint manifold (Gauss-Newton assembly and the
  velocity projection) after every output interval.

Run ``python examples/four_bar.py [--quick] [--out DIR]`` (``--quick``: 5 s instead of 60 s).
With matplotlib it saves a plot, ``four_bar.png``.
"""

import time

from _common import Example  # first: float64 before any JAX array exists

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from mbjax import constraints as C

example = Example(__doc__, quick="5 s instead of 60 s")
duration = 5.0 if example.quick else 60.0
tol = 1e-10
model, closures = C.four_bar()
print(model, closures, sep="\n")
q0 = C.assemble(model, closures, jnp.array([1.0, -0.6, 1.8]))  # closes the loop from a guess
qd0 = jnp.zeros(model.nv)


@jax.jit
def solve(q0, qd0, t0, t1, alpha, beta):
    """States at 11 times in [t0, t1] and the solver's step count."""
    field = C.constrained_vector_field(model, closures, alpha=alpha, beta=beta)
    sol = diffrax.diffeqsolve(diffrax.ODETerm(field), diffrax.Dopri8(), t0, t1, 1e-3, (q0, qd0),
                              saveat=diffrax.SaveAt(ts=jnp.linspace(t0, t1, 11)), max_steps=100_000,
                              stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol))
    return sol.ys, sol.stats["num_steps"]


residuals = jax.jit(jax.vmap(lambda q: C.loop_residual(model, closures, q)))
segments = int(duration)  # one-second output intervals
ts = np.linspace(0.0, duration, 10 * segments + 1)
runs = {}
for name in ("none", "baumgarte", "projection"):
    alpha, beta = C.critical(0.1) if name == "baumgarte" else (0.0, 0.0)
    t_start = time.perf_counter()
    q, qd, qs, steps = q0, qd0, [q0[None]], 0
    for k in range(segments):
        (q_seg, qd_seg), n = solve(q, qd, float(k), float(k + 1), alpha, beta)
        q, qd, steps = q_seg[-1], qd_seg[-1], steps + int(n)
        if name == "projection":
            q, qd = C.project(model, closures, q, qd)
        qs.append(q_seg[1:])
    qs = jnp.concatenate(qs)
    err = np.max(np.abs(np.asarray(residuals(qs))), axis=1)
    runs[name] = (np.asarray(qs), err)
    print(f"{name:>10}: {steps} steps in {time.perf_counter() - t_start:.1f} s, "
          f"max |Phi| = {err.max():.2e}, at t = {duration:g} s: {err[-1]:.2e}")
example.record(duration=duration, max_residual={name: err.max() for name, (_, err) in runs.items()},
               final_residual={name: err[-1] for name, (_, err) in runs.items()})


def figure(plt):
    """Joint angles of the stabilised run, and the loop residual of all three."""
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))
    qs = runs["baumgarte"][0]
    for i, label in enumerate(("crank", "coupler (relative)", "rocker")):
        ax1.plot(ts, qs[:, i], label=label)
    ax1.set_ylabel("joint angle [rad]")
    ax1.legend()
    for name, (_, err) in runs.items():
        ax2.semilogy(ts[1:], np.maximum(err[1:], 1e-17), label=name)
    ax2.set_xlabel("time [s]")
    ax2.set_ylabel("max |Phi(q)| [m]")
    ax2.set_title(f"loop-closure residual, Dopri8 rtol = atol = {tol:g}")
    ax2.legend()
    return fig


example.figure("four_bar.png", figure)
