"""Resolved-rate control of a satellite's end effector through the generalized Jacobian.

On a free-floating robot the end-effector velocity is not J_m phid: the base reacts. With the
momentum conserved, Wilde et al.'s Eq. (5) and (21) give ``v_ee = J* phid + drift`` with
Yoshida's generalized Jacobian J* = J_m - J_s H_0^-1 H_0m (``drift`` = J_s H_0^-1 (P, L_0), zero
for zero momentum). A resolved-rate controller commands the joint rates

    phid_cmd = pinv(J*_v) (v_des + K (p_des - p) - drift_v)

and a joint-rate loop turns them into torques through mbjax.floating_inverse_dynamics. The
tool traces a 5 cm circle in 10 s while the base drifts and turns freely.

Printed: the tracking error, and how well J* phid predicts the simulated end-effector
velocity (the seed's claim, checked at every saved state).

Run ``python examples/free_floating_tracking.py [--quick] [--out DIR]`` (``--quick``: 51 saved
points instead of 201, tolerance 1e-8 instead of 1e-11). With matplotlib it saves a plot,
``free_floating_tracking.png``.
"""

from _common import Example  # first: float64 before any JAX array exists

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import mbjax

T = 10.0
RADIUS = 0.05
PHI0 = jnp.array([0.0, 0.6, 0.0, -1.2, 0.0, 0.6, 0.0])

model = mbjax.load_bundled("space_robot")
q_start = jnp.concatenate([jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]), PHI0])
p_start = mbjax.frame_placement(model, q_start, "tool")[1]


def circle(t):
    """Desired tool position: a circle in the world y-z plane through the start, rest to rest."""
    u = 2 * jnp.pi * jnp.clip(t, 0.0, T) / T
    s = u - jnp.sin(u)
    return p_start + RADIUS * jnp.array([0.0, jnp.sin(s), 1.0 - jnp.cos(s)])


class ResolvedRate(eqx.Module):
    """Joint torques (nv,) from the resolved-rate law through J* (see the module docstring)."""

    model: mbjax.Model
    k_task: float = 2.0  # 1/s, position feedback of the task
    k_rate: float = 50.0  # 1/s, joint-rate loop

    def __call__(self, t, q, qd):
        p_des, v_des = jax.jvp(circle, (t,), (jnp.ones_like(t),))
        p = mbjax.frame_placement(self.model, q, "tool")[1]
        xd = mbjax.to_floating(self.model, q, qd)
        h = jnp.concatenate(mbjax.floating_momentum(self.model, q, xd, about="base"))
        gj = mbjax.generalized_jacobian(self.model, q, "tool", base_momentum=h)
        phid_cmd = jnp.linalg.pinv(gj.J[:3]) @ (v_des + self.k_task * (p_des - p) - gj.drift[:3])
        _, tau = mbjax.floating_inverse_dynamics(self.model, q, xd, self.k_rate * (phid_cmd - qd[6:]))
        return jnp.concatenate([jnp.zeros(6, tau.dtype), tau])


def main():
    example = Example(__doc__, quick="51 saved points instead of 201, tolerance 1e-8 instead of 1e-11")
    ts = jnp.linspace(0.0, T, 51 if example.quick else 201)
    tol = 1e-8 if example.quick else 1e-11
    traj = mbjax.simulate(model, q_start, jnp.zeros(model.nv), 0.0, T, tau=ResolvedRate(model), method="momentum",
                          solver=diffrax.Dopri8(), rtol=tol, atol=tol, saveat=ts, max_steps=200_000)

    @jax.vmap
    def check(t, q, qd):
        v_sim = mbjax.frame_velocity(model, q, qd, "tool")  # from the simulated state
        v_pred = mbjax.generalized_jacobian(model, q, "tool").J @ qd[6:]  # J* phid, zero momentum
        return circle(t) - mbjax.frame_placement(model, q, "tool")[1], v_sim, v_pred

    err, v_sim, v_pred = (np.asarray(x) for x in check(traj.ts, traj.q, traj.qd))
    base = np.asarray(jax.vmap(lambda q: mbjax.spatial.quat_log(q[3:7]))(traj.q))
    tracking = np.max(np.linalg.norm(err, axis=1))
    base_turn = np.degrees(np.max(np.linalg.norm(base, axis=1)))
    gap, scale = np.max(np.abs(v_pred - v_sim)), np.max(np.abs(v_sim))
    print(f"tracking: max |p_des - p| = {tracking * 1e3:.3f} mm over a {RADIUS * 100:.0f} cm circle")
    print(f"base turned by up to {base_turn:.3f} deg")
    print(f"J* phid vs simulated end-effector velocity: max difference {gap:.2e} (velocity scale {scale:.2e})")
    example.record(tracking_error=tracking, base_turn_deg=base_turn, velocity_prediction_error=gap,
                   velocity_scale=scale)
    assert gap <= 1e-8, "the generalized Jacobian does not predict the end-effector velocity"
    example.figure("free_floating_tracking.png", lambda plt: figure(plt, ts, err, base, v_pred - v_sim), dpi=100)


def figure(plt, ts, err, base, velocity_gap):
    """The tool's path, the base's reaction, and the gap between J* phid and the simulation."""
    tsn = np.asarray(ts)
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    des = np.asarray(jax.vmap(circle)(ts))
    act = des - err
    ax[0].plot(des[:, 1], des[:, 2], "k:", label="desired")
    ax[0].plot(act[:, 1], act[:, 2], label="simulated")
    ax[0].set(xlabel="y (m)", ylabel="z (m)", title="tool path", aspect="equal")
    ax[0].legend()
    for k, name in enumerate("xyz"):
        ax[1].plot(tsn, np.degrees(base[:, k]), label=name)
    ax[1].set(xlabel="t (s)", ylabel="deg", title="base rotation (reaction)")
    ax[1].legend()
    ax[2].semilogy(tsn, np.max(np.abs(velocity_gap), axis=1) + 1e-18)
    ax[2].set(xlabel="t (s)", title="|J* phid - v_ee| (simulated)")
    return fig


if __name__ == "__main__":
    main()
