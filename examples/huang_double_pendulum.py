"""Huang et al.'s planar double pendulum (2000, Fig. 8) with the singularity-free stepper.

The pendulum starts at rest with both links along one line (theta1 = theta2, the paper's
"known kinematic singularity"). The stepper's error against a Dopri8 reference at 1e-12
tolerance is measured as dt shrinks, with the multiplier method (semi-implicit Euler on the
tree dynamics) beside it; the reactions of Eq. (36) are compared with Newton's second law;
and the matrix of Eq. (36) at theta1 = theta2 is checked against the printed (9/2) dt^2.

Run ``python examples/huang_double_pendulum.py [--quick] [--out DIR]`` (``--quick``: 0.25 s
instead of 1 s, without the smallest dt). With matplotlib it saves a plot,
``huang_double_pendulum.png``.
"""

from _common import Example  # first: float64 before any JAX array exists

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

import mbjax
from mbjax.constraints import DOUBLE_PENDULUM as P

example = Example(__doc__, quick="0.25 s instead of 1 s, dt down to 1e-3 instead of 5e-4")
T = 0.25 if example.quick else 1.0
dts = [4e-3, 2e-3, 1e-3] if example.quick else [4e-3, 2e-3, 1e-3, 5e-4]
model = mbjax.huang_double_pendulum()
q0, qd0, tau = jnp.array([0.0, 0.0]), jnp.zeros(2), jnp.zeros(2)

ref = mbjax.simulate(model, q0, qd0, 0.0, T, solver=diffrax.Dopri8(), rtol=1e-12, atol=1e-12,
                     saveat=jnp.linspace(0.0, T, 201))
print(f"reference (Dopri8, tol 1e-12) at t = {T}: theta = {np.asarray(ref.q[-1])}")
errors, orders = {}, {}
steps = int(round(T / min(dts)))  # every dt runs this many steps (one compiled rollout per method), read at T
for method in ("huang", "kkt"):
    for dt in dts:
        traj, _ = mbjax.constraints.rollout(model, None, q0, qd0, tau, jnp.asarray(dt), steps, method=method)
        errors[method, dt] = float(np.abs(np.asarray(traj.q[int(round(T / dt))] - ref.q[-1])).max())
    e = np.array([errors[method, dt] for dt in dts])
    orders[method] = np.log2(e[:-1] / e[1:])
    print(f"{method:>5}: |q - q_ref| at t = {T}: " + ", ".join(f"{x:.2e}" for x in e)
          + f" for dt = {dts}; measured orders {np.round(orders[method], 3)}")
example.record(duration=T, dt=dts, error={method: [errors[method, dt] for dt in dts] for method in orders},
               order=orders)

# Eq. (36) at theta1 = theta2: the in-plane 4 x 4 block of the 10 x 10 system
dt = P["dt"]
matrix, _ = mbjax.huang_system(model, None, jnp.array([0.3, 0.0]), qd0, tau, dt)
names = mbjax.constraints.huang_joints(model).row_names
idx = [names.index(n) for n in ("joint1/x", "joint1/y", "joint2/x", "joint2/y")]
block = np.asarray(matrix)[np.ix_(idx, idx)]
k = P["mass"] * P["half_length"] ** 2 / P["inertia"]
det = abs(np.linalg.det(block))
predicted = (0.5 * dt**2 / P["mass"]) ** 4 * (k * k + 6 * k + 1)
print(f"|det| of Eq. (36), in-plane block, theta1 = theta2, dt = {dt}: {det:.4e}"
      f" = (dt^2 / 2m)^4 (k^2 + 6k + 1) with k = m l^2 / J = {k:.4f}: {predicted:.4e}")
print(f"  in the paper's units (m = 1, k = 4): 41 (dt^2/2)^4 = {41 * (dt**2 / 2) ** 4:.3e}; printed (9/2) dt^2 = "
      f"{4.5 * dt**2:.1e} (the power of dt is wrong, and the printed matrix drops the sign of Q2 = -R2)")
condition = np.linalg.cond(np.asarray(matrix))
print(f"  condition number of the full 10 x 10 system: {condition:.2e}")
example.record(determinant=det, determinant_predicted=predicted, condition_number=condition)

# reactions of one step against Newton's second law with the reference accelerations
q, qd = ref.q[100], ref.qd[100]
out = mbjax.constraints.step(model, None, q, qd, tau, dt, method="huang")
qdd = mbjax.aba(model, q, qd, tau)
acc = jax.jacfwd(jax.jacfwd(lambda s: mbjax.maximal_state(model, q + s * qd + 0.5 * s * s * qdd, qd).r))(0.0)
r2 = P["mass"] * (acc[1] - model.gravity)
exact = jnp.stack([P["mass"] * (acc[0] - model.gravity) + r2, r2])
force_difference = float(np.abs(out.joint_wrench[:, :3] - exact).max())
print(f"hinge forces at t = {float(ref.ts[100]):.3f} s: Huang {np.asarray(out.joint_wrench[:, :2]).round(6).tolist()}, "
      f"Newton {np.asarray(exact[:, :2]).round(6).tolist()} N; max difference {force_difference:.1e} N")
example.record(hinge_force_difference=force_difference)


def figure(plt):
    """The motion against the reference, and the error against dt for both methods."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    traj, _ = mbjax.constraints.rollout(model, None, q0, qd0, tau, jnp.asarray(dt), steps, method="huang")
    ts, qs = traj.ts[: int(round(T / dt)) + 1 : 10], traj.q[: int(round(T / dt)) + 1 : 10]  # up to T
    axes[0].plot(ref.ts, ref.q[:, 0], "k", label="theta1, reference")
    axes[0].plot(ref.ts, ref.q[:, 0] + ref.q[:, 1], "k--", label="theta2, reference")
    axes[0].plot(ts, qs[:, 0], ".", label=f"theta1, Huang dt = {dt}")
    axes[0].plot(ts, qs[:, 0] + qs[:, 1], ".", label="theta2, Huang")
    axes[0].set_xlabel("t (s)"), axes[0].set_ylabel("rad"), axes[0].legend()
    for method in ("huang", "kkt"):
        axes[1].loglog(dts, [errors[method, d] for d in dts], "o-", label=method)
    axes[1].loglog(dts, np.array(dts) * errors["huang", dts[0]] / dts[0], "k:", label="slope 1")
    axes[1].set_xlabel("dt (s)"), axes[1].set_ylabel(f"max |q - q_ref| at t = {T} s"), axes[1].legend()
    return fig


example.figure("huang_double_pendulum.png", figure, dpi=100)
