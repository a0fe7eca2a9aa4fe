"""A satellite's arm moves its joints around a closed loop, and the satellite ends up turned.

Wilde et al.'s non-holonomic effect: with no external force the momentum is conserved, and with
zero momentum the base attitude obeys w_0 = -[H_0^-1 H_0m]_w phid (Eq. 21). That constraint is
not integrable, so a joint path that returns the arm exactly to its start leaves the base at
a different attitude. The linear part is integrable: the system's centre of mass stays put.

The bundled ``space_robot`` (150 kg bus, 7-joint arm, zero gravity) is simulated for T = 10 s
with the momentum formulation (``method="momentum"``) and a computed-torque controller that
makes joints 2 and 4 trace a circle in joint space, rest to rest
(``mbjax.FloatingComputedTorque``: the base is not actuated, so momentum is conserved). Printed: the net base
rotation, how well the arm returned, and how well momentum and the CoM were conserved.

Run ``python examples/free_floating_loop.py [--quick] [--out DIR]`` (``--quick``: fewer saved
points, tolerance 1e-11 instead of 1e-12). With matplotlib it saves a plot,
``free_floating_loop.png``.
"""

from _common import Example  # first: float64 before any JAX array exists

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import mbjax

T = 10.0  # duration of the loop (s)
PHI0 = jnp.array([0.0, 0.6, 0.0, -1.2, 0.0, 0.6, 0.0])  # arm's start (and end) pose (rad)
RADIUS = 0.8  # radius of the circle traced by joints 2 and 4 (rad)


def loop(t):
    """Joint angles on the loop: a circle in (phi_2, phi_4), timed by s(t) = 2 pi t/T -
    sin(2 pi t/T) so that it starts and ends at rest."""
    u = 2 * jnp.pi * jnp.clip(t, 0.0, T) / T
    s = u - jnp.sin(u)
    return PHI0.at[1].add(RADIUS * jnp.sin(s)).at[3].add(RADIUS * (1 - jnp.cos(s)))


class Loop(eqx.Module):
    """The reference for the controller: loop(t) and its first two time derivatives."""

    def __call__(self, t):
        phid = lambda s: jax.jvp(loop, (s,), (jnp.ones_like(s),))[1]  # noqa: E731
        return loop(t), phid(t), jax.jvp(phid, (t,), (jnp.ones_like(t),))[1]


def base_rotation(q, q0):
    """Rotation vector (rad) of the base attitude relative to the start, world axes."""
    rel = mbjax.spatial.quat_multiply(q[..., 3:7], mbjax.spatial.quat_conjugate(q0[3:7]))
    return mbjax.spatial.quat_log(rel)


def run(model, q0, qd0, tol, n_save):
    return mbjax.simulate(
        model, q0, qd0, 0.0, T, tau=mbjax.FloatingComputedTorque(model, 100.0, 20.0, Loop()), method="momentum",
        solver=diffrax.Dopri8(), rtol=tol, atol=tol, saveat=jnp.linspace(0.0, T, n_save),
        momentum=True, max_steps=200_000,
    )


def main():
    example = Example(__doc__, quick="51 saved points instead of 501, tolerance 1e-11 instead of 1e-12")
    model = mbjax.load_bundled("space_robot")
    q0 = jnp.concatenate([jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]), PHI0])
    qd0 = jnp.zeros(model.nv)  # at rest: zero momentum
    tol = 1e-11 if example.quick else 1e-12
    n_save = 51 if example.quick else 501  # both runs save as many points: one compilation
    traj = run(model, q0, qd0, tol, n_save)

    rot = np.asarray(base_rotation(traj.q, q0))
    com = np.asarray(jax.vmap(lambda q: mbjax.center_of_mass(model, q))(traj.q))
    arm_error = float(jnp.max(jnp.abs(traj.q[-1, 7:] - PHI0)))
    rotation = np.degrees(np.linalg.norm(rot[-1]))
    speed = float(jnp.max(jnp.abs(traj.qd[-1, 6:])))
    momentum = float(jnp.max(jnp.abs(traj.momentum)))
    com_moved = np.max(np.linalg.norm(com - com[0], axis=1))
    print(f"net base rotation after the loop: {rotation:.4f} deg about {rot[-1] / np.linalg.norm(rot[-1])}")
    print(f"arm back at its start to {arm_error:.2e} rad; final joint speed {speed:.2e} rad/s")
    print(f"momentum: max |h(t)| = {momentum:.2e} (zero at the start)")
    print(f"centre of mass moved by at most {com_moved:.2e} m")

    # the same loop from a tumbling start: momentum is conserved to the solver's tolerance
    qd1 = jnp.zeros(model.nv).at[:6].set(jnp.array([0.05, -0.02, 0.01, 0.02, 0.01, -0.03]))
    tumbling = run(model, q0, qd1, tol, n_save)
    h = np.asarray(tumbling.momentum)
    drift = np.max(np.abs(h - h[0])) / np.max(np.abs(h[0]))
    print(f"tumbling start: momentum conserved to {drift:.2e} relative over {T} s")
    example.record(base_rotation_deg=rotation, base_rotation_vector=rot[-1], arm_return_error=arm_error,
                   final_joint_speed=speed, max_momentum=momentum, com_moved=com_moved, tumbling_momentum_drift=drift)
    assert drift <= 1e-9, "momentum is not conserved"
    assert com_moved <= 1e-10, "the CoM moved"
    example.figure("free_floating_loop.png", lambda plt: figure(plt, traj, rot, com), dpi=100)


def figure(plt, traj, rot, com):
    """The joints' closed loop, the base attitude, and the conservation of CoM and momentum."""
    ts = np.asarray(traj.ts)
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    phi = np.asarray(traj.q[:, 7:])
    ax[0].plot(np.degrees(phi[:, 1]), np.degrees(phi[:, 3]))
    ax[0].plot(np.degrees(PHI0[1]), np.degrees(PHI0[3]), "ko", label="start = end")
    ax[0].set(xlabel="joint 2 (deg)", ylabel="joint 4 (deg)", title="closed loop of the joints")
    ax[0].legend()
    for k, name in enumerate("xyz"):
        ax[1].plot(ts, np.degrees(rot[:, k]), label=name)
    ax[1].set(xlabel="t (s)", ylabel="base rotation (deg)", title="base attitude (rotation vector)")
    ax[1].legend()
    ax[2].semilogy(ts, np.linalg.norm(com - com[0], axis=1) + 1e-18, label="|CoM(t) - CoM(0)| (m)")
    ax[2].semilogy(ts, np.linalg.norm(np.asarray(traj.momentum), axis=1) + 1e-18, label="|h(t)| (zero momentum)")
    ax[2].set(xlabel="t (s)", title="conservation")
    ax[2].legend()
    return fig


if __name__ == "__main__":
    main()
