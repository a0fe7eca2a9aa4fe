"""Resolved-rate control of a satellite's end effector through the generalized Jacobian.

On a free-floating robot the end-effector velocity is not J_m phid: the base reacts. With the
momentum conserved, seed 001's Eq. (5) and (21) give ``v_ee = J* phid + drift`` with
Yoshida's generalized Jacobian J* = J_m - J_s H_0^-1 H_0m (``drift`` = J_s H_0^-1 (P, L_0), zero
for zero momentum). A resolved-rate controller commands the joint rates

    phid_cmd = pinv(J*_v) (v_des + K (p_des - p) - drift_v)

and a joint-rate loop turns them into torques through mbjax.floating_inverse_dynamics. The
tool traces a 5 cm circle in 10 s while the base drifts and turns freely.

Printed: the tracking error, and how well J* phid predicts the simulated end-effector
velocity (the seed's claim, checked at every saved state).

Run ``python examples/free_floating_tracking.py [--quick] [out.png]``.
"""

import sys

import jax

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import mbjax  # noqa: E402

QUICK = "--quick" in sys.argv
OUT = next((a for a in sys.argv[1:] if not a.startswith("--")), "free_floating_tracking.png")
T = 10.0
RADIUS = 0.05
TOL = 1e-8 if QUICK else 1e-11
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
    ts = jnp.linspace(0.0, T, 51 if QUICK else 201)
    traj = mbjax.simulate(model, q_start, jnp.zeros(model.nv), 0.0, T, tau=ResolvedRate(model), method="momentum",
                          solver=diffrax.Dopri8(), rtol=TOL, atol=TOL, saveat=ts, max_steps=200_000)

    @jax.vmap
    def check(t, q, qd):
        v_sim = mbjax.frame_velocity(model, q, qd, "tool")  # from the simulated state
        v_pred = mbjax.generalized_jacobian(model, q, "tool").J @ qd[6:]  # J* phid, zero momentum
        return circle(t) - mbjax.frame_placement(model, q, "tool")[1], v_sim, v_pred

    err, v_sim, v_pred = (np.asarray(x) for x in check(traj.ts, traj.q, traj.qd))
    base = np.asarray(jax.vmap(lambda q: mbjax.spatial.quat_log(q[3:7]))(traj.q))
    print(f"tracking: max |p_des - p| = {np.max(np.linalg.norm(err, axis=1)) * 1e3:.3f} mm over a {RADIUS * 100:.0f} cm circle")
    print(f"base turned by up to {np.degrees(np.max(np.linalg.norm(base, axis=1))):.3f} deg")
    gap = np.max(np.abs(v_pred - v_sim))
    print(f"J* phid vs simulated end-effector velocity: max difference {gap:.2e} "
          f"(velocity scale {np.max(np.abs(v_sim)):.2e})")
    assert gap <= 1e-8, "the generalized Jacobian does not predict the end-effector velocity"

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install mbjax[plot])")
        return
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
    ax[2].semilogy(tsn, np.max(np.abs(v_pred - v_sim), axis=1) + 1e-18)
    ax[2].set(xlabel="t (s)", title="|J* phid - v_ee| (simulated)")
    fig.tight_layout()
    fig.savefig(OUT, dpi=100)
    print(f"saved {OUT}")


if __name__ == "__main__":
    main()
