"""Huang et al.'s 3-leg Stewart platform (2000, Fig. 10) with the singularity-free stepper.

The printed data are repaired as :mod:`mbjax.constraints.huang_models` documents (J7/J8
positions swapped, motor axes parallel to the knee axes); the printed pose closes every loop.
Three constant 10 N m motors spin the cranks; whenever a crank and its leg are collinear the
chain is at a kinematic (serial) singularity and the platform's vertical acceleration kinks
(the paper reports 0.76, 1.32 and 1.72 s). The run uses Huang's stepper (39 unknown
reactions) and, beside it, the dense KKT multiplier solve with a semi-implicit Euler step.

Run ``python examples/stewart_platform.py [--quick] [--out DIR]`` (``--quick``: 0.3 s instead of
2 s). With matplotlib it saves a plot, ``stewart_platform.png``.
"""

from _common import Example  # first: float64 before any JAX array exists

import jax
import jax.numpy as jnp
import numpy as np

import mbjax
from mbjax.constraints import STEWART_PRINTED

example = Example(__doc__, quick="0.3 s instead of 2 s")
T = 0.3 if example.quick else 2.0
model, closures, q0, tau = mbjax.stewart_platform()
qd0, tau = jnp.zeros(model.nv), jnp.asarray(tau)
reactions = mbjax.constraints.huang_joints(model, closures).nrows
printed_residual = np.abs(np.asarray(mbjax.loop_residual(model, closures, q0))).max()
print(f"{model.nbodies} bodies, nq = {model.nq}, {reactions} unknown reactions; printed pose: max |Phi| = "
      f"{printed_residual:.1e}")
example.record(duration=T, unknown_reactions=reactions, printed_pose_residual=printed_residual)


def platform_heave(q, qd):
    """World height and vertical velocity of the platform's centre of mass."""
    states = jax.vmap(lambda q, qd: mbjax.maximal_state(model, q, qd))(q, qd)
    return np.asarray(states.r[:, -1, 2]), np.asarray(states.r_dot[:, -1, 2])


def collinear(qs):
    """sin of the angle between each crank and its leg (zero: a serial singularity), (T, 3)."""
    P = {k + 1: np.asarray(x, float) for k, x in enumerate(STEWART_PRINTED["joint"])}

    def per_state(q):
        R, p = mbjax.forward_kinematics(model, q)
        out = []
        for i in (1, 2, 3):
            crank, leg = p[2 * i - 1] - p[2 * i - 2], R[2 * i - 1] @ (P[i] - P[i + 3])
            out.append(jnp.linalg.norm(jnp.cross(crank, leg)) / (jnp.linalg.norm(crank) * jnp.linalg.norm(leg)))
        return jnp.stack(out)

    return np.asarray(jax.vmap(per_state)(qs))


runs, outcomes = {}, {}
steps = int(round(T / 5e-4))  # every run takes as many steps (one compiled rollout per method), kept up to T
for label, method, dt in (("huang, dt = 0.0005", "huang", 5e-4), ("huang, dt = 0.002 (paper)", "huang", 2e-3),
                          ("kkt, dt = 0.0005", "kkt", 5e-4)):
    try:
        traj, _ = mbjax.constraints.rollout(model, closures, q0, qd0, tau, jnp.asarray(dt), steps, method=method)
        traj.q.block_until_ready()
    except Exception as e:  # the KKT solve reports a rank-deficient Phi_q
        outcomes[label] = {"stopped": str(e).splitlines()[0]}
        print(f"{label}: stopped: {outcomes[label]['stopped']}")
        continue
    n = int(round(T / dt)) + 1  # states up to T
    res = np.abs(np.asarray(traj.residual)).max(1)[:n]
    bad = ~np.isfinite(res) | (res > 1e-2)
    end = int(np.argmax(bad)) if bad.any() else len(res)
    z, vz = platform_heave(traj.q, traj.qd)  # of every state: one compilation for all runs
    runs[label] = (np.asarray(traj.ts)[:end], z[:end], vz[:end], collinear(traj.q)[:end], res[:end])
    completed = end == len(res)
    outcomes[label] = {"completed": completed, "end": T if completed else float(traj.ts[end]),
                       "max_residual": res[:end].max()}
    print(f"{label}: {'ran ' + str(T) + ' s' if completed else f'diverged at t = {traj.ts[end]:.3f} s'}, "
          f"max |Phi| = {res[:end].max():.2e} m, crank rates at the end {np.asarray(traj.qd[end - 1, :6:2]).round(1)} rad/s")
example.record(runs=outcomes)

ts, _, _, sines, _ = runs["huang, dt = 0.0005"]
events = [float(ts[k]) for i in range(3) for k in np.nonzero(np.diff(np.sign(np.diff(sines[:, i]))) > 0)[0] + 1
          if sines[k, i] < 0.05]
print(f"collinear crank and leg (serial singularities) at t = {[round(e, 3) for e in sorted(events)]} s "
      f"(the paper reports kinks at 0.76, 1.32, 1.72 s)")
example.record(serial_singularities=sorted(events))


def figure(plt):
    """Platform height and vertical acceleration, crank-leg angles and loop residual."""
    fig, axes = plt.subplots(4, 1, sharex=True, figsize=(8, 10))
    for label, (t, z_, vz_, s_, r_) in runs.items():
        axes[0].plot(t, z_, label=label)
        axes[1].plot(t, np.gradient(vz_, t), label=label)
        axes[3].semilogy(t, np.maximum(r_, 1e-17), label=label)
    axes[2].plot(ts, sines, label=["chain 1", "chain 2", "chain 3"])
    for t_event in events:
        for ax in axes:
            ax.axvline(t_event, color="0.8", lw=0.5)
    axes[0].set_ylabel("platform z (m)")
    axes[1].set_ylabel("platform a_z (m/s²)")
    axes[2].set_ylabel("sin(crank, leg)")
    axes[3].set_ylabel("max |Phi| (m)")
    axes[3].set_xlabel("t (s)")
    for ax in axes:
        ax.legend(fontsize=7)
    return fig


example.figure("stewart_platform.png", figure, dpi=100)
